// The expression language of attention_mod_expr.h: its parse into a tree, the checks that make a tree a valid
// score or mask mod (names, arities, tensor reads and the dims their indices name), the tree spelled in full
// (a mod's name) and its evaluation in double precision (a mod's reference). What the tree builds as DSL ops
// is attention_mod_expr.cpp's.
#pragma once

#include "kernels/attention/attention_mods.h"

#include <string>
#include <vector>

namespace kiln::mod_expr {

// One node of a parsed expression.
struct Node {
  enum class Kind { Number, Name, Tensor, Unary, Binary, Call } kind = Kind::Number;
  double number = 0;
  bool integer = false;     // a Number written without '.' or an exponent
  std::string text;         // Name, Tensor and Call: the name; Unary and Binary: the operator
  DType dtype = DType::f32; // Tensor: its elements
  std::vector<Node> kids;   // operands, arguments, indices
};

struct Parsed {
  Node root;
  std::vector<ModTensorSpec> tensors; // the tensors it reads, in the order first read
};

// `text` parsed and checked as a `kind` ("score" or "mask") mod's expression (`score`: it may read the
// score); a kiln::Error naming the column of a malformed one, or what breaks the rules.
Parsed parse(const std::string& text, const char* kind, bool score);

// The dims a checked tensor read's indices name (b: B, h: H, q_idx: N_Q, kv_idx: N_K).
std::vector<std::string> read_dims(const Node& n);
// The spec a checked tensor read `n` loads through: the tensor's own, or where the expression reads it along other
// dims too, the spec of these dims (named NAME__DIMS, ModTensorSpec::given_as the tensor's name).
const std::string& read_spec_name(const std::vector<ModTensorSpec>& tensors, const Node& n);

// `n` printed in full, one pair of parentheses per operation.
std::string spelled(const Node& n);

// `n` at one point, as the kernel computes it but in double (integers as int64, C's % and truncation);
// conditions are 1 or 0.
double evaluate(const Node& n, const ModPoint& p, double score);

// a OP b in double, OP a binary operator (+ - * / % < <= > >= == != && ||) or min, max, pow: what evaluate()
// computes, and what the DSL build folds two literals with. '%' of operands beyond i32 or by 0 is a
// kiln::Error (naming the point `at`, where there is one).
double apply(const std::string& op, double a, double b, const ModPoint* at = nullptr);

// The one-argument functions: each one's DSL op and its double-precision value.
struct UnaryFunction {
  const char* name;
  Value (*build)(const Value&, CallSite);
  double (*reference)(double);
};
// The function `name`, or null.
const UnaryFunction* unary_function(const std::string& name);

// The value of the index or size `name` (b, h, q_idx, kv_idx, N_Q, N_K, H, H_KV) in a mod's ModArgs (DSL
// values) or ModPoint (integers).
template <class Args> const auto& index_value(const Args& a, const std::string& name) {
  return name == "b"        ? a.b
         : name == "h"      ? a.h
         : name == "q_idx"  ? a.q_idx
         : name == "kv_idx" ? a.kv_idx
         : name == "N_Q"    ? a.N_Q
         : name == "N_K"    ? a.N_K
         : name == "H"      ? a.H
                            : a.H_KV;
}

} // namespace kiln::mod_expr
