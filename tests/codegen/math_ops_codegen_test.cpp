// The CUDA text of tanh, sigmoid, erf, sin, cos and pow (on tiles and on scalars) and of -inf block
// padding (register loads and shared-tile loads), for every float dtype: the accurate CUDA math functions
// (tanhf/sinf/cosf/powf, their double versions for f64; f16/bf16 through f32), erf through the erf prelude's
// branch-free erf_f32 below f64 (its definition added once), a sigmoid without
// inf / inf, the -inf literal, no cp.async pipeline for a -inf padded load; and the text compiles with NVRTC
// where NVRTC is usable.
#include "codegen/assign_layouts.h"
#include "codegen/codegen.h"
#include "dsl/dsl.h"
#include "dsl/printer.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"
#include "source_text.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln;
using kiln_test::expect_nvrtc_compiles;
using kiln_test::occurrences;

namespace {

// Every new op on a (128,) tile and on scalars, and a row max over a (16, 32) block padded with -inf.
Kernel math_kernel(DType t) {
  KernelBuilder kb("math_ops");
  Value x = kb.arg_ptr("x", t), e = kb.arg_ptr("e", t), y = kb.arg_ptr("y", t), m = kb.arg_ptr("m", t);
  Value s = kb.arg("s", f32).to(t), rows = kb.arg("rows", i32), cols = kb.arg("cols", i32);
  Value offs = arange(0, 128);
  Value v = load(x + offs), w = load(e + offs);
  Value r = kiln::tanh(v) + kiln::sigmoid(v) + kiln::erf(v) + kiln::sin(v) + kiln::cos(v) + kiln::pow(v, w);
  Value sc = kiln::tanh(s) + kiln::sigmoid(s) + kiln::erf(s) + kiln::sin(s) + kiln::cos(s) + kiln::pow(s, s);
  store(y + offs, r + sc);
  Value bp = make_block_ptr(x, {rows, cols}, {cols, 1}, {0, 0}, {16, 32}, {1, 0});
  store(m + arange(0, 16), max(load(bp, {0, 1}, Padding::NegInf), 1));
  return kb.finish();
}

// A K loop of dots whose A tiles pad with -inf (shared-tile loads): never the zero-filling cp.async pipeline.
Kernel padded_dot_kernel() {
  Config cfg;
  cfg.num_stages = 3;
  KernelBuilder kb("padded_dot", cfg);
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), c = kb.arg_ptr("c", f32);
  Value K = kb.arg("K", i32);
  Value pa = make_block_ptr(a, {64, K}, {K, 1}, {0, 0}, {64, 32}, {1, 0});
  Value pb = make_block_ptr(b, {K, 64}, {64, 1}, {0, 0}, {32, 64}, {1, 0});
  Value acc = zeros({64, 64}, f32);
  for_range(0, K, 32, [&](Value) {
    acc = dot(load(pa, {0, 1}, Padding::NegInf), load(pb, {0, 1}), acc);
    pa = advance(pa, {0, 32});
    pb = advance(pb, {32, 0});
  });
  store(c + arange(0, 64).expand_dims(1) * 64 + arange(0, 64).expand_dims(0), acc);
  return kb.finish();
}

TEST(MathOpsCodegen, PrinterNamesTheOpsAndThePadding) {
  const std::string ir = print_kernel(math_kernel(DType::f32));
  for (const char* name : {"unary tanh", "unary sigmoid", "unary erf", "unary sin", "unary cos", "binary pow",
                           "padding=neginf"})
    EXPECT_NE(ir.find(name), std::string::npos) << name << "\n" << ir;
}

class MathOpsCodegen : public ::testing::TestWithParam<DType> {};

TEST_P(MathOpsCodegen, AccurateMathFunctionsAndNegInfPadding) {
  const DType t = GetParam();
  Kernel k = math_kernel(t);
  GeneratedKernel g = generate_cuda(k, Target::parse("sm_90a"));
  const std::string& src = g.source;
  const bool f64 = t == DType::f64;
  for (const char* fn : {"tanh", "erf", "sin", "cos", "pow"}) {
    const std::string call = std::string(fn) + (f64 ? "(" : std::string(fn) == "erf" ? "_f32(" : "f(");
    EXPECT_EQ(occurrences(src, call), f64 || std::string(fn) != "erf" ? 2 : 3)
        << call << " once for the tile and once for the scalar (and erf_f32's definition)\n" << src;
  }
  EXPECT_EQ(occurrences(src, "erff("), 0) << "CUDA's erff branches around its exp2\n" << src;
  EXPECT_EQ(occurrences(src, "KILN_ERF_FN float erf_f32("), f64 ? 0 : 1) << "the erf prelude, once\n" << src;
  // sigmoid from e = exp(-|x|) in (0, 1]: 1 / (1 + e) or e / (1 + e), never exp(x) / (1 + exp(x)).
  EXPECT_EQ(occurrences(src, f64 ? "exp(-fabs(v))" : "expf(-fabsf(v))"), 2) << src;
  if (is_half(t)) { // computed in f32 and rounded once
    EXPECT_GE(occurrences(src, "tanhf(kiln::cvt<float>("), 1) << src;
    EXPECT_GE(occurrences(src, "kiln::cvt<" + std::string(t == DType::f16 ? "kiln::f16" : "kiln::bf16") + ">(tanhf("), 1)
        << src;
  }
  EXPECT_EQ(src.find("exp_fast(-"), std::string::npos) << "sigmoid uses the accurate expf";
  EXPECT_GE(occurrences(src, "__int_as_float(0xff800000)"), 1) << "the -inf padding (and max's identity)\n" << src;
  expect_nvrtc_compiles(g, "sm_90a");
  expect_nvrtc_compiles(generate_cuda(k, Target::parse("sm_80")), "sm_80");
}

INSTANTIATE_TEST_SUITE_P(dtypes, MathOpsCodegen, ::testing::Values(DType::f16, DType::bf16, DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(MathOpsCodegen, NegInfPaddedSharedTileIsNotPipelinedByZeroFillingCopies) {
  Kernel k = padded_dot_kernel();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const Target target = Target::parse(arch);
    LoweringPlan plan = assign_layouts(k, target, {});
    for (const auto& [loop, loads] : plan.pipelined)
      for (const Op* load : loads)
        EXPECT_NE(load->padding, Padding::NegInf) << arch << ": a -inf padded load joined the cp.async pipeline";
    GeneratedKernel g = generate_cuda(k, target);
    // The shared-tile load writes -inf past the tensor, element by element.
    EXPECT_GE(occurrences(g.source, "__int_as_float(0xff800000)"), 1) << arch << "\n" << g.source;
    expect_nvrtc_compiles(g, arch);
  }
}

TEST(MathOpsCodegen, ZeroPaddedSharedTileIsStillPipelined) {
  // The same loop with zero padding keeps its pipeline: the rule above excludes -inf and NaN only.
  Config cfg;
  cfg.num_stages = 3;
  KernelBuilder kb("zero_padded_dot", cfg);
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), c = kb.arg_ptr("c", f32);
  Value K = kb.arg("K", i32);
  Value pa = make_block_ptr(a, {64, K}, {K, 1}, {0, 0}, {64, 32}, {1, 0});
  Value pb = make_block_ptr(b, {K, 64}, {64, 1}, {0, 0}, {32, 64}, {1, 0});
  Value acc = zeros({64, 64}, f32);
  for_range(0, K, 32, [&](Value) {
    acc = dot(load(pa, {0, 1}), load(pb, {0, 1}), acc);
    pa = advance(pa, {0, 32});
    pb = advance(pb, {32, 0});
  });
  store(c + arange(0, 64).expand_dims(1) * 64 + arange(0, 64).expand_dims(0), acc);
  Kernel k = kb.finish();
  LoweringPlan plan = assign_layouts(k, Target::parse("sm_80"), {});
  size_t n = 0;
  for (const auto& [loop, loads] : plan.pipelined)
    n += loads.size();
  EXPECT_EQ(n, 2u);
}

} // namespace
