#include "kernels/attention/fa2_bwd_dkdv.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_bwd_args.h"
#include "kernels/attention/attention_bwd_space.h"
#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_tiles.h"
#include "kernels/attention/attention_varlen_tiles.h"
#include "kernels/attention/fa2_bwd_block_mask.h"
#include "kernels/codegen_params.h"

#include <algorithm>
#include <optional>

namespace kiln {

namespace {

// The query rows the key tile [n0, n0 + BLOCK_N) sends gradients to, in BLOCK_M tiles from `begin` (a
// multiple of BLOCK_M): [begin, unmasked_begin) crosses the causal diagonal (masked), [unmasked_begin,
// unmasked_end) sees every key of the tile and lies inside N_Q (no mask), [unmasked_end, N_Q) is the query
// tail (masked). A key tile that crosses N_K is masked throughout.
struct QueryRange {
  Value begin, unmasked_begin, unmasked_end;
};

QueryRange query_range(const AttentionArgs& a, const AttentionTileParams& tp, const Value& n0) {
  const int64_t BM = tp.block_m, BN = tp.block_n;
  Value full_rows_end = a.N_Q / BM * BM; // rows in whole query tiles
  Value begin = zeros({}, i32), unmasked_begin = zeros({}, i32);
  if (tp.causal != CausalMode::None) {
    // Query i sees key j iff j <= last_visible_key(i) = i + shift: the first row that sees key n0 is
    // n0 - shift, the first that sees the whole tile n0 + BN - 1 - shift.
    Value shift = last_visible_key(a, tp, zeros({}, i32));
    begin = maximum(n0 - shift, 0) / BM * BM;
    unmasked_begin = maximum(cdiv(maximum(n0 + (BN - 1) - shift, 0), BM) * BM, begin);
  }
  unmasked_begin = minimum(unmasked_begin, maximum(full_rows_end, begin));
  // The last key tile, when it crosses N_K, masks every step (its padded keys must not reach dQ).
  unmasked_begin = where(n0 + BN > a.N_K, maximum(a.N_Q, begin), unmasked_begin);
  Value unmasked_end = maximum(full_rows_end, unmasked_begin);
  return QueryRange{begin.named("q_begin"), unmasked_begin.named("q_unmasked_begin"),
                    unmasked_end.named("q_unmasked_end")};
}

// dK/dV with mods and, with `block_mask`, over a block mask's by-key lists (fa2_bwd_block_mask.h).
Kernel build_fa2_bwd_dkdv_kernel(const Config& config, const AttentionMods& mods, bool block_mask) {
  const AttentionTileParams tp = attention_tile_params(config, "fa2_bwd_dkdv");
  const int64_t BM = tp.block_m, BN = tp.block_n;
  const bool atomic_dq = config.get("ATOMIC_DQ") != 0;
  const bool warp_specialized = config.get_or("WARP_SPECIALIZE", 0) != 0;
  if (block_mask) { // before the atomic variant's own checks: over a block mask it is refused outright
    if (config.get_or("VARLEN", 0) != 0)
      fail("fa2_bwd_dkdv_block_mask: block masks with packed sequences (VARLEN=1) are not built yet");
    check_block_mask_bwd_config(config);
  }
  const DType dt = tp.dtype;
  auto low = [&](const Value& x) { return dt == f32 ? x : x.to(dt); }; // product operands in the input dtype

  const bool varlen = config.get_or("VARLEN", 0) != 0; // packed sequences (fa2_bwd_varlen.h)
  static_check(!warp_specialized || (!varlen && !block_mask),
               "fa2_bwd_dkdv: WARP_SPECIALIZE=1 is built for the dense backward (not with packed sequences or a block "
               "mask)");
  KernelBuilder kb(varlen ? "fa2_bwd_dkdv_varlen" : block_mask ? "fa2_bwd_dkdv_block_mask" : "fa2_bwd_dkdv", config);
  AttentionBwdArgs a = declare_attention_bwd_args(kb, dt, varlen);
  const VarlenArgs varlen_args = varlen ? declare_varlen_args(kb) : VarlenArgs{};
  const AttentionArgs& f = a.fwd;
  // PERSISTENT numbers the programs along x alone, as the code generator's persistent grid needs: key tile
  // p % tiles of batch·kv head p / tiles, so that the CTAs that run at once share a head's Q and dO in L2. The
  // tile count is written without a subtraction, so that the head coordinate stays provably >= 0 (TMA's, as in
  // query_tile_program).
  const bool persistent = config.get_or("PERSISTENT", 0) != 0;
  static_check(!persistent || (!varlen && !block_mask),
               "fa2_bwd_dkdv: PERSISTENT is built for the dense backward (not with packed sequences or a block mask)");
  Value key_tiles = persistent ? ((f.N_K + (BN - 1)) / BN).named("key_tiles") : Value();
  Value n0 = ((persistent ? program_id(0) % key_tiles : program_id(0)) * BN).named("n0");
  Value off_bkv = persistent ? program_id(0) / key_tiles : program_id(1);
  Value off_b = off_bkv / f.H_KV;
  Value group = (f.H / f.H_KV).named("group"); // query heads per kv head
  // The group's first query head; warp-specialised, the only one (H == H_KV: fa2_bwd_dkdv.h), written without
  // the group's size so that its bound (and so TMA's coordinate) follows from the program id.
  Value head0 = warp_specialized ? off_bkv % f.H_KV : (off_bkv % f.H_KV) * group;
  std::optional<SequenceSpan> seq;             // VARLEN: this program's sequence
  if (varlen)
    seq = read_sequence_span(f, varlen_args, off_b);
  auto bases = [&](const Value& head) { return seq ? varlen_bwd_bases(a, *seq, head) : attention_bwd_bases(a, off_b, head); };
  AttentionBwdBases kvb = bases(head0);
  if (seq) { // the sequence's rows and keys from here on; a key tile past its keys sees no query row
    a.fwd.N_K = seq->n_k;
    a.fwd.N_Q = where(n0 < seq->n_k, seq->n_q, 0).named("tile_n_q");
  }
  // The mods' tensors follow the backward's arguments; the scores are recomputed with them, on the transposed
  // tile (keys along rows: attention_mods.h).
  const ModKernelEnv mod_kernel = mods.empty() ? ModKernelEnv{} : declare_mod_kernel_env(kb, mods, f);
  // Over a block mask: this key tile's lists of query tiles (the by-key lists), after the mods' tensors.
  const BlockMaskArgs bm = block_mask ? declare_block_mask_args(kb, "bm_") : BlockMaskArgs{};

  // This program's keys, on chip for the whole program; keys past N_K read as zero. A K, V, dK, dV, Q and dO tile
  // a head-dim piece: one HEAD_DIM wide, or with SPLIT_D two (attention_tiles.h).
  const std::vector<HeadDimPiece> pieces = tp.head_dim_pieces();
  const size_t n_pieces = pieces.size();
  auto kv_check = [](const HeadDimPiece& piece) { return piece.checked ? BoundaryCheck{0, 1} : BoundaryCheck{0}; };
  auto kt_check = [](const HeadDimPiece& piece) { return piece.checked ? BoundaryCheck{0, 1} : BoundaryCheck{1}; };
  std::vector<Value> k, v; // (BN, piece width) each
  for (size_t i = 0; i < n_pieces; ++i) {
    Value k_loaded =
        load(bwd_k_block_ptr(a, kvb, BN, tp, n0, pieces[i]), tp.k_transposed ? kt_check(pieces[i]) : kv_check(pieces[i]));
    k.push_back((tp.k_transposed ? trans(k_loaded) : k_loaded).named(head_dim_piece_name("k", i, n_pieces)));
    v.push_back(load(bwd_kv_block_ptr(a, kvb.v, f.stride_vn, BN, tp, n0, pieces[i]), kv_check(pieces[i]))
                    .named(head_dim_piece_name("v", i, n_pieces)));
  }
  Value offs_n = (n0 + arange(0, BN)).named("offs_n"); // (BN,) i32
  Value qk_scale = scores_to_log2(mod_kernel, f.sm_scale);
  std::vector<Value> dk, dv; // (BN, piece width): Σ dSᵀ Q unscaled, and Σ Pᵀ dO
  for (size_t i = 0; i < n_pieces; ++i)
    dk.push_back(zeros({BN, pieces[i].width}, f32).named(head_dim_piece_name("dk", i, n_pieces)));
  for (size_t i = 0; i < n_pieces; ++i)
    dv.push_back(zeros({BN, pieces[i].width}, f32).named(head_dim_piece_name("dv", i, n_pieces)));
  // Over a block mask the lists replace the range (its loops are not built).
  QueryRange range = block_mask ? QueryRange{zeros({}, i32), Value(), Value()} : query_range(f, tp, n0);
  // Mask mods: every query tile from the causal rule's first on is visited, masked, and with key bounds skipped
  // when it does not see this key tile (the bounds say which keys a query tile sees, not which queries see a
  // key tile, so the loop cannot start and end there).
  if (mod_kernel.has_mask() && !block_mask)
    range.unmasked_begin = range.unmasked_end = f.N_Q;
  // With key bounds, each query tile's step is guarded by the key tiles the tile visits (one function decides
  // them for the forward, dQ and here).
  const bool skips_by_key_bounds =
      mod_kernel.has_mask() && !block_mask &&
      std::any_of(mods.mask.begin(), mods.mask.end(), [](const MaskMod& m) { return static_cast<bool>(m.key_bounds); });

  auto per_query_head = [&](Value g) {
    AttentionBwdBases hb = bases(head0 + g);
    const ModKernelEnv mod_env = mod_kernel.active() ? mod_kernel.at(off_b, head0 + g, Value()) : ModKernelEnv{};
    std::vector<Value> q_ptr, do_ptr;
    for (size_t i = 0; i < n_pieces; ++i) {
      q_ptr.push_back(bwd_q_block_ptr(a, hb.q, f.stride_qn, BM, tp, range.begin, pieces[i])
                          .named(head_dim_piece_name("q_ptr", i, n_pieces)));
      do_ptr.push_back(bwd_q_block_ptr(a, hb.dout, a.stride_don, BM, tp, range.begin, pieces[i])
                           .named(head_dim_piece_name("do_ptr", i, n_pieces)));
    }
    // Fused and warp-specialised at D <= 64, each step's dQ = dS K is computed and added in the next step: the
    // product first, the add after that step's Sᵀ and dPᵀ are issued, so that the add's stage, barrier and
    // reduction run under them instead of with the tensor cores idle (the 128-key tile 19.0 -> 16.6 ms on an H200
    // with the add alone a step later, worklog §89; §90 the product too). dSᵀ is carried, not dQ: a product's
    // registers read in the next iteration while in flight make ptxas put every product in series (C7514), and
    // an add under dV's or dK's products (A in registers) too (C7520). The first step multiplies zeros and adds
    // them to its own rows. At D = 128 the tile spills, and so does a 128-row step, whose carried dSᵀ and dQ take
    // 64 registers a thread more (worklog §109): there dQ is computed and added in its own step.
    const bool defer_dq = atomic_dq && warp_specialized && !skips_by_key_bounds && n_pieces == 1 &&
                          pieces[0].width <= 64 && BM <= 64;
    Value ds_prev;              // (BN, BM) in the inputs' dtype: the previous step's dSᵀ
    Value prev_m = range.begin; // the previous step's first query row
    if (defer_dq)
      ds_prev = zeros({BN, BM}, dt).named("ds_prev");
    auto dq_of = [&](const Value& dsT_in) { // (BM, piece width) f32 each, unscaled
      std::vector<Value> dq;
      for (size_t i = 0; i < n_pieces; ++i)
        dq.push_back(dot(trans(dsT_in), k[i], Value(), tp.tf32));
      return dq;
    };
    auto add_dq = [&](const Value& start_m, const std::vector<Value>& dq) {
      for (size_t i = 0; i < n_pieces; ++i) // the whole block: on sm_90a staged and added by the TMA unit
        atomic_add(bwd_dq_acc_block_ptr(a, hb.row0, BM, start_m, pieces[i]), dq[i], {0, 1});
    };
    Value lse_ptr = bwd_row_block_ptr(a, f.lse, hb.row0, BM, range.begin).named("lse_ptr");
    Value delta_ptr = bwd_row_block_ptr(a, a.delta, hb.row0, BM, range.begin).named("delta_ptr");

    // One query tile. `masked` tiles hide rows past N_Q, keys past N_K and keys a row may not see.
    auto accumulate = [&](const Value& start_m, bool masked) {
      BoundaryCheck rows = masked ? BoundaryCheck{0} : BoundaryCheck{};
      auto tile = [&](const HeadDimPiece& piece) {
        return masked ? tp.row_tile_check(piece) : (piece.checked ? BoundaryCheck{1} : BoundaryCheck{});
      };
      // The previous step's dQ, issued first: it needs nothing of this step, and is done (and added) under this
      // step's first products.
      std::vector<Value> dq_prev = defer_dq ? dq_of(ds_prev) : std::vector<Value>{};
      Value offs_m = start_m + arange(0, BM); // (BM,) i32
      std::vector<Value> q;                   // (BM, piece width) each
      for (size_t i = 0; i < n_pieces; ++i)
        q.push_back(load(q_ptr[i], tile(pieces[i])));
      Value lse = load(lse_ptr, rows); // (BM,) f32
      if (defer_dq) // the previous step's partial, added under this step's first products
        add_dq(prev_m, dq_prev);
      // Delta is waited for right after dPᵀ, where nothing hides its load. Fused (the dQ adds here), loaded beside
      // LSE it runs under the step's first products: the warp-specialised 128-key tile 20.1 -> 17.6 ms at D = 64 on
      // an H200; without the adds even at D = 64 and 7 % slower at D = 128, so loaded where used (worklog §87).
      Value delta_early = atomic_dq ? load(delta_ptr, rows) : Value(); // (BM,) f32
      // exp2(x - LSE·log2 e); a row that sees no key (LSE = -inf) gets P = 0 through +inf.
      Value lse2 = masked ? where(lse == -kInfinity, kInfinity, lse * kLog2e) : lse * kLog2e;
      Value qkT; // (BN, BM) f32: the pieces' products summed
      for (size_t i = 0; i < n_pieces; ++i)
        qkT = dot(k[i], trans(q[i]), qkT, tp.tf32);
      qkT = qkT.named("qkT");
      // (BN, BM) i1: the built-in mask of a masked tile (rows past N_Q, keys past N_K, the causal rule).
      auto builtin_seen = [&] {
        Value cols = offs_m.expand_dims(0); // (1, BM) query rows
        Value keys = offs_n.expand_dims(1); // (BN, 1)
        Value seen = broadcast_to((keys < f.N_K) && (cols < f.N_Q), {BN, BM});
        if (tp.causal != CausalMode::None)
          seen = seen && (keys <= last_visible_key(f, tp, cols));
        return seen;
      };
      ModdedScores modded;
      if (mod_env.active()) { // hidden pairs are -inf already: P = 0 there
        modded = modded_scores_transposed(mod_env, f, qkT, offs_m, offs_n, masked ? builtin_seen() : Value(),
                                          /*with_derivative=*/true);
        qkT = modded.score;
      }
      Value pT = exp2(qkT * qk_scale - lse2.expand_dims(0)).named("pT");             // (BN, BM) f32
      if (masked && !mod_env.active())
        pT = where(builtin_seen(), pT, 0.0);
      std::vector<Value> dout; // (BM, piece width) each
      for (size_t i = 0; i < n_pieces; ++i)
        dout.push_back(load(do_ptr[i], tile(pieces[i])));
      Value pT_in = low(pT); // Pᵀ in the inputs' dtype, converted once for every piece
      for (size_t i = 0; i < n_pieces; ++i)
        dv[i] = dot(pT_in, dout[i], dv[i], tp.tf32); // (BN, piece width)
      Value dpT; // (BN, BM) f32: V dOᵀ summed over the pieces
      for (size_t i = 0; i < n_pieces; ++i)
        dpT = dot(v[i], trans(dout[i]), dpT, tp.tf32);
      dpT = dpT.named("dpT");
      Value delta = delta_early.valid() ? delta_early : load(delta_ptr, rows); // (BM,) f32
      Value dsT = pT * (dpT - delta.expand_dims(0));                          // (BN, BM) f32, d/d score
      if (modded.derivative.valid()) // through the score mods: d/d (q·k · sm_scale)
        dsT = dsT * modded.derivative;
      // With EXACT_MASKED_V, where P is 0 (hidden pairs, -inf scores) dS is 0 by selection:
      // dP may be NaN or inf there (from V).
      if (masked && tp.exact_masked_v)
        dsT = where(pT == 0.0, 0.0, dsT);
      dsT = dsT.named("dsT");
      Value dsT_in = low(dsT); // dSᵀ in the inputs' dtype, converted once for every piece
      for (size_t i = 0; i < n_pieces; ++i)
        dk[i] = dot(dsT_in, q[i], dk[i], tp.tf32); // (BN, piece width)
      if (defer_dq) {
        ds_prev = dsT_in;
        prev_m = start_m;
      } else if (atomic_dq) {
        add_dq(start_m, dq_of(low(dsT)));
      }
    };
    // Moves the query-side block pointers to the query tile at start_m (the block mask's lists).
    auto seek = [&](const Value& start_m) {
      for (size_t i = 0; i < n_pieces; ++i) {
        q_ptr[i] = bwd_q_block_ptr(a, hb.q, f.stride_qn, BM, tp, start_m, pieces[i]);
        do_ptr[i] = bwd_q_block_ptr(a, hb.dout, a.stride_don, BM, tp, start_m, pieces[i]);
      }
      lse_ptr = bwd_row_block_ptr(a, f.lse, hb.row0, BM, start_m);
      delta_ptr = bwd_row_block_ptr(a, a.delta, hb.row0, BM, start_m);
    };
    auto step = [&](const Value& start_m, bool masked) {
      if (skips_by_key_bounds) {
        // The key tiles this query tile visits in the forward and in dQ (mod_key_tiles): when this key tile is
        // not among them, every pair is hidden and nothing flows back.
        ModKeyTiles keys = mod_key_tiles(mod_env, f, tp, start_m);
        if_((keys.start < n0 + BN) && (keys.end > n0), [&] { accumulate(start_m, masked); });
      } else {
        accumulate(start_m, masked);
      }
      for (size_t i = 0; i < n_pieces; ++i) {
        q_ptr[i] = advance(q_ptr[i], {BM, 0});
        do_ptr[i] = advance(do_ptr[i], {BM, 0});
      }
      lse_ptr = advance(lse_ptr, {BM});
      delta_ptr = advance(delta_ptr, {BM});
    };
    if (block_mask) {
      // The query tiles that see this key tile, from the lists of query head head0 + g: full ones unmasked,
      // partial ones masked (the tail query tile is always partial there), empty ones never visited.
      Value row = block_mask_row(off_b * f.H + head0 + g, cdiv(f.N_K, BN), program_id(0));
      Value list = block_mask_list(row, cdiv(f.N_Q, BM));
      walk_block_mask_lists(bm, row, list, BM, "m", /*runs_only=*/false, seek, step);
      return;
    }
    for_range(range.begin, range.unmasked_begin, BM, [&](Value start_m) { step(start_m, true); });
    for_range(range.unmasked_begin, range.unmasked_end, BM, [&](Value start_m) { step(start_m, false); });
    for_range(range.unmasked_end, f.N_Q, BM, [&](Value start_m) { step(start_m, true); });
    if (defer_dq) // the last step's
      add_dq(prev_m, dq_of(ds_prev));
  };
  if (warp_specialized) // one query head a kv head: the query loops at the top of the kernel, as the producer needs
    per_query_head(zeros({}, i32));
  else
    for_range(0, group, 1, per_query_head);

  for (size_t i = 0; i < n_pieces; ++i)
    store(bwd_kv_block_ptr(a, kvb.dk, a.stride_dkn, BN, tp, n0, pieces[i]), (dk[i] * f.sm_scale).to(dt),
          kv_check(pieces[i]));
  for (size_t i = 0; i < n_pieces; ++i)
    store(bwd_kv_block_ptr(a, kvb.dv, a.stride_dvn, BN, tp, n0, pieces[i]), dv[i].to(dt), kv_check(pieces[i]));
  return kb.finish();
}

} // namespace

Kernel build_fa2_bwd_dkdv(const Config& config) { return build_fa2_bwd_dkdv_with_mods(config, AttentionMods{}); }

Kernel build_fa2_bwd_dkdv_with_mods(const Config& config, const AttentionMods& mods) {
  return build_fa2_bwd_dkdv_kernel(config, mods, false);
}

Kernel build_fa2_bwd_dkdv_with_block_mask(const Config& config, const AttentionMods& mods) {
  return build_fa2_bwd_dkdv_kernel(config, mods, true);
}

namespace {

KernelDef make_fa2_bwd_dkdv_def() {
  KernelDef d;
  d.name = "fa2_bwd_dkdv";
  d.summary = "attention backward: dK and dV of one key tile, looping over the query tiles (and heads) that see it";
  d.params = attention_bwd_param_defs();
  d.params.push_back(atomic_dq_param());
  d.params.push_back(split_d_param());
  ParamDef ws = warp_specialize_param(0);
  ws.help += "; here the kernel leaves out the loop over a GQA group's query heads, so it serves H == H_KV only";
  d.params.push_back(ws);
  d.params.push_back(min_blocks_per_sm_param(1));
  d.params.push_back(products_in_order_param(0));
  d.params.push_back(static_persistent_param(0));
  d.default_num_warps = 4;
  d.default_num_stages = 2;
  d.build = build_fa2_bwd_dkdv;
  d.config_space = [] { return bwd_config_space(fa2_bwd_dkdv_def().default_config(), "BLOCK_N"); };
  d.size_args = {"B", "H", "H_KV", "N_Q", "N_K", "D"};
  d.tuning_key = {"B", "H", "H_KV", "N_Q", "N_K"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.prune = prune_bwd_config;
  d.grid = [](const Config& c, const SizeArgs& s) {
    // Every launch computes the grid (the API, the tuner, `kiln run`): a warp-specialised config that would
    // leave out a GQA group's other query heads fails here instead of computing dK and dV of the first alone.
    if (std::string why = why_not_warp_specialized_dkdv(c, s.at("H"), s.at("H_KV")); !why.empty())
      fail("fa2_bwd_dkdv ({}): {}", c.str(), why);
    const int64_t bn = c.get("BLOCK_N");
    return tiles_by_heads_grid(c, (s.at("N_K") + bn - 1) / bn, s.at("B") * s.at("H_KV"));
  };
  return d;
}

} // namespace

const KernelDef& fa2_bwd_dkdv_def() {
  static const KernelDef def = make_fa2_bwd_dkdv_def(); // the host API reads it on every call
  return def;
}

} // namespace kiln
