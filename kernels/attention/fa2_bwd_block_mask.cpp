#include "kernels/attention/fa2_bwd_block_mask.h"

#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"

#include <algorithm>

namespace kiln {

namespace {

Kernel build_dkdv(const Config& config) { return build_fa2_bwd_dkdv_with_block_mask(config, AttentionMods{}); }
Kernel build_dq(const Config& config) { return build_fa2_bwd_dq_with_block_mask(config, AttentionMods{}); }

KernelDef make_dkdv_def() {
  KernelDef d = fa2_bwd_dkdv_def();
  d.name = "fa2_bwd_dkdv_block_mask";
  d.summary = "attention backward: dK and dV of one key tile over a block mask's lists of query tiles";
  d.build = build_dkdv;
  d.config_space = [] {
    std::vector<Config> cs = fa2_bwd_dkdv_def().config_space();
    cs.erase(std::remove_if(cs.begin(), cs.end(),
                            [](const Config& c) {
                              return c.get("ATOMIC_DQ") != 0 || c.get_or("WARP_SPECIALIZE", 0) != 0;
                            }),
             cs.end());
    return cs;
  };
  return d;
}

KernelDef make_dq_def() {
  KernelDef d = fa2_bwd_dq_def();
  d.name = "fa2_bwd_dq_block_mask";
  d.summary = "attention backward: dQ of one query tile over a block mask's lists of key tiles";
  d.build = build_dq;
  d.config_space = [] { // the lists are read per query tile: no persistent grid (fa2_bwd_dq.cpp refuses it)
    std::vector<Config> cs = fa2_bwd_dq_def().config_space();
    cs.erase(std::remove_if(cs.begin(), cs.end(), [](const Config& c) { return c.get_or("PERSISTENT", 0) != 0; }),
             cs.end());
    return cs;
  };
  return d;
}

} // namespace

void check_block_mask_bwd_config(const Config& dkdv) {
  if (dkdv.get_or("WARP_SPECIALIZE", 0) != 0)
    fail("fa2_bwd_dkdv_block_mask: WARP_SPECIALIZE=1 is built for the dense backward's query loops, not a block "
         "mask's lists; expected WARP_SPECIALIZE=0 (config {})",
         dkdv.str());
  if (dkdv.get_or("ATOMIC_DQ", 0) != 0)
    fail("fa2_bwd_dkdv_block_mask: ATOMIC_DQ=1 accumulates dQ over every query tile of a key tile's range, not "
         "a block mask's lists; expected ATOMIC_DQ=0 (the backward over a block mask runs dQ as its own kernel "
         "over the lists) (config {})",
         dkdv.str());
}

const KernelDef& fa2_bwd_dkdv_block_mask_def() {
  static const KernelDef def = make_dkdv_def();
  return def;
}

const KernelDef& fa2_bwd_dkdv_block_mask_def(const AttentionMods& mods) {
  return def_with_mods(fa2_bwd_dkdv_block_mask_def(), mods, build_fa2_bwd_dkdv_with_block_mask, true);
}

const KernelDef& fa2_bwd_dq_block_mask_def() {
  static const KernelDef def = make_dq_def();
  return def;
}

const KernelDef& fa2_bwd_dq_block_mask_def(const AttentionMods& mods) {
  return def_with_mods(fa2_bwd_dq_block_mask_def(), mods, build_fa2_bwd_dq_with_block_mask, true);
}

} // namespace kiln
