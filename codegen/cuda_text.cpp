#include "codegen/cuda_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cmath>

namespace kiln::emit_detail {

std::string ctype(DType t) {
  switch (t) {
  case DType::i1:
    return "bool";
  case DType::u8:
    return "unsigned char";
  case DType::i32:
    return "int";
  case DType::i64:
    return "long long";
  case DType::f16:
    return "kiln::f16";
  case DType::bf16:
    return "kiln::bf16";
  case DType::f32:
    return "float";
  case DType::f64:
    return "double";
  }
  return "?";
}

std::string ctype_of(const Type& t) { return t.is_pointer() ? ctype(t.elem) + "*" : ctype(t.elem); }

std::string literal(double v, DType t) {
  if (is_float(t)) {
    auto wrap = [&](const std::string& f32) {
      return t == DType::f32   ? f32
             : t == DType::f64 ? "(double)" + f32
                               : fmt::format("kiln::cvt<{}>({})", ctype(t), f32);
    };
    if (std::isinf(v))
      return wrap(v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)");
    if (std::isnan(v))
      return wrap("__int_as_float(0x7fffffff)");
    std::string s = fmt::format("{:.17g}", v);
    if (s.find_first_of(".e") == std::string::npos)
      s += ".0";
    if (t == DType::f64)
      return s;
    s += "f";
    return t == DType::f32 ? s : fmt::format("kiln::cvt<{}>({})", ctype(t), s);
  }
  if (t == DType::i1)
    return v != 0 ? "true" : "false";
  if (t == DType::i64)
    return fmt::format("{}LL", static_cast<int64_t>(v));
  return fmt::format("{}", static_cast<int64_t>(v));
}

// Arithmetic on f16/bf16 happens in f32 and rounds back, which is exact rounding for + - * /.
std::string as_math(const std::string& x, DType t) { return is_half(t) ? "kiln::cvt<float>(" + x + ")" : x; }
std::string from_math(const std::string& x, DType t) {
  return is_half(t) ? fmt::format("kiln::cvt<{}>({})", ctype(t), x) : x;
}

std::string random_expr(RandomDist d, const std::string& seed, const std::string& offset) {
  return fmt::format("kiln::{}((long long)({}), (long long)({}))",
                     d == RandomDist::Normal ? "philox_normal" : "philox_uniform", seed, offset);
}

std::string unary_expr(UnaryOp u, const std::string& x0, DType t) {
  std::string x = as_math(x0, t);
  bool f64 = t == DType::f64;
  std::string e;
  switch (u) {
  case UnaryOp::Neg:
    e = "(-" + x + ")";
    break;
  case UnaryOp::Not:
    return "(!" + x0 + ")";
  case UnaryOp::Exp:
    e = f64 ? "exp(" + x + ")" : "kiln::exp_fast(" + x + ")";
    break;
  case UnaryOp::Exp2:
    e = f64 ? "exp2(" + x + ")" : "kiln::ex2(" + x + ")";
    break;
  case UnaryOp::Log:
    e = f64 ? "log(" + x + ")" : "kiln::log_fast(" + x + ")";
    break;
  case UnaryOp::Log2:
    e = f64 ? "log2(" + x + ")" : "kiln::lg2(" + x + ")";
    break;
  case UnaryOp::Sqrt:
    e = f64 ? "sqrt(" + x + ")" : "kiln::sqrt_rn(" + x + ")";
    break;
  case UnaryOp::Rsqrt:
    e = f64 ? "(1.0 / sqrt(" + x + "))" : "kiln::rsqrt_fast(" + x + ")";
    break;
  case UnaryOp::Abs:
    e = is_float(t) ? (f64 ? "fabs(" + x + ")" : "fabsf(" + x + ")")
                    : "(" + x + " < 0 ? -" + x + " : " + x + ")";
    break;
  // The accurate CUDA math functions (not the approx. instructions exp and log use).
  case UnaryOp::Tanh:
    e = (f64 ? "tanh(" : "tanhf(") + x + ")";
    break;
  case UnaryOp::Sigmoid: // e = exp(-|x|) lies in (0, 1]: no inf / inf for any x; NaN stays NaN
    e = f64 ? "([](double v) { const double e = exp(-fabs(v)); return v >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e); }(" +
                  x + "))"
            : "([](float v) { const float e = expf(-fabsf(v)); return v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e); }(" +
                  x + "))";
    break;
  case UnaryOp::Erf: // f32: the erf prelude's branch-free erf_f32 (codegen/prelude/kiln_erf.cuh)
    e = (f64 ? "erf(" : "kiln::erf_f32(") + x + ")";
    break;
  case UnaryOp::Sin:
    e = (f64 ? "sin(" : "sinf(") + x + ")";
    break;
  case UnaryOp::Cos:
    e = (f64 ? "cos(" : "cosf(") + x + ")";
    break;
  case UnaryOp::Log1p:
    e = (f64 ? "log1p(" : "log1pf(") + x + ")";
    break;
  case UnaryOp::Expm1:
    e = (f64 ? "expm1(" : "expm1f(") + x + ")";
    break;
  }
  return from_math(e, t);
}

std::string binary_expr(BinaryOp b, const std::string& a0, const std::string& b0, DType t) {
  std::string a = as_math(a0, t), c = as_math(b0, t);
  auto wrap = [&](const std::string& e) { return from_math(e, t); };
  bool f = is_float(t);
  switch (b) {
  case BinaryOp::Add:
    return wrap("(" + a + " + " + c + ")");
  case BinaryOp::Sub:
    return wrap("(" + a + " - " + c + ")");
  case BinaryOp::Mul:
    return wrap("(" + a + " * " + c + ")");
  case BinaryOp::Div:
    return wrap("(" + a + " / " + c + ")");
  case BinaryOp::Rem:
    return wrap(f ? (t == DType::f64 ? "fmod(" : "fmodf(") + a + ", " + c + ")" : "(" + a + " % " + c + ")");
  case BinaryOp::Min:
    return wrap(f ? "kiln::min_ignore_nan(" + a + ", " + c + ")"
                  : "(" + a + " < " + c + " ? " + a + " : " + c + ")");
  case BinaryOp::Max:
    return wrap(f ? "kiln::max_ignore_nan(" + a + ", " + c + ")"
                  : "(" + a + " > " + c + " ? " + a + " : " + c + ")");
  case BinaryOp::Pow:
    return wrap((t == DType::f64 ? "pow(" : "powf(") + a + ", " + c + ")");
  case BinaryOp::And:
    return t == DType::i1 ? "(" + a + " && " + c + ")" : "(" + a + " & " + c + ")";
  case BinaryOp::Or:
    return t == DType::i1 ? "(" + a + " || " + c + ")" : "(" + a + " | " + c + ")";
  case BinaryOp::Eq:
    return "(" + a + " == " + c + ")";
  case BinaryOp::Ne:
    return "(" + a + " != " + c + ")";
  case BinaryOp::Lt:
    return "(" + a + " < " + c + ")";
  case BinaryOp::Le:
    return "(" + a + " <= " + c + ")";
  case BinaryOp::Gt:
    return "(" + a + " > " + c + ")";
  case BinaryOp::Ge:
    return "(" + a + " >= " + c + ")";
  }
  return "?";
}

std::string fma_expr(const std::string& a, const std::string& b, const std::string& c, DType t) {
  if (t == DType::f64)
    return "fma(" + a + ", " + b + ", " + c + ")";
  return from_math("fmaf(" + as_math(a, t) + ", " + as_math(b, t) + ", " + as_math(c, t) + ")", t);
}

std::string reduce_combine(ReduceOp r, const std::string& a, const std::string& b, DType t) {
  switch (r) {
  case ReduceOp::Sum:
    return binary_expr(BinaryOp::Add, a, b, t);
  case ReduceOp::Max:
    return binary_expr(BinaryOp::Max, a, b, t);
  case ReduceOp::Min:
    return binary_expr(BinaryOp::Min, a, b, t);
  case ReduceOp::Prod:
    return binary_expr(BinaryOp::Mul, a, b, t);
  case ReduceOp::Combine:
    break;
  }
  throw InternalError("reduce_combine: a user combine is printed from its region (emit_scan)");
}

std::string reduce_identity(ReduceOp r, DType t) {
  switch (r) {
  case ReduceOp::Sum:
    return literal(0, t);
  case ReduceOp::Max:
    return is_float(t)       ? literal(-INFINITY, t)
           : t == DType::i64 ? "(-9223372036854775807LL - 1)"
                             : "(-2147483647 - 1)";
  case ReduceOp::Min:
    return is_float(t) ? literal(INFINITY, t) : t == DType::i64 ? "9223372036854775807LL" : "2147483647";
  case ReduceOp::Prod:
    return literal(1, t);
  case ReduceOp::Combine:
    break;
  }
  throw InternalError("reduce_identity: a user combine has no identity");
}

std::string identifier(const std::string& hint) {
  std::string s;
  for (char c : hint)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    s = "v" + s;
  return s;
}

std::string layout_key(const Layout& l) {
  std::string s;
  for (int64_t d : l.shape)
    s += std::to_string(d) + ",";
  for (auto* bases : {&l.reg, &l.lane, &l.warp}) {
    s += "|";
    for (const Coord& c : *bases) {
      for (int64_t x : c)
        s += std::to_string(x) + ".";
      s += ";";
    }
  }
  return s;
}

std::string in_bounds(const std::string& c, const std::string& bp, int dim) {
  return fmt::format("{0} >= 0 && {0} < {1}.shape[{2}]", c, bp, dim);
}

std::string run_in_bounds(const std::string& c, const std::string& bp, int dim, int64_t run) {
  return fmt::format("{0} >= 0 && {0} + {3} <= {1}.shape[{2}]", c, bp, dim, run);
}

std::string source_lines(const std::vector<const Op*>& ops) {
  std::vector<std::string> at;
  for (const Op* op : ops)
    at.push_back(op->loc.str());
  return fmt::format("{}", fmt::join(at, ", "));
}

} // namespace kiln::emit_detail
