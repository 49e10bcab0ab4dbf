#include "kernels/attention/attention_mod_library.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_problem.h"

#include <cmath>

namespace kiln {

namespace {

void check_extent(const char* mod, const char* what, int64_t v) {
  if (v < 0 || v >= kMaxAttentionSize)
    fail("{}: {} is {}; expected a number of keys from 0 to {}", mod, what, v, kMaxAttentionSize - 1);
}

// A literal the DSL's i32 index tiles take without widening (check_extent bounds it).
int i32_literal(int64_t v) { return static_cast<int>(v); }

std::string number(double v) { return fmt::format("{}", v); }

} // namespace

MaskMod causal_mask(bool bottom_right) {
  MaskMod m;
  m.name = bottom_right ? "causal_bottom_right" : "causal_top_left";
  m.later_rows_see_more = true;
  if (bottom_right) {
    m.fn = {kDeterminedByName, [](const ModArgs& a) { return a.kv_idx <= a.q_idx + (a.N_K - a.N_Q); }};
    m.reference = [](const ModPoint& p) { return p.kv_idx <= p.q_idx + p.N_K - p.N_Q; };
    m.key_bounds = {kDeterminedByName, [](const ModArgs& a, const Value& q_first, const Value& q_last) {
                      return KeyBounds{scalar(0, i32), q_last + (a.N_K - a.N_Q) + 1, scalar(0, i32),
                                       q_first + (a.N_K - a.N_Q) + 1};
                    }};
  } else {
    m.fn = {kDeterminedByName, [](const ModArgs& a) { return a.kv_idx <= a.q_idx; }};
    m.reference = [](const ModPoint& p) { return p.kv_idx <= p.q_idx; };
    m.key_bounds = {kDeterminedByName, [](const ModArgs&, const Value& q_first, const Value& q_last) {
                      return KeyBounds{scalar(0, i32), q_last + 1, scalar(0, i32), q_first + 1};
                    }};
  }
  return m;
}

MaskMod sliding_window(int64_t left, int64_t right) {
  check_extent("sliding_window", "left", left);
  check_extent("sliding_window", "right", right);
  const int l = i32_literal(left), r = i32_literal(right);
  MaskMod m;
  m.name = fmt::format("sliding_window({},{})", left, right);
  m.later_rows_see_more = right == 0; // open to the right, the last rows see fewer keys as the first do
  m.fn = {kDeterminedByName,
          [l, r](const ModArgs& a) { return (a.kv_idx >= a.q_idx - l) && (a.kv_idx <= a.q_idx + r); }};
  m.reference = [left, right](const ModPoint& p) {
    return p.kv_idx >= p.q_idx - left && p.kv_idx <= p.q_idx + right;
  };
  m.key_bounds = {kDeterminedByName, [l, r](const ModArgs&, const Value& q_first, const Value& q_last) {
                    return KeyBounds{q_first - l, q_last + (r + 1), q_last - l, q_first + (r + 1)};
                  }};
  return m;
}

MaskMod prefix_lm(int64_t prefix) {
  check_extent("prefix_lm", "prefix", prefix);
  const int n = i32_literal(prefix);
  MaskMod m;
  m.name = fmt::format("prefix_lm({})", prefix);
  m.later_rows_see_more = true;
  m.fn = {kDeterminedByName, [n](const ModArgs& a) { return (a.kv_idx < n) || (a.kv_idx <= a.q_idx); }};
  m.reference = [prefix](const ModPoint& p) { return p.kv_idx < prefix || p.kv_idx <= p.q_idx; };
  m.key_bounds = {kDeterminedByName, [n](const ModArgs&, const Value& q_first, const Value& q_last) {
                    return KeyBounds{scalar(0, i32), maximum(q_last + 1, n), scalar(0, i32), maximum(q_first + 1, n)};
                  }};
  return m;
}

MaskMod document_mask() {
  MaskMod m;
  m.name = "document";
  m.tensors = {{"q_doc", DType::i32, {"B", "N_Q"}}, {"kv_doc", DType::i32, {"B", "N_K"}}};
  m.fn = {kDeterminedByName, [](const ModArgs& a) {
            return a.load("q_doc", {a.b, a.q_idx}) == a.load("kv_doc", {a.b, a.kv_idx});
          }};
  m.reference = [](const ModPoint& p) {
    return p.at("q_doc", {p.b, p.q_idx}) == p.at("kv_doc", {p.b, p.kv_idx});
  };
  return m;
}

ScoreMod alibi() {
  ScoreMod m;
  m.name = "alibi";
  m.tensors = {{"alibi_slopes", DType::f32, {"H"}}};
  m.fn = {kDeterminedByName, [](const Value& s, const ModArgs& a) {
            return s + a.load("alibi_slopes", {a.h}) * (a.kv_idx - a.q_idx).to(f32);
          }};
  m.reference = [](double s, const ModPoint& p) {
    return s + p.at("alibi_slopes", {p.h}) * static_cast<double>(p.kv_idx - p.q_idx);
  };
  return m;
}

ScoreMod softcap(double cap) {
  if (!std::isfinite(cap) || cap <= 0)
    fail("softcap: cap is {}; expected a finite number above 0", cap);
  ScoreMod m;
  m.name = "softcap(" + number(cap) + ")";
  m.fn = {kDeterminedByName, [cap](const Value& s, const ModArgs&) { return cap * tanh(s * (1.0 / cap)); }};
  m.reference = [cap](double s, const ModPoint&) { return cap * std::tanh(s / cap); };
  return m;
}

ScoreMod additive_bias(DType dtype) {
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16)
    fail("additive_bias: dtype {}; expected f32, f16 or bf16", dtype_name(dtype));
  ScoreMod m;
  m.name = fmt::format("bias({})", dtype_name(dtype));
  m.tensors = {{"bias", dtype, {"B", "H", "N_Q", "N_K"}}};
  m.fn = {kDeterminedByName, [](const Value& s, const ModArgs& a) {
            return s + a.load("bias", {a.b, a.h, a.q_idx, a.kv_idx}).to(f32);
          }};
  m.reference = [](double s, const ModPoint& p) { return s + p.at("bias", {p.b, p.h, p.q_idx, p.kv_idx}); };
  return m;
}

SinkMod attention_sinks() {
  SinkMod m;
  m.name = "sinks";
  m.tensors = {{"sinks", DType::f32, {"H"}}};
  m.fn = {kDeterminedByName, [](const ModArgs& a) { return a.load("sinks", {a.h}); }};
  m.reference = [](const ModPoint& p) { return p.at("sinks", {p.h}); };
  m.per_head = true; // the backward's dsink can be the [H] gradient of "sinks"
  return m;
}

std::vector<double> standard_alibi_slopes(int64_t heads) {
  std::vector<double> s;
  for (int64_t h = 0; h < heads; ++h)
    s.push_back(std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(heads)));
  return s;
}

} // namespace kiln
