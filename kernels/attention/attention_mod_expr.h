// Score and mask mods written as expressions (FlexAttention's score_mod / mask_mod, without C++): the text a
// mod spec carries after "score=" or "mask=" (attention_mod_spec.h), so that the C ABI and Python
// (kiln.attention(mods="score=30 * tanh(score / 30)")) reach programmable attention as C++ lambdas do.
//
//   score=score + slopes[h] * (kv_idx - q_idx)          ALiBi over a tensor "slopes" f32 [H]
//   score=30 * tanh(score / 30)                          softcapping
//   mask=kv_idx <= q_idx && kv_idx > q_idx - 256         a causal sliding window
//   mask=q_doc:i32[b, q_idx] == kv_doc:i32[b, kv_idx]    document masking over two i32 tensors
//
// The language: numbers (an integer literal, or a float with '.' or an exponent); the names score (score mods
// only, f32), b, h, q_idx, kv_idx (i32, as ModArgs gives them), N_Q, N_K, H, H_KV; binary + - * / % < <= >
// >= == != && ||, unary - and !, parentheses; the functions exp, log, sqrt, abs, tanh, sigmoid, erf, sin,
// cos, log1p, expm1 (one argument), min, max, pow (two) and where(cond, a, b); and tensor reads
// NAME[:DTYPE][i, ...], whose indices are each one of b, h, q_idx, kv_idx: they name the tensor's dims (B,
// H, N_Q, N_K), and DTYPE (f32 when left out; f16, bf16, i32) its elements, which the call's mod_tensors must
// match. A tensor read at q_idx in one place and at kv_idx in another (doc[b, q_idx] == doc[b, kv_idx]) runs
// along both: one tensor given, of extent N_Q = N_K (or 1) there. Integers stay integers through + - * % min max (index arithmetic, as C's); `/` is float division and
// any float operand makes an operation float. A score expression must be a number, a mask expression a
// condition; anything else, an unknown name or a malformed expression is a kiln::Error naming the column.
//
// Each mod gets a name that spells its expression in full (its identity: two expressions that print alike
// build the same ops), a DSL function and a double-precision reference built from the same parse, and, for a
// score mod, the derivative the builder derives from its ops (attention_mods.h). A mask whose conjunction
// (&&) holds terms kv_idx OP q_idx + c or kv_idx OP c (OP one of < <= > >=, c an integer literal) gets key
// bounds from them, so that the kernels skip the key tiles no row sees and visit whole the ones every row
// sees, as the library's causal and window masks do ("mask=kv_idx <= q_idx" builds the same kernel as
// causal_mask()); other terms (documents, sizes such as N_K - N_Q) only narrow what is visited.
#pragma once

#include "kernels/attention/attention_mods.h"

#include <string>

namespace kiln {

// The score mod `text` spells ("score=" already taken off).
ScoreMod score_mod_from_expression(const std::string& text);
// The mask mod `text` spells ("mask=" already taken off).
MaskMod mask_mod_from_expression(const std::string& text);

} // namespace kiln
