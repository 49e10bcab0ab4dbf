// The CUDA of sorts (codegen/emit_scan.cpp's emit_sort) for every case of tests/sort_cases.h: the tile staged
// in scratch (in f32 for f16/bf16), a bitonic network with the total order of floats (NaN last, -0 before +0)
// or integers' `<`, descending flipping the comparison; and the text compiles with NVRTC for sm_80 and
// sm_90a.
#include "codegen/codegen.h"
#include "codegen/cuda_text.h"
#include "nvrtc_compile.h"
#include "sort_cases.h"
#include "source_text.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln;
using kiln_test::expect_nvrtc_compiles;
using kiln_test::occurrences;
using kiln_test::SortCase;

namespace {

class SortCodegen : public ::testing::TestWithParam<SortCase> {};

TEST_P(SortCodegen, StagesABitonicNetworkAndCompiles) {
  const SortCase& c = GetParam();
  const Kernel k = kiln_test::sort_kernel(c);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const GeneratedKernel g = generate_cuda(k, Target::parse(arch));
    const std::string& src = g.source;
    EXPECT_EQ(occurrences(src, "// bitonic sort "), 1) << c.name() << "\n" << src;
    EXPECT_EQ(occurrences(src, "(descending)"), c.descending ? 1 : 0) << c.name();
    const std::string acc = is_half(c.dtype) ? "float" : emit_detail::ctype(c.dtype);
    EXPECT_GE(g.shared_bytes, c.numel() * static_cast<int64_t>(is_half(c.dtype) ? 4 : dtype_bytes(c.dtype)));
    EXPECT_EQ(occurrences(src, "auto kiln_before = [](const " + acc + " a"), 1) << c.name() << "\n" << src;
    EXPECT_EQ(occurrences(src, "(a == a && b != b)"), is_float(c.dtype) ? 1 : 0)
        << c.name() << ": NaN last for floats only";
    expect_nvrtc_compiles(g, arch);
  }
}

INSTANTIATE_TEST_SUITE_P(cases, SortCodegen, ::testing::ValuesIn(kiln_test::sort_cases()),
                         [](const auto& info) { return info.param.name(); });

} // namespace
