// Attention backward with a sink (SinkMod, attention_mods.h): the gradient of the loss with respect to the
// sink logits, which dQ, dK, dV do not need (a sink has no value; it reaches them through the forward's LSE).
// A sink joins each row's softmax as a key of score `sink`, so its probability is exp(sink − LSE) and
//
//   d loss / d sink[b, h, i] = −exp(sink − LSE) · Delta,   Delta = rowsum(dO ∘ O)   (0 where sink = −inf)
//
// from the LSE the forward stored and the Delta fa2_bwd_preprocess wrote. Two outputs, by PER_HEAD:
//   PER_HEAD=0: the per-row gradient, f32 [B, H, N_Q] contiguous, for any sink (a user's sink that depends on
//     b or the row reduces it to its own parameters). One program per (BLOCK_M rows, batch·head).
//   PER_HEAD=1: for a per-head sink (SinkMod::per_head, as attention_sinks()' sinks[h]), the gradient of that
//     parameter, f32 [H]: the rows' gradients summed over batch and rows. One program per head walks its
//     B · cdiv(N_Q, BLOCK_M) tiles in a fixed order, so the sum is deterministic (no atomics); it reads two
//     floats a row, which is small beside the backward's products.
// A separate kernel rather than a part of the preprocess: the preprocess takes no mods (its code is the same
// for every call) and runs one program per query tile, which cannot sum a head's rows without atomics.
//
// Args: the backward list (attention_bwd_args.h), the mods' tensors (as fa2_bwd_dq_def(mods)'s), then DSINK
// (f32 pointer). Params: the attention params (BLOCK_M, DTYPE used; the others ignored), PER_HEAD.
// Grid: (cdiv(N_Q, BLOCK_M), B·H, 1), or (1, H, 1) with PER_HEAD=1.
#pragma once

#include "dsl/registry.h"

namespace kiln {

struct AttentionMods;
struct AttentionProblem;

// A kiln::Error when `mods` has no sink.
Kernel build_fa2_bwd_sink(const Config& config, const AttentionMods& mods);
// Named "fa2_bwd_sink[<mods' identity>]", one per distinct mods; a kiln::Error naming the mods when they have
// no sink.
const KernelDef& fa2_bwd_sink_def(const AttentionMods& mods);
// The config the backward runs it with: `p`'s params (with_attention_problem), BLOCK_M 64, PER_HEAD.
Config fa2_bwd_sink_config(const AttentionProblem& p, bool per_head);

} // namespace kiln
