#include "kernels/attention/fa2_bwd_dq_convert.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_bwd_args.h"
#include "kernels/attention/attention_varlen_tiles.h"

namespace kiln {

Kernel build_fa2_bwd_dq_convert(const Config& config) {
  const AttentionTileParams tp = attention_tile_params(config, "fa2_bwd_dq_convert");
  const int64_t BM = tp.block_m;
  const bool varlen = config.get_or("VARLEN", 0) != 0; // packed sequences (fa2_bwd_varlen.h)
  KernelBuilder kb(varlen ? "fa2_bwd_dq_convert_varlen" : "fa2_bwd_dq_convert", config);
  AttentionBwdArgs a = declare_attention_bwd_args(kb, tp.dtype, varlen);
  const VarlenArgs varlen_args = varlen ? declare_varlen_args(kb) : VarlenArgs{};
  const AttentionArgs& f = a.fwd;
  Value off_hz = program_id(1);
  AttentionBwdBases b;
  if (varlen) { // the sequence's rows from here on
    const SequenceSpan s = read_sequence_span(a.fwd, varlen_args, off_hz / f.H);
    b = varlen_bwd_bases(a, s, off_hz % f.H);
    a.fwd.N_Q = s.n_q, a.fwd.N_K = s.n_k;
  } else {
    b = attention_bwd_bases(a, off_hz / f.H, off_hz % f.H);
  }
  Value m0 = (program_id(0) * BM).named("m0");
  Value dq = load(bwd_dq_acc_block_ptr(a, b.row0, BM, tp, m0), {0, 1}); // (BM, HD) f32
  store(bwd_q_block_ptr(a, b.dq, a.stride_dqn, BM, tp, m0), (dq * f.sm_scale).to(tp.dtype), {0, 1});
  return kb.finish();
}

namespace {

KernelDef make_fa2_bwd_dq_convert_def() {
  KernelDef d;
  d.name = "fa2_bwd_dq_convert";
  d.summary = "attention backward (atomic dQ): dQ = the f32 accumulator times sm_scale, in the input dtype";
  d.params = attention_bwd_param_defs();
  d.default_num_warps = 4;
  d.default_num_stages = 1;
  d.build = build_fa2_bwd_dq_convert;
  d.config_space = [] { return std::vector<Config>{fa2_bwd_dq_convert_def().default_config()}; };
  d.size_args = {"B", "H", "H_KV", "N_Q", "N_K", "D"};
  d.tuning_key = {"B", "H", "N_Q"};
  d.grid = query_tile_grid;
  return d;
}

} // namespace

const KernelDef& fa2_bwd_dq_convert_def() {
  static const KernelDef def = make_fa2_bwd_dq_convert_def(); // the host API reads it on every call
  return def;
}

} // namespace kiln
