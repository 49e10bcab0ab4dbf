// FA2's online-softmax step, shared by the forward (fa2_fwd.cpp) and split-KV decoding (decode_split.cpp):
// one tile of scores folded into the running max, row sum and output accumulator.
#pragma once

#include "dsl/builder.h"

#include <span>

namespace kiln {

// For scores qk (BM, BN) f32 (−inf where a key is hidden) times qk_scale (to the log2 domain): the new
// running max m_ij = max(m_i, rowmax(qk) · qk_scale), the row sum l_i and the accumulator acc (BM, HD)
// rescaled by exp2(m_i − m_ij), and m_i set to m_ij. With one accumulator tile per head-dim piece (SPLIT_D),
// each is rescaled. Returns P = exp2(qk · qk_scale − m_ij) (BM, BN) f32,
// which the caller multiplies by V into acc. A row that has seen no key yet (m_ij = −inf) subtracts 0
// instead, since exp2(−inf − −inf) would be NaN (docs/guarantees.md: scores of −inf count as masked keys).
// With `lazy_rescale` (LAZY_RESCALE=1) the max moves only when the tile's exceeds it by more than
// kLazyRescaleSlack (log2 units; FlashAttention-4's conditional rescale): P is then at most 2^8, O and l are
// consistent with the max kept, and alpha is exactly 1 in every step where the max stays, which the code generator skips
// (codegen/plan_rescale_skips.h).
Value online_softmax_step(const Value& qk, const Value& qk_scale, Value& m_i, Value& l_i, std::span<Value> acc,
                          bool lazy_rescale = false);
inline Value online_softmax_step(const Value& qk, const Value& qk_scale, Value& m_i, Value& l_i, Value& acc,
                                 bool lazy_rescale = false) {
  return online_softmax_step(qk, qk_scale, m_i, l_i, std::span<Value>(&acc, 1), lazy_rescale);
}
// How far (log2 units) a row's max may pass the running max before LAZY_RESCALE moves it: P ≤ 2^8 = 256, well
// inside f16 and bf16.
inline constexpr double kLazyRescaleSlack = 8.0;

} // namespace kiln
