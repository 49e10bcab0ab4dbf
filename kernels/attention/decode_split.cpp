#include "kernels/attention/decode_split.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_online_softmax.h"
#include "kernels/attention/attention_tiles.h"

#include <fmt/format.h>

namespace kiln {

namespace {

struct DecodeSplitArgs {
  Value q, k, v, block_table, seqlens_k, o_part, lse_part, sm_scale;
  Value B, H, H_KV, N_Q, N_K, D, PAGE_SIZE, NUM_SPLITS;
  Value stride_qb, stride_qn, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh,
      stride_bt;
};

DecodeSplitArgs declare_decode_split_args(KernelBuilder& kb, DType dt) {
  DecodeSplitArgs a;
  a.q = kb.arg_ptr("Q", dt);
  a.k = kb.arg_ptr("K", dt);
  a.v = kb.arg_ptr("V", dt);
  a.block_table = kb.arg_ptr("BLOCK_TABLE", i32);
  a.seqlens_k = kb.arg_ptr("SEQLENS_K", i32);
  a.o_part = kb.arg_ptr("O_PART", f32);
  a.lse_part = kb.arg_ptr("LSE_PART", f32);
  a.sm_scale = kb.arg("sm_scale", f32);
  for (auto [v, name] : {std::pair{&a.B, "B"},
                         {&a.H, "H"},
                         {&a.H_KV, "H_KV"},
                         {&a.N_Q, "N_Q"},
                         {&a.N_K, "N_K"},
                         {&a.D, "D"},
                         {&a.PAGE_SIZE, "PAGE_SIZE"},
                         {&a.NUM_SPLITS, "NUM_SPLITS"}})
    *v = kb.arg(name, i32);
  for (auto [v, name] : {std::pair{&a.stride_qb, "stride_qb"},
                         {&a.stride_qn, "stride_qn"},
                         {&a.stride_qh, "stride_qh"},
                         {&a.stride_kb, "stride_kb"},
                         {&a.stride_kn, "stride_kn"},
                         {&a.stride_kh, "stride_kh"},
                         {&a.stride_vb, "stride_vb"},
                         {&a.stride_vn, "stride_vn"},
                         {&a.stride_vh, "stride_vh"},
                         {&a.stride_bt, "stride_bt"}})
    *v = kb.arg(name, i64);
  return a;
}

// Where a K or V tile's rows come from: `base` (the sequence's, or the page's, row 0 of this kv head), the
// keys it holds (`rows`: the block pointer's extent, keys past it read as zero in masked tiles) and the
// tile's first row in it.
struct KeyRows {
  Value k_base, v_base, rows, first;
};

Value k_tile_ptr(const DecodeSplitArgs& a, const AttentionTileParams& tp, const KeyRows& r) {
  if (tp.k_transposed) // Kᵀ: (D, keys) with the head dim contiguous, so order (0, 1)
    return make_block_ptr(r.k_base, {a.D, r.rows}, {1, a.stride_kn}, {0, r.first}, {tp.head_dim, tp.block_n},
                          {0, 1});
  return make_block_ptr(r.k_base, {r.rows, a.D}, {a.stride_kn, 1}, {r.first, 0}, {tp.block_n, tp.head_dim},
                        {1, 0});
}

Value v_tile_ptr(const DecodeSplitArgs& a, const AttentionTileParams& tp, const KeyRows& r) {
  return make_block_ptr(r.v_base, {r.rows, a.D}, {a.stride_vn, 1}, {r.first, 0}, {tp.block_n, tp.head_dim},
                        {1, 0});
}

} // namespace

int64_t decode_split_keys(int64_t n_k, int64_t block_n, int64_t num_splits) {
  const int64_t tiles = (n_k + block_n - 1) / block_n;
  return (tiles + num_splits - 1) / num_splits * block_n;
}

Kernel build_decode_split(const Config& config) {
  const AttentionTileParams tp = attention_tile_params(config, "decode_split");
  const bool paged = config.get("PAGED") != 0, varlen = config.get("SEQLENS_K") != 0;
  const bool causal = tp.causal == CausalMode::BottomRight;
  static_check(tp.causal != CausalMode::TopLeft,
               "decode_split: CAUSAL=1 (top-left) is not a decoding mask; use 2 (bottom-right) or 0");
  static_check(!tp.exact_masked_v, "decode_split: EXACT_MASKED_V=1 is not supported by the decoding kernels");
  const int64_t BM = tp.block_m, BN = tp.block_n, HD = tp.head_dim;

  KernelBuilder kb("decode_split", config);
  DecodeSplitArgs a = declare_decode_split_args(kb, tp.dtype);

  Value split = program_id(0).named("split");
  Value off_bk = program_id(1).named("off_bk"); // b · H_KV + kv head
  Value row0 = (program_id(2) * BM).named("row0");
  Value group = (a.H / a.H_KV).named("group");          // G query heads per kv head
  Value head_rows = (group * a.N_Q).named("head_rows"); // packed rows of one kv head
  Value b = (off_bk / a.H_KV).named("b"), hkv = (off_bk % a.H_KV).named("hkv");
  Value b64 = b.to(i64), hkv64 = hkv.to(i64);
  Value n_k = varlen ? load(a.seqlens_k + b).named("n_k") : a.N_K; // this sequence's keys

  // Q: packed row r is query r % N_Q of head hkv·G + r / N_Q, gathered through a tile of pointers.
  Value offs_r = (row0 + arange(0, BM)).named("offs_r"); // (BM,) i32
  Value q_idx = (offs_r % a.N_Q).named("q_idx");         // (BM,) query index i
  Value head = hkv * group + offs_r / a.N_Q;             // (BM,) query head
  Value offs_d = arange(0, HD);                          // (HD,)
  Value q_rows = b64 * a.stride_qb + q_idx.to(i64) * a.stride_qn + head.to(i64) * a.stride_qh; // (BM,) i64
  Value q_mask = (offs_r < head_rows).expand_dims(1) && (offs_d < a.D).expand_dims(0);         // (BM, HD)
  Value q_offs = q_rows.expand_dims(1) + offs_d.expand_dims(0);                                // (BM, HD) i64
  if (tp.even_d) // rows of HEAD_DIM consecutive elements: vector loads (the analysis cannot see through % and
                 // /)
    q_offs = max_contiguous(q_offs, HD);
  Value q = load(a.q + q_offs, q_mask, 0.0).named("q"); // (BM, HD), zero past the packed rows (and D)

  // This split's keys [lo, hi): a whole number of tiles, so only the sequence's last tile meets its tail.
  // Keys below `mid` are seen by every packed row (no mask); the tiles from mid on cross n_k or the diagonal.
  Value split_keys = (cdiv(cdiv(n_k, BN), a.NUM_SPLITS) * BN).named("split_keys");
  Value lo = (split * split_keys).named("lo");
  Value hi = minimum(n_k, lo + split_keys).named("hi"); // below lo for a split past the sequence's end: empty
  Value seen_by_all = causal ? maximum(n_k - a.N_Q + 1, 0) : n_k; // query 0 sees keys j <= n_k - N_Q
  Value mid = minimum(maximum(seen_by_all / BN * BN, lo), hi).named("mid");

  Value qk_scale = a.sm_scale * kLog2e;                 // exp(x·s) = exp2(x·s·log2 e)
  Value m_i = full({BM}, -kInfinity, f32).named("m_i"); // running row max, log2 domain
  Value l_i = zeros({BM}, f32).named("l_i");            // running row sum of p
  Value acc = zeros({BM, HD}, f32).named("acc");        // (BM, HD) unnormalised output

  // The rows of tile start_n: contiguous caches step block pointers carried through the loops (which the code
  // generator pipelines); paged ones look the tile's page up in the block table, one i32 a tile.
  Value k_seq, v_seq;
  if (!paged) {
    KeyRows seq{a.k + (b64 * a.stride_kb + hkv64 * a.stride_kh),
                a.v + (b64 * a.stride_vb + hkv64 * a.stride_vh), n_k, lo};
    k_seq = k_tile_ptr(a, tp, seq).named("k_ptr");
    v_seq = v_tile_ptr(a, tp, seq).named("v_ptr");
  }
  auto page_rows = [&](const Value& start_n) {
    Value slot = start_n / a.PAGE_SIZE; // the tile's page in the sequence
    Value page = load(a.block_table + (b64 * a.stride_bt + slot.to(i64))).to(i64).named("page");
    Value page_start = slot * a.PAGE_SIZE;
    return KeyRows{a.k + (page * a.stride_kb + hkv64 * a.stride_kh),
                   a.v + (page * a.stride_vb + hkv64 * a.stride_vh), minimum(a.PAGE_SIZE, n_k - page_start),
                   start_n - page_start};
  };

  // One K/V tile: Q Kᵀ, the online-softmax update, acc += P V, as FA2's forward (fa2_fwd.cpp) does it.
  auto attend = [&](const Value& start_n, bool masked) {
    KeyRows rows = paged ? page_rows(start_n) : KeyRows{};
    Value k = load(paged ? k_tile_ptr(a, tp, rows) : k_seq, tp.k_tile_check(masked));
    Value kt = tp.k_transposed ? k : trans(k);           // (HD, BN)
    Value qk = dot(q, kt, Value(), tp.tf32).named("qk"); // (BM, BN) f32
    if (masked) {
      Value offs_n = (start_n + arange(0, BN)).expand_dims(0); // (1, BN)
      Value visible = broadcast_to(offs_n < n_k, {BM, BN});
      if (causal)
        visible = visible && (offs_n <= (q_idx + (n_k - a.N_Q)).expand_dims(1));
      qk = where(visible, qk, -kInfinity);
    }
    Value p = online_softmax_step(qk, qk_scale, m_i, l_i, acc);                       // (BM, BN) f32
    Value v = load(paged ? v_tile_ptr(a, tp, rows) : v_seq, tp.v_tile_check(masked)); // (BN, HD)
    acc = dot(tp.dtype == f32 ? p : p.to(tp.dtype), v, acc, tp.tf32);
    if (!paged) {
      k_seq = advance_k(k_seq, tp);
      v_seq = advance(v_seq, {BN, 0});
    }
  };
  for_range(lo, mid, BN, [&](Value start_n) { attend(start_n, false); });
  for_range(mid, hi, BN, [&](Value start_n) { attend(start_n, true); });

  // The split's O_s = acc / l (0 for a row that saw no key) and LSE_s = m + log2 l (−inf then), rows in
  // (b, h, i) order: this kv head's G·N_Q rows start at off_bk · G · N_Q.
  Value seen =
      l_i != 0.0; // NaN (a NaN or +inf score) counts as seen, so that it reaches O (docs/guarantees.md)
  Value l_safe = where(seen, l_i, 1.0);
  Value out = acc * (1.0 / l_safe).expand_dims(1); // (BM, HD) f32
  Value total_rows = (a.B * a.H * a.N_Q).to(i64);
  Value head_row0 = off_bk.to(i64) * head_rows.to(i64);
  Value split64 = split.to(i64);
  Value o_split = a.o_part + (split64 * total_rows + head_row0) * a.D.to(i64);
  Value o_ptr = make_block_ptr(o_split, {head_rows, a.D}, {a.D.to(i64), 1}, {row0, 0}, {BM, HD}, {1, 0});
  store(o_ptr, out, tp.row_tile_check());
  Value lse = where(seen, m_i + log2(l_safe), -kInfinity); // (BM,) log2 domain
  store(a.lse_part + (split64 * total_rows + head_row0 + offs_r.to(i64)), lse, offs_r < head_rows);
  return kb.finish();
}

namespace {

KernelDef make_decode_split_def() {
  KernelDef d;
  d.name = "decode_split";
  d.summary =
      "split-KV decoding, first kernel: each (split, kv head) program writes its keys' softmax output and "
      "LSE for the packed query rows of that kv head";
  d.params = attention_param_defs();
  for (ParamDef& p : d.params) { // decoding's tiles: few packed rows, a head dim of 128
    if (p.name == "BLOCK_M")
      p.default_value = 16;
    if (p.name == "HEAD_DIM")
      p.default_value = 128;
    if (p.name == "CAUSAL")
      p.default_value = 2;
  }
  d.params.push_back(ParamDef::flag(
      "PAGED", 0, "1: K/V are pages [num_pages, PAGE_SIZE, H_KV, D] found through BLOCK_TABLE"));
  d.params.push_back(ParamDef::flag("SEQLENS_K", 0, "1: sequence b has SEQLENS_K[b] keys (else N_K)"));
  d.default_num_warps = 4;
  d.default_num_stages = 2;
  d.build = build_decode_split;
  // Memory-bound: the space varies the key tile and the copies in flight, up to 128 KiB of K/V ring at
  // HEAD_DIM = 128 (sm_80's 163 KiB a block holds it; 128-key tiles take 2 stages). BLOCK_M is the problem's
  // (G·N_Q rounded up to a power of two), so it is not varied.
  d.config_space = [] {
    std::vector<Config> cs;
    for (int64_t bn : {16, 32, 64, 128}) // 16: pages of 16 keys
      for (int warps : {4, 8})
        for (int stages : {2, 3, 4}) {
          if (bn * stages > 256)
            continue;
          Config c = decode_split_def().default_config();
          c.set("BLOCK_N", bn);
          c.num_warps = warps;
          c.num_stages = stages;
          cs.push_back(c);
        }
    return cs;
  };
  d.size_args = {"B", "H", "H_KV", "N_Q", "N_K", "D", "PAGE_SIZE", "NUM_SPLITS"};
  d.tuning_key = {"B", "H_KV", "N_Q", "N_K", "NUM_SPLITS"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  // A key tile must lie inside one page, and wider than the (padded) keys only computes padding.
  d.prune = [](const Config& c, const SizeArgs& s) -> std::string {
    if (c.get("PAGED") != 0 && c.get("BLOCK_N") > s.at("PAGE_SIZE"))
      return fmt::format("BLOCK_N={} is wider than a page of {} keys", c.get("BLOCK_N"), s.at("PAGE_SIZE"));
    if (c.get("BLOCK_N") > std::max<int64_t>(32, next_pow2(s.at("N_K"))))
      return fmt::format("BLOCK_N={} is wider than the {} keys (N_K={})", c.get("BLOCK_N"),
                         next_pow2(s.at("N_K")), s.at("N_K"));
    return "";
  };
  d.grid = [](const Config& c, const SizeArgs& s) {
    const int64_t rows = s.at("H") / s.at("H_KV") * s.at("N_Q"), bm = c.get("BLOCK_M");
    return Grid{s.at("NUM_SPLITS"), s.at("B") * s.at("H_KV"), (rows + bm - 1) / bm};
  };
  return d;
}

} // namespace

const KernelDef& decode_split_def() {
  static const KernelDef def = make_decode_split_def();
  return def;
}

} // namespace kiln
