#include "kernels/attention/fa2_fwd.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_online_softmax.h"
#include "kernels/attention/attention_tiles.h"
#include "kernels/attention/attention_value_selection.h"
#include "kernels/attention/attention_varlen_tiles.h"
#include "kernels/codegen_params.h"

#include <algorithm>

namespace kiln {

Kernel build_fa2_fwd(const Config& config) { return build_fa2_fwd_with_mods(config, AttentionMods{}); }

namespace {

// The forward with mods and, with `block_mask`, over a block mask's lists (attention_block_mask.h).
Kernel build_fa2_fwd_kernel(const Config& config, const AttentionMods& mods, bool block_mask) {
  const AttentionTileParams tp = attention_tile_params(config, "fa2_fwd");
  const int64_t BM = tp.block_m, BN = tp.block_n;

  // VARLEN=1 (fa2_fwd_varlen.h): packed sequences; each program reads its sequence's lengths and first row and
  // key from the offsets, and everything below runs on them as on one (batch, head) of the dense kernel.
  const bool varlen = config.get_or("VARLEN", 0) != 0;
  // LAZY_RESCALE=1 (codegen_params.h): the running max moves by jumps of more than 2^8 only.
  const bool lazy_rescale = config.get_or("LAZY_RESCALE", 0) != 0;
  if (block_mask) {
    if (varlen)
      fail("fa2_fwd_block_mask: block masks with packed sequences (VARLEN=1) are not built yet");
    check_block_mask_config(config);
  }
  KernelBuilder kb(varlen ? "fa2_fwd_varlen" : block_mask ? "fa2_fwd_block_mask" : "fa2_fwd", config);
  AttentionArgs a = declare_attention_args(kb, tp.dtype, varlen);
  const VarlenArgs varlen_args = varlen ? declare_varlen_args(kb) : VarlenArgs{};

  // Causal Q tiles lower down see more keys: launch them first (across a group of heads where below says,
  // query_tile_program), so that the grid's last wave holds the light tiles instead of leaving a few heavy ones
  // to run alone. PERSISTENT=1 numbers the programs along x only, which a persistent grid needs (dense sequences
  // only: a packed batch's tiles per sequence vary).
  const bool persistent = config.get_or("PERSISTENT", 0) != 0;
  if (persistent && varlen)
    fail("fa2_fwd_varlen: PERSISTENT=1 is for dense sequences; packed ones (VARLEN=1) take PERSISTENT=0");
  // Heads in groups only on dense sequences where two or more CTAs share an SM: measured +0.5-3.5 % there, -1-0 %
  // with one CTA an SM (worklog §63), where the order's extra live registers also tip the 128 x 64
  // one-warpgroup tile into spilling at 255; and on a dynamic persistent grid (PERSISTENT=2), whose CTAs take the
  // ids in order as the hardware does (a static one's stride would not keep the order).
  const bool group_heads =
      !varlen && (config.get_or("MIN_BLOCKS_PER_SM", 1) >= 2 || config.get_or("PERSISTENT", 0) == 2);
  const QueryTileProgram program =
      query_tile_program(tp, mods, persistent, a.N_Q, group_heads ? std::optional<Value>(a.N_K) : std::nullopt);
  Value start_m = program.start_m.named("start_m");
  Value off_hz = program.off_hz.named("off_hz");
  AttentionHeadBases bases;
  Value m0;
  if (varlen) {
    m0 = start_m * BM;
    SequenceView seq = varlen_sequence(a, varlen_args, off_hz, m0);
    a = seq.args; // N_Q and N_K are the sequence's from here on
    bases = seq.bases;
  } else {
    bases = attention_head_bases(a, off_hz);
    m0 = start_m * BM;
  }

  // One Q, K, V and O tile a head-dim piece: one HEAD_DIM wide, or with SPLIT_D two (attention_tiles.h).
  const std::vector<HeadDimPiece> pieces = tp.head_dim_pieces();
  const size_t n_pieces = pieces.size();
  if (n_pieces > 1 && tp.exact_masked_v)
    fail("fa2_fwd: SPLIT_D=1 with EXACT_MASKED_V=1 is not built; the host runs such problems with SPLIT_D=0");
  std::vector<Value> q_ptrs;
  for (const HeadDimPiece& piece : pieces)
    q_ptrs.push_back(q_block_ptr(a, bases, tp, m0, piece));
  KeyTilePtrs kv = key_tile_ptrs(a, bases, tp, 0);
  std::vector<Value> q; // (BM, piece width) each, zero past N_Q (and D)
  for (size_t i = 0; i < n_pieces; ++i)
    q.push_back(load(q_ptrs[i], tp.row_tile_check(pieces[i])).named(head_dim_piece_name("q", i, n_pieces)));

  Value offs_m = (m0 + arange(0, BM)).named("offs_m"); // (BM,) i32
  // Score mods (attention_mods.h) see scores already scaled by sm_scale: only log2 e is left to apply to them.
  // Packed: b is the sequence and the mods' N_Q, N_K, q_idx and kv_idx are the sequence's (a = its view).
  ModKernelEnv mod_env = mods.empty() ? ModKernelEnv{} : mod_kernel_env(kb, mods, a, off_hz, offs_m);
  if (varlen && mod_env.active()) // an empty sequence's rows clamp to -1: the sink reads row 0 instead
    mod_env.args.q_idx = maximum(mod_env.args.q_idx, 0);
  const BlockMaskArgs bm = block_mask ? declare_block_mask_args(kb, "bm_") : BlockMaskArgs{};
  Value qk_scale = scores_to_log2(mod_env, a.sm_scale); // exp(x·s) = exp2(x·s·log2 e): one multiply
  Value m_i = full({BM}, -kInfinity, f32).named("m_i"); // running row max, log2 domain
  Value l_i = zeros({BM}, f32).named("l_i");             // running row sum of p
  std::vector<Value> acc; // (BM, piece width) unnormalised output, a tile a head-dim piece
  for (size_t i = 0; i < n_pieces; ++i)
    acc.push_back(zeros({BM, pieces[i].width}, f32).named(head_dim_piece_name("acc", i, n_pieces)));
  if (mod_env.has_sink()) { // a sink joins the softmax as a key with no value: the state starts from it
    SinkState sink = sink_initial_state(mod_env, tp);
    m_i = sink.m, l_i = sink.l;
  }

  // One K/V tile: qk, the online-softmax update, acc += p v. `masked` tiles hide keys past N_K and,
  // when causal, keys above the diagonal; unmasked tiles skip that work entirely.
  auto attend = [&](const Value& start_n, bool masked) {
    // With EXACT_MASKED_V, a masked tile's V is checked for NaN and ±inf first (attention_value_selection.h): a
    // second read of the tile into registers and a block-wide reduction, done here, before Q Kᵀ, where few
    // registers are live. Without it, the kernel's code is exactly what it is without the option.
    const bool select = masked && tp.exact_masked_v;
    Value v_finite = select ? values_are_finite(load_values_to_check(kv.v[0], tp)) : Value();
    std::vector<Value> kt; // (piece width, BN) each
    for (size_t i = 0; i < n_pieces; ++i) {
      Value k = load(kv.k[i], tp.k_tile_check(masked, pieces[i]));
      kt.push_back(tp.k_transposed ? k : trans(k));
    }
    Value qk; // (BM, BN) f32: the pieces' products summed on the tensor cores
    for (size_t i = 0; i < n_pieces; ++i)
      qk = dot(q[i], kt[i], qk, tp.tf32);
    qk = qk.named("qk");
    if (mod_env.active()) {
      qk = modded_scores(mod_env, a, tp, qk, start_n, masked).score;
    } else if (masked) {
      Value offs_n = start_n + arange(0, BN); // (BN,) i32
      qk = where(visible_keys(a, tp, offs_m, offs_n), qk, -kInfinity);
    }
    Value p = online_softmax_step(qk, qk_scale, m_i, l_i, acc, lazy_rescale); // (BM, BN) f32; m_i: the new max
    Value p_in; // P in V's dtype, converted once for every head-dim tile (after the first V load, where the
                // one-tile kernel has always converted it)
    for (size_t i = 0; i < n_pieces; ++i) {
      Value v = load(kv.v[i], tp.v_tile_check(masked, pieces[i])); // (BN, piece width)
      // A masked tile's hidden keys have p = 0, and 0 · NaN = NaN: with EXACT_MASKED_V their V is selected away.
      if (select) {
        acc[i] = accumulate_masked_values(a, bases, tp, offs_m, start_n, p, v, v_finite, acc[i]);
        continue;
      }
      if (!p_in.valid())
        p_in = tp.dtype == f32 ? p : p.to(tp.dtype);
      acc[i] = dot(p_in, v, acc[i], tp.tf32);
    }
    advance_keys(kv, tp, BN);
  };

  // Stage 1: key tiles every row of this Q tile sees whole (no mask). Stage 2: the tiles that cross
  // N_K or the causal diagonal, masked. Tiles wholly above the diagonal are never visited.
  // MASK_EVERY_TILE=1 instead visits every key tile with the mask applied: the plain strategy the two stages
  // are measured against (bench seeds suite), same results.
  if (config.get("MASK_EVERY_TILE") != 0) {
    for_range(0, a.N_K, BN, [&](Value start_n) { attend(start_n, true); });
  } else if (block_mask) {
    // The block mask's lists: full tiles unmasked, partial tiles masked, empty tiles never visited.
    auto seek = [&](const Value& start_n) { // the loops carry kv's own Values: assigned one by one
      const KeyTilePtrs at = key_tile_ptrs(a, bases, tp, start_n);
      for (size_t i = 0; i < n_pieces; ++i)
        kv.k[i] = at.k[i], kv.v[i] = at.v[i];
    };
    for_each_block_mask_tile(bm, a, tp, off_hz, start_m, config.get_or("BLOCK_MASK_RUNS", 0) != 0, seek, attend);
  } else if (mod_env.has_mask()) {
    // Mask mods: the key tiles within the mods' key bounds (and the causal rule); those every row sees whole
    // (the mods' full bounds) unmasked, the others masked.
    for_each_mod_key_tile(mod_env, a, tp, m0, [&](const Value& start) { advance_keys(kv, tp, start); }, attend);
  } else {
    KeyRange keys = key_range(a, tp, m0);
    for_range(0, keys.unmasked_end, BN, [&](Value start_n) { attend(start_n, false); });
    for_range(keys.unmasked_end, keys.end, BN, [&](Value start_n) { attend(start_n, true); });
  }

  store_attention_rows(a, bases, tp, m0, offs_m, acc, l_i, m_i);
  return kb.finish();
}

} // namespace

Kernel build_fa2_fwd_with_mods(const Config& config, const AttentionMods& mods) {
  return build_fa2_fwd_kernel(config, mods, false);
}

Kernel build_fa2_fwd_with_block_mask(const Config& config, const AttentionMods& mods) {
  return build_fa2_fwd_kernel(config, mods, true);
}

namespace {

KernelDef make_fa2_fwd_def() {
  KernelDef d;
  d.name = "fa2_fwd";
  d.summary = "FlashAttention-2 forward: O and LSE of softmax(Q K^T * sm_scale) V, one program per Q tile";
  d.params = attention_param_defs();
  // FA2 only: how many CTAs must fit on an SM (the second __launch_bounds__ argument, see codegen.h). 1 lets
  // ptxas use every register a thread can have; 2 caps 8-warp CTAs at 128 registers, 4 caps 4-warp CTAs.
  d.params.push_back(min_blocks_per_sm_param(1));
  d.params.push_back(ParamDef::flag(
      "MASK_EVERY_TILE", 0, "1 masks every key tile (no unmasked stage, no skipping above the causal diagonal)"));
  d.params.push_back(warp_specialize_param(0));
  d.params.push_back(pingpong_param(0));
  d.params.push_back(product_ahead_param(0));
  d.params.push_back(last_product_late_param(0));
  d.params.push_back(persistent_param(0));
  d.params.push_back(lazy_rescale_param(0));
  d.params.push_back(exp2_on_fma_param(0));
  d.params.push_back(tile_barriers_param(0));
  d.params.push_back(split_d_param());
  d.default_num_warps = 8; // 16 rows per warp: no spills on sm_80 or sm_90 (4 warps spill on sm_80)
  d.default_num_stages = 2;
  d.build = build_fa2_fwd;
  // 47 candidates; the autotuner prunes those whose tiles exceed the problem (below), whose shared memory
  // exceeds the device's per-block limit, or whose MIN_BLOCKS_PER_SM CTAs cannot share an SM's shared memory.
  d.config_space = [] {
    std::vector<Config> cs;
    auto add = [&](int64_t bm, int64_t bn, int warps, int stages, int64_t min_blocks, bool ws = false,
                   bool late = false, bool lazy = false, bool tile_barriers = false) {
      Config c = fa2_fwd_def().default_config();
      c.set("BLOCK_M", bm).set("BLOCK_N", bn).set("MIN_BLOCKS_PER_SM", min_blocks);
      c.set("WARP_SPECIALIZE", ws ? 1 : 0).set("LAST_PRODUCT_LATE", late ? 1 : 0).set("LAZY_RESCALE", lazy ? 1 : 0);
      c.set("TILE_BARRIERS", tile_barriers ? 1 : 0);
      c.num_warps = warps;
      c.num_stages = stages;
      cs.push_back(c);
    };
    // One CTA per SM with every register it wants: 64 or 128 query rows, 32/64/128 keys a tile, 2 or 3 K/V
    // stages in flight. 64 rows with 8 warps would give a warp 8 rows, less than an m16 MMA tile.
    for (int64_t bm : {64, 128})
      for (int64_t bn : {32, 64, 128})
        for (int warps : {4, 8})
          for (int stages : {2, 3})
            if (!(bm == 64 && warps == 8))
              add(bm, bn, warps, stages, 1);
    // Two or four resident CTAs of 16-row warps (16 warps an SM) at <= 128 registers a thread: more warps to
    // hide the softmax's latency between the two MMAs, when D is small enough that the O tile fits.
    for (int64_t bn : {32, 64, 128}) {
      add(128, bn, 8, 2, 2);
      add(64, bn, 4, 2, 4);
    }
    // A deeper K/V ring for the 4-warp, 128-row tiles (the default's family): short key tiles leave little
    // work per stage to cover the next load.
    for (int64_t bn : {32, 64})
      add(128, bn, 4, 4, 1);
    // sm_90a: a producer warpgroup copies K and V by TMA for both key loops while the consumers compute
    // (worklog §32); pruned where the target has no TMA. Two consumer warpgroups of 64 rows at 240 registers a
    // thread; one of 128 rows (with 64-key tiles: 128 keys spill at D = 128); or one of 64 rows in each of two
    // CTAs an SM at 232 registers (one CTA's softmax beside the other's products).
    // PINGPONG=1 (the two warpgroups issuing their products in turn) and PRODUCT_AHEAD=1 (Q K_{j+1}ᵀ issued before
    // the softmax of S_j) are not offered: they measured 0-7 % and 13-30 % slower than these tiles without them on
    // the H100 (worklog §35, §36).
    for (int64_t bn : {64, 128}) {
      for (int stages : {2, 3})
        add(128, bn, 8, stages, 1, true);
      add(64, bn, 4, 2, 2, true);
    }
    add(128, 64, 4, 2, 1, true);
    // Four CTAs an SM of one warp-specialised warpgroup of 64 rows and 64-key tiles (104 registers a consumer):
    // at D = 64 on the H200 435-492 TFLOP/s, the best fixed tile with a causal mask (worklog §83).
    add(64, 64, 4, 2, 4, true);
    // LAST_PRODUCT_LATE=1: each key loop's P_j V_j issued after Q K_{j+1}ᵀ, so that the softmax of S_{j+1} runs
    // while P_j V_j is on the tensor cores (FlashAttention-3's intra-warpgroup overlap). A slot is then held until
    // the next iteration's wait, so only three stages pay: on the H200 at D = 128, 128 x 128, causal 445 -> 495
    // TFLOP/s, not causal 609 -> 616; two stages lose 23-38 % (worklog §59).
    for (int64_t bn : {64, 128})
      add(128, bn, 8, 3, 1, true, true);
    // LAZY_RESCALE=1 (the running max moved by jumps of more than 2^8 only, O's rescale skipped where its factors
    // are 1) on the warp-specialised tiles it measured faster on at 128 keys (H200, worklog §72): the 64-row tiles
    // two CTAs an SM, +4-5 % with a causal mask at D = 64 (-4 to 0 % without one), and the late tiles, -2 to +4 %
    // at D = 128. Their 64-key forms are offered too, not measured apart; the tuner times each.
    for (int64_t bn : {64, 128}) {
      add(64, bn, 4, 2, 2, true, false, true);
      add(128, bn, 8, 3, 1, true, true, true);
    }
    // TILE_BARRIERS=1 (a full and an empty mbarrier per tile of a ring slot: K goes back after S's wait, V an
    // iteration later) lets the late tiles run at two stages. On the H200 (worklog §96) the late 128 x 128 tile at two
    // stages matched three (D = 128: 627.7 / 630.7 TFLOP/s; causal +1.4-1.8 %; one pair a slot: 403), and at
    // D = 256, where three stages of 64 keys do not fit, the late 64-key tile beat the tuner's pick by 2.5 % without
    // a mask and, with LAZY_RESCALE, by 7 % causal.
    add(128, 128, 8, 2, 1, true, true, true, true);
    add(128, 64, 8, 2, 1, true, true, false, true);
    add(128, 64, 8, 2, 1, true, true, true, true);
    // PERSISTENT=1 (one wave of CTAs walking the query tiles, each CTA's producer running into its next tile's keys
    // and Q prefetched under the epilogue) on the first of those: on the H200 at D = 128 without a mask +3.9 / +2.9
    // / +2.0 % over the same tile on the hardware's grid at N = 1024 / 2048 / 4096 (worklog §97). With a causal mask
    // a static walk hands some CTAs the heavy tiles again and again, 4-17 % slower (§74, §97), so the prune below
    // drops it there. PERSISTENT=2 (each CTA draws its next tile) balances them; it measured no faster than the
    // hardware's own scheduling (0.94-1.01, §77, §97) while the consumers copied Q into one buffer after their last
    // key tile, and +12 % at N = 1024 and +5 % at 4096 over the hardware's grid (causal, bf16, D = 128) once the
    // producer copies Q into two buffers (§108). Offered on the same tile; the tuner times it beside the static one.
    add(128, 128, 8, 2, 1, true, true, true, true);
    cs.back().set("PERSISTENT", 1);
    add(128, 128, 8, 2, 1, true, true, true, true);
    cs.back().set("PERSISTENT", 2);
    // Small tiles for the widest f32 heads, whose 4-byte tiles fit no config above (f32 at HEAD_DIM = 256 needs
    // 232 KiB with 64 x 32 tiles and 2 stages): they fit sm_90's 227 KiB per block, sm_80's 163 KiB and, the
    // last, sm_86's 99 KiB.
    add(64, 32, 4, 1, 1);
    add(64, 16, 4, 2, 1);
    add(32, 16, 2, 1, 1);
    return cs;
  };
  d.size_args = {"B", "H", "H_KV", "N_Q", "N_K", "D"};
  d.tuning_key = {"B", "H", "N_Q", "N_K"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.prune = [](const Config& c, const SizeArgs& s) { return fa2_fwd_prune(c, s, AttentionMods{}); };
  d.grid = query_tile_grid;
  return d;
}

} // namespace

// The static persistent grid where later query tiles are heavier (above); a tile wider than the (power-of-two
// padded) sequence, which only computes padding. The floors are the space's smallest tiles, so that a short
// sequence keeps at least one config.
std::string fa2_fwd_prune(const Config& c, const SizeArgs& s, const AttentionMods& mods) {
  const bool causal = c.get_or("CAUSAL", 0) != 0;
  if (c.get_or("PERSISTENT", 0) == 1 && later_query_tiles_heavier(causal, mods)) {
    std::string why = "a causal mask";
    if (!causal)
      for (const MaskMod& m : mods.mask)
        if (m.later_rows_see_more)
          why = fmt::format("mask mod '{}' (later_rows_see_more)", m.name);
    return fmt::format("PERSISTENT=1 with {}: later query tiles see more keys, and a static walk of the query tiles "
                       "hands some CTAs the heavy ones again and again (worklog §74, §97)",
                       why);
  }
  // 128 query rows over 4 warps of the unspecialised path, with 128-key tiles: past 64 columns a warp's 32 rows of
  // O and S spill about 6 KB a thread (NVRTC 13.0, sm_90a), and the tile measured 30.5 ms against the best's 3.6
  // (H200, f16 B1 H16 N16384 D128; worklog §112).
  if (c.get("HEAD_DIM") > 64 && c.get("BLOCK_M") == 128 && c.get("BLOCK_N") == 128 && c.num_warps == 4 &&
      c.get_or("WARP_SPECIALIZE", 0) == 0)
    return fmt::format("128 x 128 tiles over 4 warps are for heads of at most 64 columns (they spill past), got "
                       "HEAD_DIM={}",
                       c.get("HEAD_DIM"));
  return prune_tiles_past_sequence(c, s, 64, 32);
}

const KernelDef& fa2_fwd_def() {
  static const KernelDef def = make_fa2_fwd_def(); // the host API reads it on every call
  return def;
}

} // namespace kiln
