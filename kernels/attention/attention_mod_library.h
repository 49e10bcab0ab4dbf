// kiln's library of attention mods (attention_mods.h), each a function returning the mod, with its DSL body,
// its double-precision reference and, for window-like masks, the key bounds that let the kernel skip key
// tiles:
//
//   AttentionMods mods;
//   mods.mask = {document_mask(), sliding_window(256, 0)};
//   mods.score = {softcap(30)};
//
// Indices are those of FlexAttention: q_idx the query row, kv_idx the key, both from 0.
#pragma once

#include "kernels/attention/attention_mods.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// Causal masking as a mask mod: top-left (key j visible to query i iff j <= i, PyTorch's is_causal) or
// bottom-right (iff j <= i + N_K - N_Q, FlashAttention >= 2.1's); the same results as CAUSAL=1 / 2.
MaskMod causal_mask(bool bottom_right = false);

// Keys within `left` before and `right` after the query's own index: q_idx - left <= kv_idx <= q_idx + right
// (top-left aligned, as FlexAttention's sliding window; causal sliding window: right = 0). Non-negative
// extents.
MaskMod sliding_window(int64_t left, int64_t right);

// Prefix-LM: the first `prefix` keys are seen by every query (bidirectional prefix), the rest causally
// (kv_idx < prefix or kv_idx <= q_idx).
MaskMod prefix_lm(int64_t prefix);

// Document masking for packed sequences: a query sees the keys of its own document only,
// q_doc[b, q_idx] == kv_doc[b, kv_idx]. Tensors "q_doc" [B, N_Q] and "kv_doc" [B, N_K], i32 (self-attention
// over one packed sequence: pass the same ids for both).
MaskMod document_mask();

// ALiBi: score + slope[h] · (kv_idx - q_idx), with "alibi_slopes" [H] in f32 (one slope per query head).
ScoreMod alibi();

// tanh softcapping: cap · tanh(score / cap) (Gemma 2, Grok); cap > 0 and finite.
ScoreMod softcap(double cap);

// An additive bias: score + bias[b, h, q_idx, kv_idx] with "bias" [B, H, N_Q, N_K] of `dtype` (f32, f16 or
// bf16), any dim of which may be 1 (broadcast) and any strides.
ScoreMod additive_bias(DType dtype = DType::f32);

// Attention sinks (gpt-oss): a learned logit per query head, "sinks" [H] in f32, that joins each row's
// softmax as a key with no value (SinkMod).
SinkMod attention_sinks();

// ALiBi's usual slopes for `heads` heads: 2^(-8 (h + 1) / heads), h from 0.
std::vector<double> standard_alibi_slopes(int64_t heads);

} // namespace kiln
