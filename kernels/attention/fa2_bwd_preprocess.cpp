#include "kernels/attention/fa2_bwd_preprocess.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_bwd_args.h"
#include "kernels/attention/attention_varlen_tiles.h"

namespace kiln {

Kernel build_fa2_bwd_preprocess(const Config& config) {
  const AttentionTileParams tp = attention_tile_params(config, "fa2_bwd_preprocess");
  const int64_t BM = tp.block_m;
  const bool varlen = config.get_or("VARLEN", 0) != 0; // packed sequences (fa2_bwd_varlen.h)
  KernelBuilder kb(varlen ? "fa2_bwd_preprocess_varlen" : "fa2_bwd_preprocess", config);
  AttentionBwdArgs a = declare_attention_bwd_args(kb, tp.dtype, varlen);
  const VarlenArgs varlen_args = varlen ? declare_varlen_args(kb) : VarlenArgs{};
  Value off_hz = program_id(1);
  AttentionBwdBases b;
  if (varlen) { // the sequence's rows from here on
    const SequenceSpan s = read_sequence_span(a.fwd, varlen_args, off_hz / a.fwd.H);
    b = varlen_bwd_bases(a, s, off_hz % a.fwd.H);
    a.fwd.N_Q = s.n_q, a.fwd.N_K = s.n_k;
  } else {
    b = attention_bwd_bases(a, off_hz / a.fwd.H, off_hz % a.fwd.H);
  }
  Value m0 = (program_id(0) * BM).named("m0");

  Value o = load(bwd_q_block_ptr(a, b.o, a.fwd.stride_on, BM, tp, m0), {0, 1}).to(f32);     // (BM, HD)
  Value dout = load(bwd_q_block_ptr(a, b.dout, a.stride_don, BM, tp, m0), {0, 1}).to(f32); // (BM, HD)
  Value delta = sum(o * dout, 1).named("delta");                                           // (BM,) f32
  store(bwd_row_block_ptr(a, a.delta, b.row0, BM, m0), delta, {0});

  if (config.get("ATOMIC_DQ") != 0) {
    store(bwd_dq_acc_block_ptr(a, b.row0, BM, tp, m0), zeros({BM, tp.head_dim}, f32), {0, 1});
  }
  return kb.finish();
}

namespace {

KernelDef make_fa2_bwd_preprocess_def() {
  KernelDef d;
  d.name = "fa2_bwd_preprocess";
  d.summary = "attention backward: Delta = rowsum(dO * O) (and a zeroed dQ accumulator when ATOMIC_DQ=1)";
  d.params = attention_bwd_param_defs();
  d.params.push_back(atomic_dq_param());
  d.default_num_warps = 4;
  d.default_num_stages = 1;
  d.build = build_fa2_bwd_preprocess;
  d.config_space = [] { return std::vector<Config>{fa2_bwd_preprocess_def().default_config()}; };
  d.size_args = {"B", "H", "H_KV", "N_Q", "N_K", "D"};
  d.tuning_key = {"B", "H", "N_Q"};
  d.grid = query_tile_grid;
  return d;
}

} // namespace

const KernelDef& fa2_bwd_preprocess_def() {
  static const KernelDef def = make_fa2_bwd_preprocess_def(); // the host API reads it on every call
  return def;
}

} // namespace kiln
