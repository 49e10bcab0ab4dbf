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

// `n` printed in full, one pair of parentheses per operation.
std::string spelled(const Node& n);

// `n` at one point, as the kernel computes it but in double (integers as int64, C's % and truncation);
// conditions are 1 or 0.
double evaluate(const Node& n, const ModPoint& p, double score);

} // namespace kiln::mod_expr
