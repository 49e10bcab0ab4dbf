#include "kernels/attention/attention_tiles.h"

#include "dsl/dsl.h"
#include "dsl/registry.h"
#include "kernels/dtype_param.h"

#include <algorithm>

namespace kiln {

AttentionTileParams attention_tile_params(const Config& config, const char* kernel) {
  check_param_values(kernel, attention_param_defs(), config);
  AttentionTileParams tp;
  tp.block_m = config.get("BLOCK_M");
  tp.block_n = config.get("BLOCK_N");
  tp.head_dim = config.get("HEAD_DIM");
  tp.even_d = config.get("EVEN_D") != 0;
  tp.split_d = config.get_or("SPLIT_D", 0) != 0;
  int64_t causal = config.get("CAUSAL");
  tp.k_transposed = config.get("K_TRANSPOSED") != 0;
  tp.dtype = dtype_from_param(config.get("DTYPE"), kernel);
  tp.tf32 = config.get("TF32") != 0;
  tp.exact_masked_v = config.get("EXACT_MASKED_V") != 0;
  tp.causal = static_cast<CausalMode>(causal);
  if (tp.split_d && tp.head_dim < 64)
    fail("{}: SPLIT_D=1 covers the head dim with tiles HEAD_DIM/2 and HEAD_DIM/4 wide, at least 16 each, so it "
         "needs HEAD_DIM >= 64, but HEAD_DIM is {}",
         kernel, tp.head_dim);
  if (tp.tf32 && tp.dtype != DType::f32)
    fail("{}: TF32=1 applies to f32 inputs (DTYPE=2), but DTYPE is {}", kernel, dtype_name(tp.dtype));
  return tp;
}

std::vector<ParamDef> attention_param_defs() {
  // Tiles are at least 16 wide (tensor-core tiles) and at most 256: the widest head dim the kernels support,
  // and the most query rows or keys a program's registers and shared memory can hold.
  return {ParamDef::power_of_two("BLOCK_M", 128, "query rows per tile", 16, 256),
          ParamDef::power_of_two("BLOCK_N", 64, "keys per K/V tile", 16, 256),
          ParamDef::power_of_two("HEAD_DIM", 64, "tile width along the head dim: a power of two >= D", 16, 256),
          ParamDef::flag("EVEN_D", 1, "1 when D == HEAD_DIM (no boundary check along D)"),
          ParamDef::choice("CAUSAL", 0,
                           "0 none, 1 top-left (PyTorch is_causal), 2 bottom-right (FlashAttention >= 2.1)", 0, 2),
          ParamDef::flag("K_TRANSPOSED", 1,
                         "1 reads K^T through a block pointer with order (0, 1); 0 transposes K tiles on chip"),
          ParamDef::choice("DTYPE", 0, "element type of Q, K, V, O: 0 f16, 1 bf16, 2 f32", 0, 2),
          ParamDef::flag("TF32", 0, "f32 only: 1 multiplies in tf32 on tensor cores"),
          ParamDef::flag("EXACT_MASKED_V", 0,
                         "1 selects the keys a row does not see out of masked tiles' P V, so that a NaN or inf in "
                         "their V cannot reach it (each masked V tile is checked; slower, docs/guarantees.md)")};
}

std::vector<HeadDimPiece> AttentionTileParams::head_dim_pieces() const {
  if (!split_d)
    return {whole_head_dim()};
  return {{0, head_dim / 2, !even_d}, {head_dim / 2, head_dim / 4, !even_d}};
}

int64_t head_dim_columns(int64_t head_dim, bool split_d) { return split_d ? head_dim / 2 + head_dim / 4 : head_dim; }

std::string head_dim_piece_name(const char* base, size_t i, size_t n) {
  return n == 1 ? std::string(base) : fmt::format("{}_d{}", base, i);
}

ParamDef split_d_param() {
  return ParamDef::flag(
      "SPLIT_D", 0,
      "1 covers the head dim with two tiles, HEAD_DIM/2 and HEAD_DIM/4 wide (HEAD_DIM >= 64), instead of one "
      "HEAD_DIM wide: for HEAD_DIM/2 < D <= 3/4 HEAD_DIM (D = 96, 192), a quarter fewer products; set from D");
}

BoundaryCheck AttentionTileParams::row_tile_check(const HeadDimPiece& piece) const {
  return piece.checked ? BoundaryCheck{0, 1} : BoundaryCheck{0};
}

BoundaryCheck AttentionTileParams::k_tile_check(bool masked, const HeadDimPiece& piece) const {
  // Kᵀ tiles are (HEAD_DIM, BLOCK_N): keys along dim 1; K tiles (BLOCK_N, HEAD_DIM): keys along dim 0.
  int key_dim = k_transposed ? 1 : 0, d_dim = 1 - key_dim;
  BoundaryCheck c;
  if (masked)
    c.dims.push_back(key_dim);
  if (piece.checked)
    c.dims.push_back(d_dim);
  return c;
}

BoundaryCheck AttentionTileParams::v_tile_check(bool masked, const HeadDimPiece& piece) const {
  BoundaryCheck c;
  if (masked)
    c.dims.push_back(0);
  if (piece.checked)
    c.dims.push_back(1);
  return c;
}

AttentionArgs declare_attention_args(KernelBuilder& kb, DType dt, bool packed) {
  AttentionArgs a;
  a.q = kb.arg_ptr("Q", dt);
  a.k = kb.arg_ptr("K", dt);
  a.v = kb.arg_ptr("V", dt);
  a.o = kb.arg_ptr("O", dt);
  a.lse = kb.arg_ptr("LSE", f32);
  a.sm_scale = kb.arg("sm_scale", f32);
  a.B = kb.arg("B", i32);
  a.H = kb.arg("H", i32);
  a.H_KV = kb.arg("H_KV", i32);
  a.N_Q = kb.arg(packed ? "TOTAL_Q" : "N_Q", i32);
  a.N_K = kb.arg(packed ? "TOTAL_K" : "N_K", i32);
  a.D = kb.arg("D", i32);
  for (auto [v, name] : {std::pair{&a.stride_qb, "stride_qb"}, {&a.stride_qh, "stride_qh"},
                         {&a.stride_qn, "stride_qn"}, {&a.stride_kb, "stride_kb"}, {&a.stride_kh, "stride_kh"},
                         {&a.stride_kn, "stride_kn"}, {&a.stride_vb, "stride_vb"}, {&a.stride_vh, "stride_vh"},
                         {&a.stride_vn, "stride_vn"}, {&a.stride_ob, "stride_ob"}, {&a.stride_oh, "stride_oh"},
                         {&a.stride_on, "stride_on"}})
    *v = kb.arg(name, i64);
  return a;
}

AttentionHeadBases attention_head_bases(const AttentionArgs& a, const Value& off_hz) {
  Value off_b = (off_hz / a.H).to(i64);
  Value off_h = off_hz % a.H;
  Value off_hkv = (off_h / (a.H / a.H_KV)).to(i64); // GQA/MQA: H / H_KV query heads share one kv head
  Value off_h64 = off_h.to(i64);
  AttentionHeadBases b;
  b.q = (a.q + (off_b * a.stride_qb + off_h64 * a.stride_qh)).named("q_base");
  b.k = (a.k + (off_b * a.stride_kb + off_hkv * a.stride_kh)).named("k_base");
  b.v = (a.v + (off_b * a.stride_vb + off_hkv * a.stride_vh)).named("v_base");
  b.o = (a.o + (off_b * a.stride_ob + off_h64 * a.stride_oh)).named("o_base");
  b.lse_row0 = (off_hz.to(i64) * a.N_Q).named("lse_row0");
  return b;
}

Value q_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset) {
  return q_block_ptr(a, b, tp, offset, tp.whole_head_dim());
}

Value q_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset, const HeadDimPiece& piece) {
  return make_block_ptr(b.q, {a.N_Q, a.D}, {a.stride_qn, 1}, {offset, piece.start}, {tp.block_m, piece.width},
                        {1, 0})
      .named("q_ptr");
}

Value o_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset, const HeadDimPiece& piece) {
  return make_block_ptr(b.o, {a.N_Q, a.D}, {a.stride_on, 1}, {offset, piece.start}, {tp.block_m, piece.width},
                        {1, 0})
      .named("o_ptr");
}

Value k_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset) {
  return k_block_ptr(a, b, tp, offset, tp.whole_head_dim());
}

Value k_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset, const HeadDimPiece& piece) {
  if (tp.k_transposed) // Kᵀ: (D, N_K) with the head dim contiguous, so order (0, 1)
    return make_block_ptr(b.k, {a.D, a.N_K}, {1, a.stride_kn}, {piece.start, offset}, {piece.width, tp.block_n},
                          {0, 1});
  return make_block_ptr(b.k, {a.N_K, a.D}, {a.stride_kn, 1}, {offset, piece.start}, {tp.block_n, piece.width},
                        {1, 0});
}

Value v_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset) {
  return v_block_ptr(a, b, tp, offset, tp.whole_head_dim());
}

Value v_block_ptr(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                  const Operand& offset, const HeadDimPiece& piece) {
  return make_block_ptr(b.v, {a.N_K, a.D}, {a.stride_vn, 1}, {offset, piece.start}, {tp.block_n, piece.width},
                        {1, 0});
}

Value advance_k(const Value& k_ptr, const AttentionTileParams& tp) {
  return tp.k_transposed ? advance(k_ptr, {0, tp.block_n}) : advance(k_ptr, {tp.block_n, 0});
}

KeyTilePtrs key_tile_ptrs(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                          const Operand& offset) {
  const std::vector<HeadDimPiece> pieces = tp.head_dim_pieces();
  KeyTilePtrs ptrs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    ptrs.k.push_back(k_block_ptr(a, b, tp, offset, pieces[i]).named(head_dim_piece_name("k_ptr", i, pieces.size())));
    ptrs.v.push_back(v_block_ptr(a, b, tp, offset, pieces[i]).named(head_dim_piece_name("v_ptr", i, pieces.size())));
  }
  return ptrs;
}

void advance_keys(KeyTilePtrs& ptrs, const AttentionTileParams& tp, const Operand& keys) {
  for (Value& k : ptrs.k)
    k = tp.k_transposed ? advance(k, {0, keys}) : advance(k, {keys, 0});
  for (Value& v : ptrs.v)
    v = advance(v, {keys, 0});
}

Value last_visible_key(const AttentionArgs& a, const AttentionTileParams& tp, const Value& row) {
  if (tp.causal == CausalMode::BottomRight)
    return row + (a.N_K - a.N_Q);
  return row;
}

Value visible_keys_end(const AttentionArgs& a, const AttentionTileParams& tp, const Value& row) {
  return minimum(a.N_K, last_visible_key(a, tp, row) + 1);
}

Value visible_keys(const AttentionArgs& a, const AttentionTileParams& tp, const Value& offs_m, const Value& offs_n) {
  Value cols = offs_n.expand_dims(0); // (1, BN)
  if (tp.causal == CausalMode::None)
    return broadcast_to(cols < a.N_K, {tp.block_m, tp.block_n});
  // Key j is seen by row i iff j < N_K and j <= last_visible_key(i): one bound a row and one comparison an
  // element, where the two rules took two and an and.
  return cols < visible_keys_end(a, tp, offs_m).expand_dims(1); // (BM, BN)
}

KeyRange key_range(const AttentionArgs& a, const AttentionTileParams& tp, const Value& m0) {
  const int64_t BM = tp.block_m, BN = tp.block_n;
  Value full_tiles_end = a.N_K / BN * BN; // keys in whole tiles
  if (tp.causal == CausalMode::None)
    return KeyRange{full_tiles_end, a.N_K};
  // Row m0 (the tile's first) sees keys j <= last_visible_key(m0): whole tiles up to there need no mask.
  Value seen_by_first_row = maximum(last_visible_key(a, tp, m0) + 1, 0);
  Value unmasked_end = minimum(seen_by_first_row / BN * BN, full_tiles_end);
  // The tile's last row, m0 + BM - 1, bounds the keys visited.
  Value end = maximum(visible_keys_end(a, tp, m0 + (BM - 1)), unmasked_end);
  return KeyRange{unmasked_end.named("unmasked_end"), end.named("keys_end")};
}

void store_attention_rows(const AttentionArgs& a, const AttentionHeadBases& b, const AttentionTileParams& tp,
                          const Value& m0, const Value& offs_m, std::span<const Value> acc, const Value& l,
                          const Value& m) {
  // (BM,) rows that saw at least one key. A row whose scores held NaN or +inf has l = NaN: it counts as seen, so
  // that its O and LSE are NaN (docs/guarantees.md), not the O = 0, LSE = -inf of a row that sees no key.
  Value seen = l != 0.0;
  Value l_safe = where(seen, l, 1.0); // rows that saw none keep acc = 0 and so O = 0
  Value inv_l = (1.0 / l_safe).named("inv_l"); // one division a row, then a multiply an element
  const std::vector<HeadDimPiece> pieces = tp.head_dim_pieces();
  if (acc.size() != pieces.size())
    fail("store_attention_rows: {} accumulator tiles for {} head-dim pieces", acc.size(), pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    Value out = acc[i] * inv_l.expand_dims(1); // (BM, piece width) f32
    store(o_block_ptr(a, b, tp, m0, pieces[i]), out.to(tp.dtype), tp.row_tile_check(pieces[i]));
  }
  Value lse = where(seen, (m + log2(l_safe)) * kLn2, -kInfinity); // natural-log logsumexp
  store(a.lse + b.lse_row0 + offs_m, lse, offs_m < a.N_Q);
}

Grid tiles_by_heads_grid(const Config& c, int64_t tiles, int64_t heads) {
  if (c.get_or("PERSISTENT", 0) != 0)
    return Grid{tiles * heads, 1, 1};
  return Grid{tiles, heads, 1};
}

Grid query_tile_grid(const Config& c, const SizeArgs& s) {
  const int64_t bm = c.get("BLOCK_M");
  return tiles_by_heads_grid(c, (s.at("N_Q") + bm - 1) / bm, s.at("B") * s.at("H"));
}

std::string prune_tiles_past_sequence(const Config& c, const SizeArgs& s, int64_t min_rows, int64_t min_keys) {
  const int64_t rows = std::max(min_rows, next_pow2(s.at("N_Q")));
  const int64_t keys = std::max(min_keys, next_pow2(s.at("N_K")));
  if (c.get("BLOCK_M") > rows)
    return fmt::format("BLOCK_M={} is wider than the {} query rows it needs (N_Q={})", c.get("BLOCK_M"), rows,
                       s.at("N_Q"));
  if (c.get("BLOCK_N") > keys)
    return fmt::format("BLOCK_N={} is wider than the {} keys it needs (N_K={})", c.get("BLOCK_N"), keys,
                       s.at("N_K"));
  return "";
}

} // namespace kiln
