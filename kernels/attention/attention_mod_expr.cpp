#include "kernels/attention/attention_mod_expr.h"

#include "dsl/dsl.h"
#include "kernels/attention/attention_mod_expr_parse.h"
#include "support/error.h"

#include <cmath>
#include <memory>
#include <optional>

namespace kiln {

namespace {

using mod_expr::Node;

// ---- The DSL ops an expression builds --------------------------------------------------------------------

// A value while building: a DSL value, or a literal folded on the host.
struct Built {
  Value v;
  double literal = 0;
  bool is_literal = false, integer = false, boolean = false;
};

class Builder {
public:
  Builder(const mod_expr::Parsed& parsed, const std::string& text, const char* kind, const ModArgs& m,
          const Value* score)
      : parsed_(parsed), text_(text), kind_(kind), m_(m), score_(score) {}

  Built build(const Node& n) {
    switch (n.kind) {
    case Node::Kind::Number:
      return literal(n.number, n.integer);
    case Node::Kind::Name:
      return name(n.text);
    case Node::Kind::Tensor: {
      std::vector<Value> index;
      for (const Node& i : n.kids)
        index.push_back(name(i.text).v);
      std::vector<Operand> ops(index.begin(), index.end());
      Value x = m_.load(mod_expr::read_spec_name(parsed_.tensors, n), ops);
      if (n.dtype == DType::f16 || n.dtype == DType::bf16)
        x = x.to(f32); // arithmetic runs in f32, as the scores
      return value(x);
    }
    case Node::Kind::Unary: {
      Built a = build(n.kids[0]);
      if (n.text == "!") {
        need_bool(a, "!");
        return a.is_literal ? boolean(a.literal == 0) : value(!a.v);
      }
      need_number(a, "-");
      if (a.is_literal)
        return literal(-a.literal, a.integer);
      return value(-a.v);
    }
    case Node::Kind::Binary: {
      // In the order written (a call's arguments would be built in any order): the ops follow the text.
      const Built a = build(n.kids[0]);
      const Built b = build(n.kids[1]);
      return binary(n.text, a, b);
    }
    case Node::Kind::Call:
      return call(n);
    }
    return {};
  }

  // `b` as a DSL value of a score or mask mod's result.
  Value result(Built b, bool want_bool) {
    if (want_bool) {
      if (!b.boolean)
        fail("mask mod expression '{}': it is a number; expected a condition (a comparison, &&, ||, !)",
             text_);
      return b.is_literal ? scalar(b.literal != 0 ? 1.0 : 0.0, i1) : b.v;
    }
    need_number(b, "a score mod's result");
    if (b.is_literal)
      return scalar(b.literal, f32);
    return b.integer ? b.v.to(f32) : b.v;
  }

private:
  static Built literal(double v, bool integer) {
    Built b;
    b.literal = v, b.is_literal = true, b.integer = integer;
    return b;
  }
  static Built boolean(bool v) {
    Built b = literal(v ? 1 : 0, true);
    b.boolean = true;
    return b;
  }
  static Built value(const Value& v) {
    Built b;
    b.v = v;
    b.boolean = v.dtype() == DType::i1;
    b.integer = !b.boolean && is_int(v.dtype());
    return b;
  }
  Built name(const std::string& n) { return value(n == "score" ? *score_ : mod_expr::index_value(m_, n)); }
  void need_number(const Built& b, const std::string& what) const {
    if (b.boolean)
      fail("{} mod expression '{}': {} takes a number; got a condition", kind_, text_, what);
  }
  void need_bool(const Built& b, const std::string& what) const {
    if (!b.boolean)
      fail("{} mod expression '{}': {} takes a condition; got a number", kind_, text_, what);
  }
  // The operand as a DSL operand of a float operation (integer values converted to f32).
  static Value as_float(const Built& b) { return b.integer ? b.v.to(f32) : b.v; }
  // The number `v` as a DSL value of an integer (i32) or a float (f32) operation.
  static Value as_value(const Built& v, bool integer) {
    if (v.is_literal)
      return scalar(v.literal, integer ? i32 : f32);
    return integer ? v.v : as_float(v);
  }

  // a op b on numbers: literals fold; integers stay integers unless the other side is float or op is '/'.
  Built arithmetic(const std::string& op, const Built& a, const Built& b) {
    need_number(a, "'" + op + "'");
    need_number(b, "'" + op + "'");
    const bool integer = a.integer && b.integer && op != "/" && op != "pow";
    if (op == "%" && !integer)
      fail("{} mod expression '{}': '%' takes integers; got a float operand", kind_, text_);
    if (op == "%" && b.is_literal && b.literal == 0)
      fail("{} mod expression '{}': '%' by zero", kind_, text_);
    if (a.is_literal && b.is_literal) {
      const double x = a.literal, y = b.literal, r = mod_expr::apply(op, x, y);
      if (integer && !(std::fabs(r) <= 2147483647.0))
        fail("{} mod expression '{}': the integer {} {} {} overflows the kernel's 32 bits", kind_, text_, x,
             op, y);
      return literal(integer ? std::trunc(r) : r, integer);
    }
    auto operand = [&](const Built& v, const Value& holder) -> Operand {
      if (v.is_literal)
        return integer ? Operand(static_cast<int64_t>(v.literal)) : Operand(v.literal);
      return Operand(holder);
    };
    const Value av = a.is_literal ? Value() : (integer ? a.v : as_float(a));
    const Value bv = b.is_literal ? Value() : (integer ? b.v : as_float(b));
    const Operand x = operand(a, av), y = operand(b, bv);
    if (op == "+")
      return value(x + y);
    if (op == "-")
      return value(x - y);
    if (op == "*")
      return value(x * y);
    if (op == "/")
      return value(x / y);
    if (op == "%")
      return value(x % y);
    if (op == "min")
      return value(minimum(x, y));
    if (op == "max")
      return value(maximum(x, y));
    return value(pow(x, y));
  }

  Built binary(const std::string& op, const Built& a, const Built& b) {
    if (op == "&&" || op == "||") {
      need_bool(a, "'" + op + "'");
      need_bool(b, "'" + op + "'");
      if (a.is_literal && b.is_literal)
        return boolean(mod_expr::apply(op, a.literal, b.literal) != 0);
      const Value x = a.is_literal ? scalar(a.literal, i1) : a.v,
                  y = b.is_literal ? scalar(b.literal, i1) : b.v;
      return value(op == "&&" ? (x && y) : (x || y));
    }
    if (op == "<" || op == "<=" || op == ">" || op == ">=" || op == "==" || op == "!=") {
      need_number(a, "'" + op + "'");
      need_number(b, "'" + op + "'");
      if (a.is_literal && b.is_literal)
        return boolean(mod_expr::apply(op, a.literal, b.literal) != 0);
      const bool integer = a.integer && b.integer;
      const Value x = as_value(a, integer), y = as_value(b, integer);
      if (op == "<")
        return value(x < y);
      if (op == "<=")
        return value(x <= y);
      if (op == ">")
        return value(x > y);
      if (op == ">=")
        return value(x >= y);
      if (op == "==")
        return value(x == y);
      return value(x != y);
    }
    return arithmetic(op, a, b);
  }

  Built call(const Node& n) {
    std::vector<Built> args;
    for (const Node& k : n.kids)
      args.push_back(build(k));
    const std::string& f = n.text;
    if (f == "min" || f == "max" || f == "pow")
      return arithmetic(f, args[0], args[1]);
    if (f == "where") {
      need_bool(args[0], "where()'s condition");
      need_number(args[1], "where()");
      need_number(args[2], "where()");
      const bool integer = args[1].integer && args[2].integer;
      const Value c = args[0].is_literal ? scalar(args[0].literal, i1) : args[0].v;
      const Value x = as_value(args[1], integer); // in the order written, as every op here
      const Value y = as_value(args[2], integer);
      return value(where(c, x, y));
    }
    need_number(args[0], f + "()");
    const Value x = args[0].is_literal ? scalar(args[0].literal, f32) : as_float(args[0]);
    return value(mod_expr::unary_function(f)->build(x, CallSite::current()));
  }

  const mod_expr::Parsed& parsed_;
  const std::string& text_;
  const char* kind_;
  const ModArgs& m_;
  const Value* score_;
};

// ---- Key bounds of a mask
// ----------------------------------------------------------------------------------

// One term of a mask's conjunction that bounds the keys a row sees: kv_idx <= q_idx + c (upper) or kv_idx >=
// q_idx + c (lower), or the same against the constant c (not relative).
struct KeyConstraint {
  bool upper = false, relative = false;
  int64_t c = 0;
};

void conjuncts(const Node& n, std::vector<const Node*>& out) {
  if (n.kind == Node::Kind::Binary && n.text == "&&") {
    conjuncts(n.kids[0], out);
    conjuncts(n.kids[1], out);
  } else {
    out.push_back(&n);
  }
}

// `n` as q_idx + c (relative) or c with an integer c of at most 2^30 in magnitude; nullopt otherwise.
std::optional<KeyConstraint> linear_in_q(const Node& n) {
  constexpr int64_t kMost = int64_t{1} << 30;
  auto within = [&](KeyConstraint k) -> std::optional<KeyConstraint> {
    return k.c > -kMost && k.c < kMost ? std::optional<KeyConstraint>(k) : std::nullopt;
  };
  if (n.kind == Node::Kind::Number && n.integer)
    return within({false, false, static_cast<int64_t>(n.number)});
  if (n.kind == Node::Kind::Name && n.text == "q_idx")
    return KeyConstraint{false, true, 0};
  if (n.kind == Node::Kind::Unary && n.text == "-" && n.kids[0].kind == Node::Kind::Number &&
      n.kids[0].integer)
    return within({false, false, -static_cast<int64_t>(n.kids[0].number)});
  if (n.kind == Node::Kind::Binary && (n.text == "+" || n.text == "-")) {
    auto a = linear_in_q(n.kids[0]), b = linear_in_q(n.kids[1]);
    if (!a || !b || (a->relative && b->relative) || (n.text == "-" && b->relative))
      return std::nullopt;
    return within({false, a->relative || b->relative, n.text == "+" ? a->c + b->c : a->c - b->c});
  }
  return std::nullopt;
}

// `n` as a bound on kv_idx: `kv_idx OP e` or `e OP kv_idx` with OP one of < <= > >= and e linear in q_idx.
std::optional<KeyConstraint> key_constraint(const Node& n) {
  if (n.kind != Node::Kind::Binary)
    return std::nullopt;
  std::string op = n.text;
  if (op != "<" && op != "<=" && op != ">" && op != ">=")
    return std::nullopt;
  auto is_kv = [](const Node& k) { return k.kind == Node::Kind::Name && k.text == "kv_idx"; };
  std::optional<KeyConstraint> e;
  if (is_kv(n.kids[0])) {
    e = linear_in_q(n.kids[1]);
  } else if (is_kv(n.kids[1])) {
    e = linear_in_q(n.kids[0]);
    op = op == "<" ? ">" : op == "<=" ? ">=" : op == ">" ? "<" : "<="; // e OP kv  is  kv OP' e
  }
  if (!e)
    return std::nullopt;
  e->upper = op[0] == '<';
  e->c += op == "<" ? -1 : op == ">" ? 1 : 0; // strict bounds as inclusive ones
  return e;
}

// The tightest of `cs`' lower (or upper, as the exclusive end c + 1) bounds for the query row `q`, built in
// the order the library's bounds build theirs; an invalid Value when no term bounds that side (no op is built
// for it then).
Value combined_bound(const std::vector<KeyConstraint>& cs, bool upper, const Value& q) {
  Value out;
  for (const KeyConstraint& k : cs) {
    if (k.upper != upper)
      continue;
    const int64_t c = upper ? k.c + 1 : k.c;
    Value v = !k.relative ? scalar(static_cast<double>(c), i32)
              : c > 0     ? q + static_cast<int>(c)
              : c < 0     ? q - static_cast<int>(-c)
                          : q;
    out = !out.valid() ? v : upper ? minimum(out, v) : maximum(out, v);
  }
  return out;
}

// The key bounds (attention_mods.h) of a mask whose conjunction holds terms `cs`; the keys every row sees too
// when every term is one (`all`). Nothing when no term bounds the keys.
void set_key_bounds(MaskMod& m, const std::vector<KeyConstraint>& cs, bool all) {
  if (cs.empty())
    return;
  m.key_bounds = {kDeterminedByName, [cs, all](const ModArgs& a, const Value& q_first, const Value& q_last) {
                    // Each side built when it is reached (the library's order: lo, hi, full_lo, full_hi).
                    auto side = [&](bool upper, const Value& q) {
                      Value v = combined_bound(cs, upper, q);
                      return v.valid() ? v : upper ? a.N_K : scalar(0, i32);
                    };
                    KeyBounds b;
                    b.lo = side(false, q_first);
                    b.hi = side(true, q_last);
                    if (all) {
                      b.full_lo = side(false, q_last);
                      b.full_hi = side(true, q_first);
                    }
                    return b;
                  }};
  // A later row sees at least as many keys as every row before while every upper bound follows the row no
  // further than the row itself (kv_idx <= q_idx + c, c <= 0: causal, a window open only to the left).
  bool relative_upper = false, monotone = all;
  for (const KeyConstraint& k : cs)
    if (k.upper) {
      relative_upper = relative_upper || k.relative;
      monotone = monotone && k.relative && k.c <= 0;
    }
  m.later_rows_see_more = monotone && relative_upper;
}

} // namespace

ScoreMod score_mod_from_expression(const std::string& text) {
  auto e = std::make_shared<const mod_expr::Parsed>(mod_expr::parse(text, "score", true));
  ScoreMod m;
  m.name = "score" + mod_expr::spelled(e->root);
  m.tensors = e->tensors;
  m.fn = {kDeterminedByName, [e, text](const Value& s, const ModArgs& a) {
            Builder b(*e, text, "score", a, &s);
            return b.result(b.build(e->root), false);
          }};
  m.reference = [e](double s, const ModPoint& p) { return mod_expr::evaluate(e->root, p, s); };
  return m;
}

MaskMod mask_mod_from_expression(const std::string& text) {
  auto e = std::make_shared<const mod_expr::Parsed>(mod_expr::parse(text, "mask", false));
  MaskMod m;
  m.name = "mask" + mod_expr::spelled(e->root);
  m.tensors = e->tensors;
  m.fn = {kDeterminedByName, [e, text](const ModArgs& a) {
            Builder b(*e, text, "mask", a, nullptr);
            return b.result(b.build(e->root), true);
          }};
  m.reference = [e](const ModPoint& p) { return mod_expr::evaluate(e->root, p, 0) != 0; };
  // Terms that bound the keys by the row (causal, windows) let the kernels skip key tiles and visit whole
  // ones unmasked, as the library's masks do.
  std::vector<const Node*> terms;
  conjuncts(e->root, terms);
  std::vector<KeyConstraint> cs;
  bool all = true;
  for (const Node* t : terms) {
    if (auto k = key_constraint(*t))
      cs.push_back(*k);
    else
      all = false;
  }
  set_key_bounds(m, cs, all);
  return m;
}

} // namespace kiln
