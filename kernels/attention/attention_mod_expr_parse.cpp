#include "kernels/attention/attention_mod_expr_parse.h"

#include "dsl/dsl.h"
#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>

namespace kiln::mod_expr {

namespace {

// The names a mod reads from ModArgs, and the dims a tensor index names.
const std::map<std::string, const char*> kIndexDims = {
    {"b", "B"}, {"h", "H"}, {"q_idx", "N_Q"}, {"kv_idx", "N_K"}};
bool is_size_name(const std::string& s) { return s == "N_Q" || s == "N_K" || s == "H" || s == "H_KV"; }

using DslFunction = Value (*)(const Value&, CallSite);
const UnaryFunction kUnaryFunctions[] = {
    {"exp", static_cast<DslFunction>(&kiln::exp), +[](double x) { return std::exp(x); }},
    {"log", static_cast<DslFunction>(&kiln::log), +[](double x) { return std::log(x); }},
    {"sqrt", static_cast<DslFunction>(&kiln::sqrt), +[](double x) { return std::sqrt(x); }},
    {"abs", static_cast<DslFunction>(&kiln::abs), +[](double x) { return std::fabs(x); }},
    {"tanh", static_cast<DslFunction>(&kiln::tanh), +[](double x) { return std::tanh(x); }},
    {"sigmoid", static_cast<DslFunction>(&kiln::sigmoid), +[](double x) { return 1 / (1 + std::exp(-x)); }},
    {"erf", static_cast<DslFunction>(&kiln::erf), +[](double x) { return std::erf(x); }},
    {"sin", static_cast<DslFunction>(&kiln::sin), +[](double x) { return std::sin(x); }},
    {"cos", static_cast<DslFunction>(&kiln::cos), +[](double x) { return std::cos(x); }},
    {"log1p", static_cast<DslFunction>(&kiln::log1p), +[](double x) { return std::log1p(x); }},
    {"expm1", static_cast<DslFunction>(&kiln::expm1), +[](double x) { return std::expm1(x); }},
};
// The functions of more than one argument, by arity.
const std::map<std::string, int> kOtherFunctions = {{"min", 2}, {"max", 2}, {"pow", 2}, {"where", 3}};

std::string function_names() {
  std::string s;
  for (const UnaryFunction& f : kUnaryFunctions)
    s += std::string(f.name) + ", ";
  return s + "min, max, pow or where";
}

class Parser {
public:
  Parser(const std::string& text, const char* kind) : text_(text), kind_(kind) {}

  Node parse() {
    Node n = logical_or();
    skip_blanks();
    if (at_ < text_.size())
      error("an operator or the end");
    return n;
  }

private:
  [[noreturn]] void error(const std::string& expected) const {
    const std::string got = at_ < text_.size() ? "'" + text_.substr(at_, 12) + "'" : "the end";
    fail("{} mod expression '{}': expected {} at column {}, got {}", kind_, text_, expected, at_ + 1, got);
  }
  void skip_blanks() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_])))
      ++at_;
  }
  // Takes `op` when it comes next (and, for '<' '>' '=' '!', is not the start of a longer operator).
  bool take(const char* op) {
    skip_blanks();
    const std::string s(op);
    if (text_.compare(at_, s.size(), s) != 0)
      return false;
    const size_t next = at_ + s.size();
    if (s.size() == 1 && std::string("<>=!").find(s[0]) != std::string::npos && next < text_.size() &&
        text_[next] == '=')
      return false;
    if ((s == "&" || s == "|") && next < text_.size() && text_[next] == s[0])
      return false;
    at_ = next;
    return true;
  }
  void expect(const char* op) {
    if (!take(op))
      error(std::string("'") + op + "'");
  }
  // Bounds that keep the walks over the tree (each recursive) far from the stack's end on any input.
  static constexpr int kMostNesting = 128, kMostOperations = 1024;
  void count_operation() {
    if (++operations_ > kMostOperations)
      fail("{} mod expression of {} characters: more than {} operations; expected a shorter expression",
           kind_, text_.size(), kMostOperations);
  }
  Node binary(const std::string& op, Node a, Node b) {
    count_operation();
    Node n;
    n.kind = Node::Kind::Binary;
    n.text = op;
    n.kids.push_back(std::move(a));
    n.kids.push_back(std::move(b));
    return n;
  }

  Node logical_or() {
    Node n = logical_and();
    while (take("||"))
      n = binary("||", std::move(n), logical_and());
    return n;
  }
  Node logical_and() {
    Node n = comparison();
    while (take("&&"))
      n = binary("&&", std::move(n), comparison());
    return n;
  }
  Node comparison() {
    Node n = sum();
    for (const char* op : {"<=", ">=", "==", "!=", "<", ">"})
      if (take(op))
        return binary(op, std::move(n), sum());
    return n;
  }
  Node sum() {
    Node n = product();
    for (;;) {
      if (take("+"))
        n = binary("+", std::move(n), product());
      else if (take("-"))
        n = binary("-", std::move(n), product());
      else
        return n;
    }
  }
  Node product() {
    Node n = unary();
    for (;;) {
      if (take("*"))
        n = binary("*", std::move(n), unary());
      else if (take("/"))
        n = binary("/", std::move(n), unary());
      else if (take("%"))
        n = binary("%", std::move(n), unary());
      else
        return n;
    }
  }
  Node unary() {
    struct Nested {
      int& depth;
      ~Nested() { --depth; }
    } nested{++depth_};
    if (depth_ > kMostNesting)
      fail("{} mod expression '{}': nested more than {} deep at column {}", kind_, text_.substr(0, 40),
           kMostNesting, at_ + 1);
    for (const char* op : {"-", "!"})
      if (take(op)) {
        count_operation();
        Node n;
        n.kind = Node::Kind::Unary;
        n.text = op;
        n.kids.push_back(unary());
        return n;
      }
    return primary();
  }
  std::vector<Node> list(const char* close) {
    std::vector<Node> items;
    if (take(close))
      return items;
    do
      items.push_back(logical_or());
    while (take(","));
    expect(close);
    return items;
  }
  std::string identifier() {
    const size_t start = at_;
    while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_'))
      ++at_;
    return text_.substr(start, at_ - start);
  }
  Node primary() {
    skip_blanks();
    if (take("(")) {
      Node n = logical_or();
      expect(")");
      return n;
    }
    if (at_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[at_])) || text_[at_] == '.'))
      return number();
    if (at_ >= text_.size() || !(std::isalpha(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_'))
      error("a number, a name or '('");
    Node n;
    n.text = identifier();
    if (take("(")) {
      n.kind = Node::Kind::Call;
      n.kids = list(")");
      return n;
    }
    if (take(":")) {
      skip_blanks();
      const std::string dt = identifier();
      n.dtype = dt == "f32" ? DType::f32 : dt == "f16" ? DType::f16 : dt == "bf16" ? DType::bf16 : DType::i1;
      if (dt == "i32")
        n.dtype = DType::i32;
      if (n.dtype == DType::i1)
        error("a tensor's dtype (f32, f16, bf16 or i32) after ':'");
      expect("[");
      n.kind = Node::Kind::Tensor;
      n.kids = list("]");
      return n;
    }
    if (take("[")) {
      n.kind = Node::Kind::Tensor;
      n.kids = list("]");
      return n;
    }
    n.kind = Node::Kind::Name;
    return n;
  }
  Node number() {
    const char* begin = text_.c_str() + at_;
    char* end = nullptr;
    Node n;
    n.number = std::strtod(begin, &end);
    const std::string written(begin, static_cast<size_t>(end - begin));
    if (written.empty() || written == ".")
      error("a number");
    n.integer = written.find_first_of(".eE") == std::string::npos;
    if (n.integer && std::fabs(n.number) > 2147483647.0)
      error("an integer of 32 bits");
    at_ += written.size();
    return n;
  }

  const std::string& text_;
  const char* kind_;
  size_t at_ = 0;
  int depth_ = 0, operations_ = 0;
};

// Whether two reads of one tensor may share it: dims that differ only where one runs along the queries and the
// other along the keys (doc[b, q_idx] and doc[b, kv_idx]).
bool differ_only_along_sequences(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && !((a[i] == "N_Q" && b[i] == "N_K") || (a[i] == "N_K" && b[i] == "N_Q")))
      return false;
  return true;
}

// Checks names, arities and tensor indices; collects the tensors read (their dims from the indices).
void check(const Node& n, const std::string& text, const char* kind, bool score,
           std::vector<ModTensorSpec>& tensors) {
  auto bad = [&](const std::string& what) { fail("{} mod expression '{}': {}", kind, text, what); };
  switch (n.kind) {
  case Node::Kind::Number:
    return;
  case Node::Kind::Name:
    if (n.text == "score" && !score)
      bad("'score' is a score mod's input; a mask mod sees b, h, q_idx, kv_idx and the sizes");
    if (n.text != "score" && !kIndexDims.count(n.text) && !is_size_name(n.text))
      bad(fmt::format(
          "unknown name '{}'; expected {}b, h, q_idx, kv_idx, N_Q, N_K, H, H_KV, a function call or "
          "a tensor read NAME[index, ...]",
          n.text, score ? "score, " : ""));
    return;
  case Node::Kind::Call: {
    auto f = kOtherFunctions.find(n.text);
    if (f == kOtherFunctions.end() && !unary_function(n.text))
      bad(fmt::format("unknown function '{}'; expected {}", n.text, function_names()));
    const int arity = f == kOtherFunctions.end() ? 1 : f->second;
    if (static_cast<int>(n.kids.size()) != arity)
      bad(fmt::format("{}() takes {} argument(s); got {}", n.text, arity, n.kids.size()));
    break;
  }
  case Node::Kind::Tensor: {
    if (n.kids.empty() || n.kids.size() > 4)
      bad(fmt::format("tensor '{}' read with {} indices; expected 1 to 4 (b, h, q_idx, kv_idx)", n.text,
                      n.kids.size()));
    for (const Node& i : n.kids)
      if (i.kind != Node::Kind::Name || !kIndexDims.count(i.text))
        bad(fmt::format(
            "tensor '{}' is indexed by '{}'; expected one of b, h, q_idx, kv_idx per dim (they name "
            "its dims B, H, N_Q, N_K)",
            n.text, spelled(i)));
    ModTensorSpec spec{n.text, n.dtype, read_dims(n), ""};
    bool read_before = false;
    for (const ModTensorSpec& t : tensors) {
      if (t.tensor_name() != n.text)
        continue;
      if (t.dtype == spec.dtype && t.dims == spec.dims)
        return; // read as before
      if (t.dtype != spec.dtype || !differ_only_along_sequences(t.dims, spec.dims))
        bad(fmt::format("tensor '{}' is read as {} [{}] and as {} [{}]; expected one dtype, and dims that "
                        "differ only where one read runs along the queries (q_idx) and the other along the "
                        "keys (kv_idx)",
                        n.text, dtype_name(t.dtype), fmt::join(t.dims, ", "), dtype_name(spec.dtype),
                        fmt::join(spec.dims, ", ")));
      read_before = true;
    }
    if (read_before) { // one more spec of the same tensor, along these dims
      spec.given_as = n.text;
      spec.name = fmt::format("{}__{}", n.text, fmt::join(spec.dims, "_"));
    }
    for (const ModTensorSpec& t : tensors)
      if (t.name == spec.name) { // a tensor named as kiln names another's second read (either came first)
        const ModTensorSpec& second_read = spec.given_as.empty() ? t : spec;
        bad(fmt::format("tensor '{}' is also the name kiln gives tensor '{}' read along [{}]; expected "
                        "another name",
                        second_read.name, second_read.given_as, fmt::join(second_read.dims, ", ")));
      }
    tensors.push_back(spec);
    return;
  }
  case Node::Kind::Unary:
  case Node::Kind::Binary:
    break;
  }
  for (const Node& k : n.kids)
    check(k, text, kind, score, tensors);
}

double at(const ModPoint& p, const std::string& name, const std::vector<int64_t>& i) {
  switch (i.size()) {
  case 1:
    return p.at(name, {i[0]});
  case 2:
    return p.at(name, {i[0], i[1]});
  case 3:
    return p.at(name, {i[0], i[1], i[2]});
  default:
    return p.at(name, {i[0], i[1], i[2], i[3]});
  }
}

} // namespace

// The expression printed in full, one pair of parentheses per operation: the mod's name, and so its identity.
std::string spelled(const Node& n) {
  switch (n.kind) {
  case Node::Kind::Number:
    return n.integer ? fmt::format("{}", static_cast<int64_t>(n.number)) : fmt::format("{:.17g}f", n.number);
  case Node::Kind::Name:
    return n.text;
  case Node::Kind::Unary:
    return (n.text == "!" ? "not " : "-") + spelled(n.kids[0]);
  case Node::Kind::Binary: {
    const std::string op = n.text == "&&" ? " and " : n.text == "||" ? " or " : n.text;
    return "(" + spelled(n.kids[0]) + op + spelled(n.kids[1]) + ")";
  }
  case Node::Kind::Call:
  case Node::Kind::Tensor: {
    std::string s =
        n.text + (n.kind == Node::Kind::Tensor ? ":" + std::string(dtype_name(n.dtype)) + "[" : "(");
    for (size_t i = 0; i < n.kids.size(); ++i)
      s += (i ? "," : "") + spelled(n.kids[i]);
    return s + (n.kind == Node::Kind::Tensor ? "]" : ")");
  }
  }
  return "";
}

std::vector<std::string> read_dims(const Node& n) {
  std::vector<std::string> dims;
  for (const Node& i : n.kids)
    dims.push_back(kIndexDims.at(i.text));
  return dims;
}

const std::string& read_spec_name(const std::vector<ModTensorSpec>& tensors, const Node& n) {
  const std::vector<std::string> dims = read_dims(n);
  for (const ModTensorSpec& t : tensors)
    if (t.tensor_name() == n.text && t.dims == dims)
      return t.name;
  throw InternalError(fmt::format("mod expression: tensor '{}' read along [{}] has no spec", n.text,
                                  fmt::join(dims, ", ")));
}

// The expression at one point, as the kernel computes it but in double (integers as int64, C's % and
// truncation); conditions are 1 or 0.
double evaluate(const Node& n, const ModPoint& p, double score) {
  switch (n.kind) {
  case Node::Kind::Number:
    return n.number;
  case Node::Kind::Name:
    return n.text == "score" ? score : static_cast<double>(index_value(p, n.text));
  case Node::Kind::Tensor: {
    std::vector<int64_t> index;
    for (const Node& k : n.kids)
      index.push_back(static_cast<int64_t>(evaluate(k, p, score)));
    return at(p, n.text, index);
  }
  case Node::Kind::Unary: {
    const double a = evaluate(n.kids[0], p, score);
    return n.text == "!" ? (a == 0 ? 1 : 0) : -a;
  }
  case Node::Kind::Binary:
    return apply(n.text, evaluate(n.kids[0], p, score), evaluate(n.kids[1], p, score), &p);
  case Node::Kind::Call: {
    std::vector<double> x;
    for (const Node& k : n.kids)
      x.push_back(evaluate(k, p, score));
    if (n.text == "where")
      return x[0] != 0 ? x[1] : x[2];
    if (x.size() == 2)
      return apply(n.text, x[0], x[1], &p);
    return unary_function(n.text)->reference(x[0]);
  }
  }
  return 0;
}

double apply(const std::string& op, double a, double b, const ModPoint* at) {
  if (op == "&&")
    return a != 0 && b != 0;
  if (op == "||")
    return a != 0 || b != 0;
  if (op == "<")
    return a < b;
  if (op == "<=")
    return a <= b;
  if (op == ">")
    return a > b;
  if (op == ">=")
    return a >= b;
  if (op == "==")
    return a == b;
  if (op == "!=")
    return a != b;
  if (op == "+")
    return a + b;
  if (op == "-")
    return a - b;
  if (op == "*")
    return a * b;
  if (op == "/")
    return a / b;
  if (op == "min")
    return std::min(a, b);
  if (op == "max")
    return std::max(a, b);
  if (op == "pow")
    return std::pow(a, b);
  // '%': the kernel computes in i32, so an operand beyond it has no value to compare with (nor, past 2^63,
  // an int64).
  if (!(std::fabs(a) <= 2147483647.0 && std::fabs(b) <= 2147483647.0) || b == 0)
    fail("mod expression: '%' of {} by {}{}; expected i32 operands, the second nonzero", a, b,
         at ? fmt::format(" at b={} h={} q_idx={} kv_idx={}", at->b, at->h, at->q_idx, at->kv_idx) : "");
  return static_cast<double>(static_cast<int64_t>(a) % static_cast<int64_t>(b));
}

const UnaryFunction* unary_function(const std::string& name) {
  for (const UnaryFunction& f : kUnaryFunctions)
    if (name == f.name)
      return &f;
  return nullptr;
}

Parsed parse(const std::string& text, const char* kind, bool score) {
  Parsed e{Parser(text, kind).parse(), {}};
  check(e.root, text, kind, score, e.tensors);
  return e;
}

} // namespace kiln::mod_expr
