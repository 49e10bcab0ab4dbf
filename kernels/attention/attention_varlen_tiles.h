// The DSL pieces that turn FA2's forward into its variable-length (packed) form, VARLEN=1 (fa2_fwd_varlen.h):
// the two offset arguments, and the view of one program's sequence — its rows and keys as the sizes N_Q and
// N_K, its first row and key as the bases of Q/O and K/V, its first row as the start of its LSE — that the rest
// of the kernel reads exactly as it reads one (batch, head) of the dense kernel. Nothing else in the kernel
// knows that sequences are packed.
#pragma once

#include "kernels/attention/attention_tiles.h"

namespace kiln {

// CU_SEQLENS_Q, CU_SEQLENS_K: i32 pointers to B + 1 offsets each, declared after the dense kernel's arguments.
struct VarlenArgs {
  Value cu_seqlens_q, cu_seqlens_k;
};
VarlenArgs declare_varlen_args(KernelBuilder& kb);

// One program's sequence b = off_hz / H, head h = off_hz % H, in the packed tensors: `args` is the kernel's
// arguments with N_Q and N_K replaced by the sequence's lengths (so that block pointers, masks, key ranges and
// the row mask of the stores stop at the sequence's end), `bases` the sequence's first row of head h in Q/O
// (first key of kv head h / (H / H_KV) in K/V) and its first LSE element (LSE is [H, TOTAL_Q]).
//
// The offsets are read from device memory the host may not have checked, so they are clamped into
// [0, TOTAL_Q] and [0, TOTAL_K] (the kernel's N_Q and N_K arguments hold the packed totals): whatever the
// offsets hold, no program reads or writes outside the tensors, and a decreasing pair gives an empty sequence.
// A program whose tile starts at or past its sequence's last row (the grid is sized for the longest sequence)
// sees no key: its key loops are empty and every row of its stores is masked, so it writes nothing.
struct SequenceView {
  AttentionArgs args;
  AttentionHeadBases bases;
};
SequenceView varlen_sequence(const AttentionArgs& a, const VarlenArgs& v, const Value& off_hz, const Value& m0);

} // namespace kiln
