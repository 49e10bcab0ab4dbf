#include "kernels/attention/fa2_bwd_dq.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_bwd_args.h"
#include "kernels/attention/attention_bwd_space.h"
#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_varlen_tiles.h"
#include "kernels/attention/fa2_bwd_block_mask.h"
#include "kernels/codegen_params.h"

namespace kiln {

namespace {

// dQ with mods and, with `block_mask`, over the forward's lists of a block mask (fa2_bwd_block_mask.h).
Kernel build_fa2_bwd_dq_kernel(const Config& config, const AttentionMods& mods, bool block_mask) {
  const AttentionTileParams tp = attention_tile_params(config, "fa2_bwd_dq");
  const int64_t BM = tp.block_m, BN = tp.block_n;
  const DType dt = tp.dtype;

  const bool varlen = config.get_or("VARLEN", 0) != 0; // packed sequences (fa2_bwd_varlen.h)
  if (block_mask && varlen)
    fail("fa2_bwd_dq_block_mask: block masks with packed sequences (VARLEN=1) are not built yet");
  KernelBuilder kb(varlen ? "fa2_bwd_dq_varlen" : block_mask ? "fa2_bwd_dq_block_mask" : "fa2_bwd_dq", config);
  AttentionBwdArgs a = declare_attention_bwd_args(kb, dt, varlen);
  const VarlenArgs varlen_args = varlen ? declare_varlen_args(kb) : VarlenArgs{};
  const AttentionArgs& f = a.fwd;
  // Causal query tiles lower down see more keys: launch them first, as the forward does; PERSISTENT numbers the
  // programs along x alone, as the code generator's persistent grid needs (query_tile_program).
  const bool persistent = config.get_or("PERSISTENT", 0) != 0;
  static_check(!persistent || (!varlen && !block_mask),
               "fa2_bwd_dq: PERSISTENT is built for the dense backward (not with packed sequences or a block mask)");
  const QueryTileProgram program = query_tile_program(tp, mods, persistent, f.N_Q, std::nullopt);
  Value start_m = program.start_m;
  Value off_hz = program.off_hz;
  AttentionBwdBases b;
  if (varlen) { // the sequence's rows and keys from here on
    const SequenceSpan s = read_sequence_span(f, varlen_args, off_hz / f.H);
    b = varlen_bwd_bases(a, s, off_hz % f.H);
    a.fwd.N_Q = s.n_q, a.fwd.N_K = s.n_k;
  } else {
    b = attention_bwd_bases(a, off_hz / f.H, off_hz % f.H);
  }
  Value m0 = (start_m * BM).named("m0");
  if (varlen) // a tile past the sequence's rows sees no key: its loops are empty, its store masked
    a.fwd.N_K = where(m0 < f.N_Q, f.N_K, 0).named("tile_n_k");
  Value offs_m = (m0 + arange(0, BM)).named("offs_m"); // (BM,) i32
  // The mods' tensors follow the backward's arguments; the scores are recomputed with them, as the forward
  // computed them (attention_mods.h).
  ModKernelEnv mod_env = mods.empty() ? ModKernelEnv{} : mod_kernel_env(kb, mods, f, off_hz, offs_m);
  // Over a block mask: the forward's lists of key tiles, after the mods' tensors.
  const BlockMaskArgs bm = block_mask ? declare_block_mask_args(kb, "bm_") : BlockMaskArgs{};

  BoundaryCheck rows = {0};
  // A Q, dO, K, V and dQ tile a head-dim piece: one HEAD_DIM wide, or with SPLIT_D two (attention_tiles.h).
  const std::vector<HeadDimPiece> pieces = tp.head_dim_pieces();
  const size_t n_pieces = pieces.size();
  std::vector<Value> q, dout; // (BM, piece width) each
  for (size_t i = 0; i < n_pieces; ++i)
    q.push_back(load(bwd_q_block_ptr(a, b.q, f.stride_qn, BM, tp, m0, pieces[i]), tp.row_tile_check(pieces[i]))
                    .named(head_dim_piece_name("q", i, n_pieces)));
  for (size_t i = 0; i < n_pieces; ++i)
    dout.push_back(
        load(bwd_q_block_ptr(a, b.dout, a.stride_don, BM, tp, m0, pieces[i]), tp.row_tile_check(pieces[i]))
            .named(head_dim_piece_name("do", i, n_pieces)));
  Value lse = load(bwd_row_block_ptr(a, f.lse, b.row0, BM, m0), rows);     // (BM,) f32, 0 past N_Q
  Value delta = load(bwd_row_block_ptr(a, a.delta, b.row0, BM, m0), rows); // (BM,) f32
  // exp2(x - LSE·log2 e); a row that sees no key (LSE = -inf) gets P = 0 through +inf. Such rows occur only
  // in masked tiles: a row in an unmasked tile sees all of its keys.
  Value lse2 = where(lse == -kInfinity, kInfinity, lse * kLog2e).named("lse2").expand_dims(1); // (BM, 1)
  Value delta_rows = delta.expand_dims(1);                                                   // (BM, 1)
  Value qk_scale = scores_to_log2(mod_env, f.sm_scale);
  std::vector<Value> dq; // (BM, piece width) Σ dS K, unscaled, a tile a piece
  for (size_t i = 0; i < n_pieces; ++i)
    dq.push_back(zeros({BM, pieces[i].width}, f32).named(head_dim_piece_name("dq", i, n_pieces)));

  KeyTilePtrs kv; // a K and a V block pointer a piece (attention_tiles.h)
  auto point_at = [&](const Operand& key) { // the pieces' pointers at key `key`, named on the first call only
    for (size_t i = 0; i < n_pieces; ++i) {
      Value kp = bwd_k_block_ptr(a, b, BN, tp, key, pieces[i]);
      Value vp = bwd_kv_block_ptr(a, b.v, f.stride_vn, BN, tp, key, pieces[i]);
      if (kv.k.size() < n_pieces) {
        kv.k.push_back(kp.named(head_dim_piece_name("k_ptr", i, n_pieces)));
        kv.v.push_back(vp.named(head_dim_piece_name("v_ptr", i, n_pieces)));
      } else { // the loops carry these Values: assigned one by one
        kv.k[i] = kp, kv.v[i] = vp;
      }
    }
  };
  point_at(0);
  auto step = [&](const Value& start_n, bool masked) {
    std::vector<Value> kt; // (piece width, BN) each
    for (size_t i = 0; i < n_pieces; ++i) {
      Value k = load(kv.k[i], tp.k_tile_check(masked, pieces[i]));
      kt.push_back(tp.k_transposed ? k : trans(k));
    }
    Value qk; // (BM, BN) f32: the pieces' products summed
    for (size_t i = 0; i < n_pieces; ++i)
      qk = dot(q[i], kt[i], qk, tp.tf32);
    qk = qk.named("qk");
    ModdedScores modded;
    if (mod_env.active()) { // hidden keys are -inf already: P = 0 there
      modded = modded_scores(mod_env, f, tp, qk, start_n, masked, /*with_derivative=*/true);
      qk = modded.score;
    }
    Value p = exp2(qk * qk_scale - lse2).named("p");                    // (BM, BN) f32
    if (masked && !mod_env.active())
      p = where(visible_keys(f, tp, offs_m, start_n + arange(0, BN)), p, 0.0);
    Value dp; // (BM, BN) f32: dO Vᵀ summed over the pieces
    for (size_t i = 0; i < n_pieces; ++i) {
      Value v = load(kv.v[i], tp.v_tile_check(masked, pieces[i])); // (BN, piece width)
      dp = dot(dout[i], trans(v), dp, tp.tf32);
    }
    dp = dp.named("dp");
    Value ds = p * (dp - delta_rows);                                   // (BM, BN) f32, d/d score
    if (modded.derivative.valid()) // through the score mods: d/d (q·k · sm_scale)
      ds = ds * modded.derivative;
    // With EXACT_MASKED_V, where P is 0 (hidden keys, -inf scores) dS is 0 by selection:
    // dP may be NaN or inf there (from V).
    if (masked && tp.exact_masked_v)
      ds = where(p == 0.0, 0.0, ds);
    ds = ds.named("ds");
    Value ds_in = dt == f32 ? ds : ds.to(dt); // dS in the inputs' dtype, converted once for every piece
    for (size_t i = 0; i < n_pieces; ++i)
      dq[i] = dot(ds_in, trans(kt[i]), dq[i], tp.tf32); // (BM, piece width)
    advance_keys(kv, tp, BN);
  };
  if (block_mask) {
    // The key tiles the forward visits over the block mask: full ones unmasked, partial ones masked.
    Value row = block_mask_row(off_hz, cdiv(f.N_Q, BM), start_m);
    Value list = block_mask_list(row, cdiv(f.N_K, BN));
    walk_block_mask_lists(bm, row, list, BN, "n", /*runs_only=*/false, point_at, step);
  } else if (mod_env.has_mask()) {
    // Mask mods: the key tiles the forward visits, masked where the forward masks them.
    for_each_mod_key_tile(mod_env, f, tp, m0, [&](const Value& start) { advance_keys(kv, tp, start); }, step);
  } else {
    KeyRange keys = key_range(f, tp, m0);
    for_range(0, keys.unmasked_end, BN, [&](Value start_n) { step(start_n, false); });
    for_range(keys.unmasked_end, keys.end, BN, [&](Value start_n) { step(start_n, true); });
  }

  for (size_t i = 0; i < n_pieces; ++i)
    store(bwd_q_block_ptr(a, b.dq, a.stride_dqn, BM, tp, m0, pieces[i]), (dq[i] * f.sm_scale).to(dt),
          tp.row_tile_check(pieces[i]));
  return kb.finish();
}

} // namespace

Kernel build_fa2_bwd_dq(const Config& config) { return build_fa2_bwd_dq_with_mods(config, AttentionMods{}); }

Kernel build_fa2_bwd_dq_with_mods(const Config& config, const AttentionMods& mods) {
  return build_fa2_bwd_dq_kernel(config, mods, false);
}

Kernel build_fa2_bwd_dq_with_block_mask(const Config& config, const AttentionMods& mods) {
  return build_fa2_bwd_dq_kernel(config, mods, true);
}

namespace {

KernelDef make_fa2_bwd_dq_def() {
  KernelDef d;
  d.name = "fa2_bwd_dq";
  d.summary = "attention backward: dQ of one query tile, looping over the key tiles it sees (deterministic)";
  d.params = attention_bwd_param_defs();
  d.params.push_back(split_d_param());
  d.params.push_back(warp_specialize_param(0));
  d.params.push_back(min_blocks_per_sm_param(1));
  d.params.push_back(static_persistent_param(0));
  d.default_num_warps = 4;
  d.default_num_stages = 2;
  d.build = build_fa2_bwd_dq;
  d.config_space = [] { return bwd_config_space(fa2_bwd_dq_def().default_config(), "BLOCK_M"); };
  d.size_args = {"B", "H", "H_KV", "N_Q", "N_K", "D"};
  d.tuning_key = {"B", "H", "N_Q", "N_K"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.prune = prune_bwd_config;
  d.grid = query_tile_grid;
  return d;
}

} // namespace

const KernelDef& fa2_bwd_dq_def() {
  static const KernelDef def = make_fa2_bwd_dq_def(); // the host API reads it on every call
  return def;
}

} // namespace kiln
