// What the split-KV decoding kernels (kernels/attention/decode_split.h, decode_combine.h) lower to: both
// products on tensor cores with K/V staged in shared memory by cp.async, the contiguous cache's key loop
// pipelined (its block pointers are carried and advanced), the paged one reading a page per tile through the
// block table. (Compiling them for sm_80 and sm_90a without spills is kernels_compile_test.cpp's.)
#include "codegen/codegen.h"
#include "kernels/builtin.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

GeneratedKernel generate(const std::string& name, const std::map<std::string, int64_t>& overrides,
                         const char* arch) {
  const KernelDef& def = builtin_kernels().find(name);
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)), Target::parse(arch));
}

TEST(DecodeCodegen, ContiguousCachePipelinesItsKeyTiles) {
  GeneratedKernel g = generate("decode_split", {{"num_stages", 3}}, "sm_80");
  EXPECT_NE(g.source.find("kiln::mma_m16n8k16_f16("), std::string::npos);
  EXPECT_NE(g.source.find("kiln::cp_async_16("), std::string::npos);
  EXPECT_NE(g.lowered.find("3 stage(s)"), std::string::npos) << g.lowered;
}

TEST(DecodeCodegen, PagedCacheCopiesEachTileOfItsPage) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    GeneratedKernel g = generate("decode_split", {{"PAGED", 1}, {"SEQLENS_K", 1}}, arch);
    EXPECT_NE(g.source.find("BLOCK_TABLE"), std::string::npos) << arch;
    EXPECT_NE(g.source.find("SEQLENS_K"), std::string::npos) << arch;
    EXPECT_NE(g.source.find("kiln::cp_async_16("), std::string::npos)
        << arch << ": 16-byte copies of a page's rows";
  }
}

TEST(DecodeCodegen, CombineStoresRowsAsVectors) {
  GeneratedKernel g = generate("decode_combine", {}, "sm_80");
  EXPECT_NE(g.source.find("kiln::st_global<16>("), std::string::npos) << "max_contiguous rows of O";
}

} // namespace
