// The CUDA of fma, log1p and expm1 (tiles, scalars, every float dtype) and of block loads padded with any
// value (registers, shared-tile operands, integer blocks): fmaf / fma with one rounding (f16/bf16
// widened to f32 and narrowed once), CUDA's accurate log1pf/expm1f (log1p/expm1 for f64), the padding literal
// in the dtype, no zero-filling cp.async pipeline for a non-zero padding; and the text compiles with NVRTC
// for sm_80 and sm_90a.
#include "codegen/assign_layouts.h"
#include "codegen/codegen.h"
#include "dsl/dsl.h"
#include "dsl/printer.h"
#include "nvrtc_compile.h"
#include "source_text.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln;
using kiln_test::expect_nvrtc_compiles;
using kiln_test::occurrences;

namespace {

// fma/log1p/expm1 on a (128,) tile and on scalars; a row max over a (16, 32) block padded with 2.5.
Kernel ops_kernel(DType t) {
  KernelBuilder kb("new_math_ops");
  Value x = kb.arg_ptr("x", t), e = kb.arg_ptr("e", t), y = kb.arg_ptr("y", t), m = kb.arg_ptr("m", t);
  Value s = kb.arg("s", f32).to(t), rows = kb.arg("rows", i32), cols = kb.arg("cols", i32);
  Value offs = arange(0, 128);
  Value v = load(x + offs), w = load(e + offs);
  Value r = kiln::fma(v, w, kiln::log1p(v)) + kiln::expm1(w);
  Value sc = kiln::fma(s, s, kiln::log1p(s)) + kiln::expm1(s);
  store(y + offs, r + sc);
  Value bp = make_block_ptr(x, {rows, cols}, {cols, 1}, {0, 0}, {16, 32}, {1, 0});
  store(m + arange(0, 16), max(load(bp, {0, 1}, 2.5), 1));
  return kb.finish();
}

TEST(FmaPaddingCodegen, PrinterNamesTheOpsAndThePadding) {
  const std::string ir = print_kernel(ops_kernel(DType::f32));
  for (const char* name : {"fma ", "unary log1p", "unary expm1", "padding=2.5"})
    EXPECT_NE(ir.find(name), std::string::npos) << name << "\n" << ir;
}

class FmaPaddingCodegen : public ::testing::TestWithParam<DType> {};

TEST_P(FmaPaddingCodegen, OneRoundingAccurateFunctionsAndThePaddingLiteral) {
  const DType t = GetParam();
  const Kernel k = ops_kernel(t);
  const bool f64 = t == DType::f64;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const GeneratedKernel g = generate_cuda(k, Target::parse(arch));
    const std::string& src = g.source;
    EXPECT_EQ(occurrences(src, f64 ? "fma(" : "fmaf("), 2)
        << "once for the tile and once for the scalar\n"
        << src;
    EXPECT_EQ(occurrences(src, f64 ? "log1p(" : "log1pf("), 2) << src;
    EXPECT_EQ(occurrences(src, f64 ? "expm1(" : "expm1f("), 2) << src;
    if (is_half(t)) { // widened, fused in f32, narrowed once
      const std::string narrow =
          std::string("kiln::cvt<") + (t == DType::f16 ? "kiln::f16" : "kiln::bf16") + ">(";
      EXPECT_GE(occurrences(src, narrow + "fmaf(kiln::cvt<float>("), 1) << src;
    }
    EXPECT_GE(occurrences(src, f64 ? "2.5" : "2.5f"), 1) << "the padding literal\n" << src;
    expect_nvrtc_compiles(g, arch);
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes, FmaPaddingCodegen,
                         ::testing::Values(DType::f16, DType::bf16, DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A K loop of dots whose A tiles (shared-tile operands) pad with -1: element-wise copies writing -1, not the
// zero-filling cp.async pipeline; the zero-padded B tile keeps it.
TEST(FmaPaddingCodegen, NonZeroPaddedSharedTileIsNotPipelined) {
  Config cfg;
  cfg.num_stages = 3;
  KernelBuilder kb("padded_dot", cfg);
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), c = kb.arg_ptr("c", f32);
  Value K = kb.arg("K", i32);
  Value pa = make_block_ptr(a, {64, K}, {K, 1}, {0, 0}, {64, 32}, {1, 0});
  Value pb = make_block_ptr(b, {K, 64}, {64, 1}, {0, 0}, {32, 64}, {1, 0});
  Value acc = zeros({64, 64}, f32);
  for_range(0, K, 32, [&](Value) {
    acc = dot(load(pa, {0, 1}, -1.0f), load(pb, {0, 1}), acc);
    pa = advance(pa, {0, 32});
    pb = advance(pb, {32, 0});
  });
  store(c + arange(0, 64).expand_dims(1) * 64 + arange(0, 64).expand_dims(0), acc);
  const Kernel k = kb.finish();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const Target target = Target::parse(arch);
    const LoweringPlan plan = assign_layouts(k, target, {});
    size_t pipelined = 0;
    for (const auto& [loop, loads] : plan.pipelined)
      for (const Op* load : loads) {
        EXPECT_EQ(load->padding, Padding::Zero)
            << arch << ": a -1 padded load joined the zero-filling pipeline";
        ++pipelined;
      }
    EXPECT_EQ(pipelined, 1u) << arch << ": B stays pipelined";
    const GeneratedKernel g = generate_cuda(k, target);
    EXPECT_GE(occurrences(g.source, "kiln::cvt<kiln::f16>(-1.0f)"), 1) << arch << "\n" << g.source;
    expect_nvrtc_compiles(g, arch);
  }
}

// An i32 block padded with -1 (an index tile's "none"): the literal in registers.
TEST(FmaPaddingCodegen, IntegerBlockPaddedWithMinusOne) {
  KernelBuilder kb("int_padding");
  Value x = kb.arg_ptr("x", i32), y = kb.arg_ptr("y", i32), n = kb.arg("n", i32);
  Value bp = make_block_ptr(x, {n}, {1}, {0}, {64}, {0});
  store(y + arange(0, 64), load(bp, {0}, -1));
  const Kernel k = kb.finish();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const GeneratedKernel g = generate_cuda(k, Target::parse(arch));
    EXPECT_GE(occurrences(g.source, " : -1;"), 1) << g.source;
    expect_nvrtc_compiles(g, arch);
  }
}

} // namespace
