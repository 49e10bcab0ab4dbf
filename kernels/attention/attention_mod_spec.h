// The text spelling of kiln's library mods (attention_mod_library.h), shared by `kiln attention --mod` and the
// C ABI's kiln_attention_options.mods (and so Python's kiln.attention(mods=...)):
//
//   "causal"                      causal_mask(false); "causal=top-left" the same, "causal=bottom-right"
//   "sliding_window=LEFT[,RIGHT]" sliding_window(LEFT, RIGHT), RIGHT 0 when left out
//   "prefix_lm=N"                 prefix_lm(N)
//   "softcap=CAP"                 softcap(CAP)
//   "alibi"                       alibi(): reads "alibi_slopes" f32 [H]
//   "document"                    document_mask(): reads "q_doc" i32 [B, N_Q] and "kv_doc" i32 [B, N_K]
//   "bias[=f32|f16|bf16]"         additive_bias(dtype): reads "bias" [B, H, N_Q, N_K]
//   "sinks"                       attention_sinks(): reads "sinks" f32 [H]
//   "score=EXPR", "mask=EXPR"     a score or mask mod written as an expression (attention_mod_expr.h), e.g.
//                                 "score=30 * tanh(score / 30)", "mask=kv_idx <= q_idx && kv_idx > q_idx - 256"
//
// A list of them is separated by ';' (a comma separates a mod's own arguments): "causal;softcap=30;alibi".
// An expression runs to the next ';'.
// Blanks around each spec are ignored, as are empty specs ("causal;" is "causal").
#pragma once

#include "kernels/attention/attention_mods.h"

#include <string>
#include <vector>

namespace kiln {

// The mods a list of specs names, and the tensors they read (AttentionMods::tensors() order).
struct ModSpecs {
  AttentionMods mods;
  std::vector<ModTensorSpec> tensors;
};

// Adds the library mod one spec names to `mods`. A kiln::Error naming the spec and what was expected (the
// valid names and their arguments) for an unknown name or a malformed argument; `mods` is then unchanged.
void add_mod_spec(AttentionMods& mods, const std::string& spec);

// The mods of a ';'-separated list of specs ("" or blanks: no mods), in order; a kiln::Error as add_mod_spec's,
// or AttentionMods::tensors()' (two sinks, a tensor read twice).
ModSpecs parse_mod_specs(const std::string& specs);

// The valid specs, as messages list them: "causal[=top-left|bottom-right], sliding_window=LEFT[,RIGHT], ...".
const char* mod_spec_help();

} // namespace kiln
