#include "kernels/attention/fa1_fwd.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_tiles.h"
#include "kernels/attention/attention_value_selection.h"

namespace kiln {

Kernel build_fa1_fwd(const Config& config) {
  const AttentionTileParams tp = attention_tile_params(config, "fa1_fwd");
  const int64_t BM = tp.block_m, BN = tp.block_n, HD = tp.head_dim;

  KernelBuilder kb("fa1_fwd", config);
  AttentionArgs a = declare_attention_args(kb, tp.dtype);
  Value oacc_base = kb.arg_ptr("OACC", f32), l_base = kb.arg_ptr("L", f32), m_base = kb.arg_ptr("M", f32);

  Value off_hz = program_id(0).named("off_hz");
  AttentionHeadBases bases = attention_head_bases(a, off_hz);
  Value oacc_head = oacc_base + bases.lse_row0 * HD; // this head's [N_Q, HEAD_DIM] scratch rows
  Value l_head = l_base + bases.lse_row0, m_head = m_base + bases.lse_row0;
  auto oacc_block_ptr = [&](const Value& row) {
    return make_block_ptr(oacc_head, {a.N_Q, HD}, {HD, 1}, {row, 0}, {BM, HD}, {1, 0}).named("oacc_ptr");
  };
  Value qk_scale = (a.sm_scale * kLog2e).named("qk_scale");

  // Pass 0: every row starts with no keys seen (rows no key reaches keep this state to the end).
  {
    Value oacc_ptr = oacc_block_ptr(scalar(0, i32));
    for_range(0, a.N_Q, BM, [&](Value start_m) {
      Value rows = start_m + arange(0, BM); // (BM,) i32
      Value in_rows = rows < a.N_Q;
      store(m_head + rows, full({BM}, -kInfinity, f32), in_rows);
      store(l_head + rows, zeros({BM}, f32), in_rows);
      store(oacc_ptr, zeros({BM, HD}, f32), BoundaryCheck{0});
      oacc_ptr = advance(oacc_ptr, {BM, 0});
    });
  }

  // Pass 1: for each K/V tile, update every Q tile that sees any of its keys.
  Value k_ptr = k_block_ptr(a, bases, tp, 0).named("k_ptr");
  Value v_ptr = v_block_ptr(a, bases, tp, 0).named("v_ptr");
  for_range(0, a.N_K, BN, [&](Value start_n) {
    Value k = load(k_ptr, tp.k_tile_check(true)); // keys past N_K read as 0 and are masked below
    Value kt = tp.k_transposed ? k : trans(k);     // (HD, BN)
    Value v = load(v_ptr, tp.v_tile_check(true));  // (BN, HD)
    // Every step below is masked: with EXACT_MASKED_V, a V tile holding NaN or ±inf is multiplied key by key,
    // selecting the keys each row sees (attention_value_selection.h). Checked once here for all the Q tiles.
    Value v_finite = tp.exact_masked_v ? values_are_finite(load_values_to_check(v_ptr, tp)) : Value();
    Value offs_n = start_n + arange(0, BN);        // (BN,) i32
    // Causal: query i sees key j iff j <= i (top-left) or j <= i + N_K - N_Q (bottom-right), so the
    // rows before start_n (or start_n - (N_K - N_Q)) see none of this tile.
    Value q_lo = scalar(0, i32);
    if (tp.causal == CausalMode::TopLeft)
      q_lo = start_n / BM * BM;
    if (tp.causal == CausalMode::BottomRight)
      q_lo = maximum(start_n - (a.N_K - a.N_Q), 0) / BM * BM;
    Value q_ptr = q_block_ptr(a, bases, tp, q_lo);
    Value oacc_ptr = oacc_block_ptr(q_lo);
    for_range(q_lo, a.N_Q, BM, [&](Value start_m) {
      Value offs_m = start_m + arange(0, BM); // (BM,) i32
      Value in_rows = offs_m < a.N_Q;
      Value q = load(q_ptr, tp.row_tile_check());                  // (BM, HD)
      Value m_i = load(m_head + offs_m, in_rows, -kInfinity);      // (BM,) f32
      Value l_i = load(l_head + offs_m, in_rows, 0.0f);            // (BM,) f32
      Value acc = load(oacc_ptr, BoundaryCheck{0});                              // (BM, HD) f32
      Value qk = dot(q, kt, Value(), tp.tf32);                      // (BM, BN) f32
      qk = where(visible_keys(a, tp, offs_m, offs_n), qk, -kInfinity);
      Value m_ij = maximum(m_i, max(qk, 1) * qk_scale);
      Value m_shift = where(m_ij == -kInfinity, 0.0, m_ij); // rows that have seen no key yet
      Value p = exp2(qk * qk_scale - m_shift.expand_dims(1)); // (BM, BN) f32
      Value alpha = exp2(m_i - m_shift);
      l_i = l_i * alpha + sum(p, 1);
      acc = acc * alpha.expand_dims(1);
      acc = tp.exact_masked_v ? accumulate_masked_values(a, bases, tp, offs_m, start_n, p, v, v_finite, acc)
                              : dot(tp.dtype == f32 ? p : p.to(tp.dtype), v, acc, tp.tf32);
      store(m_head + offs_m, m_ij, in_rows);
      store(l_head + offs_m, l_i, in_rows);
      store(oacc_ptr, acc, BoundaryCheck{0});
      q_ptr = advance(q_ptr, {BM, 0});
      oacc_ptr = advance(oacc_ptr, {BM, 0});
    });
    k_ptr = advance_k(k_ptr, tp);
    v_ptr = advance(v_ptr, {BN, 0});
  });

  // Pass 2: O = OACC / L, LSE from M and L.
  {
    Value oacc_ptr = oacc_block_ptr(scalar(0, i32));
    for_range(0, a.N_Q, BM, [&](Value start_m) {
      Value offs_m = start_m + arange(0, BM);
      Value in_rows = offs_m < a.N_Q;
      Value acc = load(oacc_ptr, BoundaryCheck{0});
      Value l = load(l_head + offs_m, in_rows, 0.0f);
      Value m = load(m_head + offs_m, in_rows, -kInfinity);
      store_attention_rows(a, bases, tp, start_m, offs_m, std::span<const Value>(&acc, 1), l, m);
      oacc_ptr = advance(oacc_ptr, {BM, 0});
    });
  }
  return kb.finish();
}

namespace {

KernelDef make_fa1_fwd_def() {
  KernelDef d;
  d.name = "fa1_fwd";
  d.summary = "FlashAttention-1 forward (Algorithm 1): K/V outer loop, Q inner loop, state in global memory";
  d.params = attention_param_defs();
  d.params[0].default_value = 64; // BLOCK_M: the inner loop re-reads its state, smaller tiles fit better
  d.default_num_warps = 4;
  d.default_num_stages = 2;
  d.build = build_fa1_fwd;
  d.config_space = [] {
    std::vector<Config> cs;
    for (int64_t bm : {32, 64, 128})
      for (int64_t bn : {32, 64, 128})
        for (int warps : {4, 8}) {
          Config c = fa1_fwd_def().default_config();
          c.set("BLOCK_M", bm).set("BLOCK_N", bn);
          c.num_warps = warps;
          cs.push_back(c);
        }
    return cs;
  };
  d.size_args = {"B", "H", "H_KV", "N_Q", "N_K", "D"};
  d.tuning_key = {"B", "H", "N_Q", "N_K"};
  d.grid = [](const Config&, const SizeArgs& s) { return Grid{s.at("B") * s.at("H"), 1, 1}; };
  return d;
}

} // namespace

const KernelDef& fa1_fwd_def() {
  static const KernelDef def = make_fa1_fwd_def(); // the host API reads it on every call
  return def;
}

} // namespace kiln
