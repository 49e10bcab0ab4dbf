// The configs every shipped kernel is rendered at by the code generator's guards: the generated-code hash list
// (generated_code_hash_test.cpp) and ptxas's product advisories (ptxas_advisories_test.cpp).
#pragma once

#include "dsl/registry.h"

#include <map>
#include <string>
#include <vector>

namespace kiln_test {

// The configs each kernel is rendered at: the default, the first, middle and last of its tuning space, and
// for kernels with attention params a few other problems (causal modes, bf16, f32, wider heads, the K variant).
inline std::vector<kiln::Config> shipped_renderings(const kiln::KernelDef& def) {
  using namespace kiln;
  std::vector<Config> cs = {def.default_config()};
  if (def.config_space) {
    const std::vector<Config> space = def.config_space();
    for (size_t i : {size_t{0}, space.size() / 2, space.size() - 1})
      if (i < space.size())
        cs.push_back(space[i]);
  }
  const Config base = def.default_config();
  auto has = [&](const char* p) { return base.params.count(p) > 0; };
  if (has("CAUSAL") && has("HEAD_DIM")) {
    const std::vector<std::map<std::string, int64_t>> problems = {
        {{"CAUSAL", 1}, {"K_TRANSPOSED", 0}},
        {{"CAUSAL", 2}, {"DTYPE", 1}},
        {{"HEAD_DIM", 128}, {"BLOCK_N", 32}},
        {{"HEAD_DIM", 128}, {"EVEN_D", 0}, {"CAUSAL", 1}},
        {{"DTYPE", 2}, {"BLOCK_N", 32}},
        {{"DTYPE", 2}, {"TF32", 1}, {"BLOCK_N", 32}}};
    for (const auto& overrides : problems)
      cs.push_back(def.with_overrides(base, overrides));
  }
  if (has("CAUSAL") && has("WARP_SPECIALIZE")) // FA2's two key loops filled by one producer (sm_90a)
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1}, {"CAUSAL", 1}, {"HEAD_DIM", 128}}));
  if (has("CAUSAL") && has("PINGPONG")) // ... with its two consumer warpgroups taking turns at the products
    cs.push_back(
        def.with_overrides(base, {{"WARP_SPECIALIZE", 1}, {"PINGPONG", 1}, {"CAUSAL", 1}, {"HEAD_DIM", 128}}));
  if (has("CAUSAL") && has("PRODUCT_AHEAD")) // ... with Q K_{j+1}ᵀ issued before the softmax of S_j
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"PRODUCT_AHEAD", 1},
                                           {"CAUSAL", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 64},
                                           {"num_stages", 3}}));
  if (has("SPLIT_D")) // D = 96 over two head-dim tiles (forward, dK/dV, dQ)
    cs.push_back(def.with_overrides(base, {{"SPLIT_D", 1}, {"HEAD_DIM", 128}}));
  if (has("SPLIT_D") && has("LAST_PRODUCT_LATE")) // ... their products issued late (sm_90a)
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"LAST_PRODUCT_LATE", 1},
                                           {"SPLIT_D", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 128},
                                           {"num_stages", 3}}));
  if (has("LAZY_RESCALE") && has("LAST_PRODUCT_LATE")) // O's rescale skipped where its factors are 1 (sm_90a: late)
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"LAST_PRODUCT_LATE", 1},
                                           {"LAZY_RESCALE", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 128},
                                           {"num_stages", 3}}));
  if (has("TILE_BARRIERS") && has("LAST_PRODUCT_LATE")) // a barrier pair per tile of a slot: late products at two stages
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"LAST_PRODUCT_LATE", 1},
                                           {"TILE_BARRIERS", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 128},
                                           {"num_stages", 2}}));
  if (has("EXP2_ON_FMA") && has("WARP_SPECIALIZE")) // one of every 4 exponentials of a tile on the FMA pipe (the 64-row warp-specialised tile)
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"EXP2_ON_FMA", 4},
                                           {"BLOCK_M", 64},
                                           {"BLOCK_N", 128},
                                           {"num_warps", 4},
                                           {"MIN_BLOCKS_PER_SM", 2}}));
  if (has("PERSISTENT") && has("LAST_PRODUCT_LATE")) // a persistent grid that prefetches the next program's Q
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"LAST_PRODUCT_LATE", 1},
                                           {"PERSISTENT", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 128},
                                           {"num_stages", 3}}));
  if (has("PERSISTENT") && has("TILE_BARRIERS")) // the same over two stages: Q in two buffers (plan_prefetch_buffers)
    cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", 1},
                                           {"LAST_PRODUCT_LATE", 1},
                                           {"TILE_BARRIERS", 1},
                                           {"LAZY_RESCALE", 1},
                                           {"PERSISTENT", 1},
                                           {"HEAD_DIM", 128},
                                           {"BLOCK_N", 128},
                                           {"num_stages", 2}}));
  auto accepts = [&](const char* p, int64_t v) {
    for (const ParamDef& d : def.params)
      if (d.name == p)
        return d.accepts(v);
    return false;
  };
  if (accepts("PERSISTENT", 2)) // a dynamic persistent grid: with a producer (the kernel's own warps where none) and
    for (int ws : {0, 1})       // without
      cs.push_back(def.with_overrides(base, {{"WARP_SPECIALIZE", ws}, {"PERSISTENT", 2}, {"MIN_BLOCKS_PER_SM", 1}}));
  if (has("ATOMIC_DQ")) // dQ added through a block pointer: staged and reduced in bulk on sm_90a
    cs.push_back(def.with_overrides(base, {{"ATOMIC_DQ", 1}, {"BLOCK_M", 64}}));
  if (has("ATOMIC_DQ") && has("WARP_SPECIALIZE")) // ... by the warp-specialised 128-key tile's consumers (at D = 64
    cs.push_back(def.with_overrides(base, {{"ATOMIC_DQ", 1},     // K's tile in 64-byte lines, dQ's product on wgmma)
                                           {"BLOCK_M", 64},
                                           {"BLOCK_N", 128},
                                           {"num_warps", 8},
                                           {"WARP_SPECIALIZE", 1}}));
  return cs;
}

} // namespace kiln_test
