#include "kernels/attention/attention_online_softmax.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_tiles.h"

namespace kiln {

Value online_softmax_step(const Value& qk, const Value& qk_scale, Value& m_i, Value& l_i, std::span<Value> acc,
                          bool lazy_rescale) {
  Value m_ij = maximum(m_i, max(qk, 1) * qk_scale);
  if (lazy_rescale) // −inf + slack is −inf: a row's first finite max is always taken
    m_ij = where(m_ij > m_i + kLazyRescaleSlack, m_ij, m_i);
  Value m_shift = where(m_ij == -kInfinity, 0.0, m_ij);              // what the exponents subtract
  Value p = exp2(qk * qk_scale - m_shift.expand_dims(1)).named("p"); // (BM, BN) f32
  Value alpha = exp2(m_i - m_shift).named("alpha");                  // (BM,) rescale of the old state
  l_i = l_i * alpha + sum(p, 1);
  Value alpha_rows = alpha.expand_dims(1);
  for (Value& tile : acc)
    tile = tile * alpha_rows;
  m_i = m_ij;
  return p;
}

} // namespace kiln
