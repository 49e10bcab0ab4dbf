#include "kernels/attention/attention_value_selection.h"

#include "dsl/dsl.h"

namespace kiln {

namespace {

// acc + P·V key by key, selecting: the slow path of a masked tile whose V is not all finite.
Value accumulate_selected_keys(const AttentionArgs& a, const AttentionHeadBases& b,
                               const AttentionTileParams& tp, const Value& offs_m, const Value& start_n,
                               const Value& p, const Value& acc) {
  Value out = acc;
  Value tile_keys = arange(0, tp.block_n); // (BN,) i32
  for_range(start_n, minimum(start_n + tp.block_n, a.N_K), 1, [&](Value key) {
    // The key's probabilities (BM,), a row of P's: a row reduction, as the softmax's.
    Value p_key = sum(where((tile_keys == key - start_n).expand_dims(0), p, 0.0), 1);
    // Its values (HD,), read as a vector that broadcasts along the rows of acc.
    Value v_row = make_block_ptr(b.v + key.to(i64) * a.stride_vn, {a.D}, {1}, {0}, {tp.head_dim}, {0});
    Value v_key = load(v_row, tp.even_d ? BoundaryCheck{} : BoundaryCheck{0}).to(f32); // (HD,) f32
    Value finite = (abs(v_key) < kInfinity).expand_dims(0); // (1, HD) i1; NaN fails
    // A NaN or ±inf reaches the rows that see the key, as itself, and no other row (keys past N_K are not
    // visited; without causal masking every row sees the others).
    Value nonfinite_part = v_key.expand_dims(0); // (1, HD)
    if (tp.causal != CausalMode::None)
      nonfinite_part =
          where(last_visible_key(a, tp, offs_m.expand_dims(1)) >= key, nonfinite_part, 0.0); // (BM, HD)
    out = out + where(finite, p_key.expand_dims(1) * v_key.expand_dims(0), nonfinite_part);  // (BM, HD) f32
  });
  return out;
}

} // namespace

Value load_values_to_check(const Value& v_ptr, const AttentionTileParams& tp) {
  return load(v_ptr, tp.v_tile_check(true)).named("v_check"); // (BN, HD), zero past N_K
}

Value values_are_finite(const Value& v_copy) {
  Value nonfinite = where(abs(v_copy) < kInfinity, 0.0f, 1.0f); // (BN, HD) f32; NaN fails the comparison
  return (max(max(nonfinite, 1), 0) == 0.0f).named("v_finite");
}

Value accumulate_masked_values(const AttentionArgs& a, const AttentionHeadBases& b,
                               const AttentionTileParams& tp, const Value& offs_m, const Value& start_n,
                               const Value& p, const Value& v, const Value& v_finite, const Value& acc) {
  Value out = acc;
  if_(
      v_finite, [&] { out = dot(tp.dtype == f32 ? p : p.to(tp.dtype), v, acc, tp.tf32); },
      [&] { out = accumulate_selected_keys(a, b, tp, offs_m, start_n, p, acc); });
  return out;
}

} // namespace kiln
