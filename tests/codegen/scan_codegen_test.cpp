// The CUDA of scans (codegen/emit_scan.cpp, split by codegen/plan_scan.h) for every case of
// tests/scan_cases.h: the split chosen (a thread a line when there are at least as many lines as threads,
// else runs of about sqrt(len) a line), the scratch planned for the staged tile (in f32 for f16/bf16), the
// combine in the accumulator type (a user combine as a lambda on x's dtype); and the text compiles with NVRTC
// for sm_80 and sm_90a. A cumsum carried by a loop beside a reduction (both use scratch) compiles too; user
// combines appear in the printed IR and the CUDA, so two never share a key; prod reductions compile.
#include "codegen/codegen.h"
#include "codegen/cuda_text.h"
#include "codegen/plan_scan.h"
#include "dsl/printer.h"
#include "nvrtc_compile.h"
#include "scan_cases.h"
#include "source_text.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln;
using kiln_test::expect_nvrtc_compiles;
using kiln_test::occurrences;
using kiln_test::ScanCase;

namespace {

const Op& the_scan(const Kernel& k) {
  const Op* found = nullptr;
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::Scan)
      found = &op;
  });
  EXPECT_NE(found, nullptr);
  return *found;
}

TEST(ScanPlan, SplitsLinesIntoRunsOnlyWhenThreadsWouldIdle) {
  auto split = [](const ScanCase& c) {
    const Kernel k = kiln_test::scan_kernel(c);
    return plan_scan(k, the_scan(k), 32 * c.num_warps);
  };
  const ScanSplit one_line = split({DType::f32, {1024}, 0, ReduceOp::Sum});
  EXPECT_EQ(one_line.lines, 1);
  EXPECT_EQ(one_line.chunks, 32) << "sqrt(1024) runs of 32";
  const ScanSplit many = split({DType::f32, {256, 4}, 1, ReduceOp::Sum});
  EXPECT_EQ(many.lines, 256);
  EXPECT_EQ(many.chunks, 1) << "more lines than threads: a thread a line";
  const ScanSplit columns = split({DType::f32, {4, 32}, 0, ReduceOp::Sum});
  EXPECT_EQ(columns.lines, 32);
  EXPECT_EQ(columns.len, 4);
  EXPECT_EQ(columns.stride, 32);
  EXPECT_EQ(columns.chunks, 2) << "32 lines x 2 runs of 2 on 128 threads";
  const ScanSplit tiny = split({DType::f32, {2, 8}, 1, ReduceOp::Max});
  EXPECT_EQ(tiny.chunks, 2);
  EXPECT_LE(tiny.lines * tiny.chunks, 128);
}

class ScanCodegen : public ::testing::TestWithParam<ScanCase> {};

TEST_P(ScanCodegen, StagesScansAndCompiles) {
  const ScanCase& c = GetParam();
  const Kernel k = kiln_test::scan_kernel(c);
  const ScanSplit split = plan_scan(k, the_scan(k), 32 * c.num_warps);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const GeneratedKernel g = generate_cuda(k, Target::parse(arch));
    const std::string& src = g.source;
    EXPECT_EQ(occurrences(src, "// scan " + std::string(reduce_name(c.combine))), 1) << c.name() << "\n"
                                                                                     << src;
    const int acc_bytes = is_half(c.dtype) ? 4 : dtype_bytes(c.dtype);
    EXPECT_GE(g.shared_bytes, c.numel() * acc_bytes) << c.name() << ": the staged tile";
    const std::string acc = is_half(c.dtype) ? "float" : emit_detail::ctype(c.dtype);
    EXPECT_EQ(occurrences(src, acc + "* kiln_s = reinterpret_cast<" + acc + "*>"), 1) << c.name() << "\n"
                                                                                      << src;
    EXPECT_EQ(occurrences(src, "kiln_carry") > 0, split.chunks > 1)
        << c.name() << ": runs of a line only when split";
    EXPECT_EQ(occurrences(src, "auto kiln_combine = [](const " + emit_detail::ctype(c.dtype)),
              c.combine == ReduceOp::Combine ? 1 : 0)
        << c.name() << ": a user combine is a lambda on x's dtype\n"
        << src;
    expect_nvrtc_compiles(g, arch);
  }
}

INSTANTIATE_TEST_SUITE_P(cases, ScanCodegen, ::testing::ValuesIn(kiln_test::scan_cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(ScanCodegenLoop, CumsumCarriedBesideAReductionCompiles) {
  KernelBuilder kb("chunked_cumsum");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), n = kb.arg("n", i32);
  Value carry = scalar(0, f32);
  for_range(0, n, 256, [&](Value start) {
    Value offs = start + arange(0, 256);
    Value mask = offs < n;
    Value v = load(x + offs, mask, 0.0f);
    store(y + offs, cumsum(v, 0) + carry, mask);
    carry = carry + sum(v, 0);
  });
  const Kernel k = kb.finish();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const GeneratedKernel g = generate_cuda(k, Target::parse(arch));
    EXPECT_EQ(occurrences(g.source, "// scan sum"), 1) << g.source;
    expect_nvrtc_compiles(g, arch);
  }
}

// y = associative_scan(x) of a 1-D f32 tile with `combine`.
Kernel combine_kernel(const CombineFn& combine) {
  KernelBuilder kb("combine");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32);
  Value offs = arange(0, 128);
  store(y + offs, associative_scan(load(x + offs), 0, combine));
  return kb.finish();
}

TEST(ScanCodegenCombine, TheCombinesOpsAreALambdaAndPartOfTheKernelsIdentity) {
  const Kernel add = combine_kernel([](Value a, Value b) { return a + b; });
  const Kernel mul = combine_kernel([](Value a, Value b) { return a * b; });
  const Kernel sel = combine_kernel([](Value a, Value b) { return where(abs(a) >= abs(b), a, b * 2.0f); });
  EXPECT_NE(print_kernel(add), print_kernel(mul)) << "the printed IR keys caches and tuning";
  EXPECT_NE(print_kernel(mul), print_kernel(sel));
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const GeneratedKernel ga = generate_cuda(add, Target::parse(arch)),
                          gm = generate_cuda(mul, Target::parse(arch)),
                          gs = generate_cuda(sel, Target::parse(arch));
    EXPECT_NE(ga.source, gm.source);
    EXPECT_EQ(occurrences(ga.source, "auto kiln_combine = [](const float a"), 1) << ga.source;
    EXPECT_EQ(occurrences(gm.source, " * b"), 1) << gm.source;
    EXPECT_EQ(occurrences(gs.source, "fabsf("), 2) << "abs(a), abs(b) inside the combine\n" << gs.source;
    EXPECT_EQ(occurrences(gs.source, "kiln_combine(kiln_a, "), 1) << "the scan of a line calls it\n"
                                                                  << gs.source;
    for (const GeneratedKernel* g : {&ga, &gm, &gs})
      expect_nvrtc_compiles(*g, arch);
  }
}

TEST(ScanCodegenCombine, InsideALoopBesideACarriedValueCompiles) {
  const Kernel k = kiln_test::chunked_running_max_kernel();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const GeneratedKernel g = generate_cuda(k, Target::parse(arch));
    EXPECT_EQ(occurrences(g.source, "auto kiln_combine = [](const int "), 1) << g.source;
    expect_nvrtc_compiles(g, arch);
  }
}

class ProdCodegen : public ::testing::TestWithParam<DType> {};

TEST_P(ProdCodegen, ReductionsAlongEitherAxisCompile) {
  const DType t = GetParam();
  KernelBuilder kb("prod");
  Value x = kb.arg_ptr("x", t), y = kb.arg_ptr("y", t), z = kb.arg_ptr("z", t);
  Value tile = load(x + arange(0, 16).expand_dims(1) * 64 + arange(0, 64).expand_dims(0)); // (16, 64)
  store(y + arange(0, 16), prod(tile, 1));
  store(z + arange(0, 64), prod(tile, 0));
  const Kernel k = kb.finish();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const GeneratedKernel g = generate_cuda(k, Target::parse(arch));
    EXPECT_EQ(occurrences(g.source, "// prod "), 2) << g.source;
    expect_nvrtc_compiles(g, arch);
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes, ProdCodegen,
                         ::testing::Values(DType::f32, DType::f16, DType::i32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

} // namespace
