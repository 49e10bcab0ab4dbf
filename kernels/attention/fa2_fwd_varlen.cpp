#include "kernels/attention/fa2_fwd_varlen.h"

#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/fa2_fwd.h"

namespace kiln {

Kernel build_fa2_fwd_varlen(const Config& config) { return build_fa2_fwd_varlen_with_mods(config, {}); }

Kernel build_fa2_fwd_varlen_with_mods(const Config& config, const AttentionMods& mods) {
  if (config.get("VARLEN") != 1)
    fail("fa2_fwd_varlen: VARLEN={} but this kernel is the packed one; expected VARLEN=1 (fa2_fwd is the "
         "dense "
         "kernel)",
         config.get("VARLEN"));
  return build_fa2_fwd_with_mods(config, mods);
}

Config varlen_config(const Config& fa2_config) { return varlen_config_of(fa2_fwd_varlen_def(), fa2_config); }

const KernelDef& fa2_fwd_varlen_def() {
  static const KernelDef def = [] {
    KernelDef d =
        make_varlen_def(fa2_fwd_def(), "fa2_fwd_varlen",
                        "FlashAttention-2 forward over packed variable-length sequences (cu_seqlens)");
    d.build = build_fa2_fwd_varlen;
    return d;
  }();
  return def;
}

} // namespace kiln
