// The DSL pieces that turn FA2's kernels into their variable-length (packed) form, VARLEN=1
// (fa2_fwd_varlen.h, fa2_bwd_varlen.h): the two offset arguments, a program's sequence read from them, and
// the view of that sequence — its rows and keys as the sizes N_Q and N_K, its first row and key as the bases
// of the tensors, its first row as the start of its LSE (and Delta, dQ accumulator) rows — that the rest of
// each kernel reads exactly as it reads one (batch, head) of the dense kernel. Nothing else in the kernels
// knows that sequences are packed.
#pragma once

#include "kernels/attention/attention_bwd_args.h"
#include "kernels/attention/attention_tiles.h"

namespace kiln {

// CU_SEQLENS_Q, CU_SEQLENS_K: i32 pointers to B + 1 offsets each, declared after the dense kernel's
// arguments.
struct VarlenArgs {
  Value cu_seqlens_q, cu_seqlens_k;
};
VarlenArgs declare_varlen_args(KernelBuilder& kb);

// Sequence b's first row and key (i64) and its lengths (i32), read from the offsets. The offsets are read
// from device memory the host may not have checked, so they are clamped into [0, TOTAL_Q] and [0, TOTAL_K]
// (the kernels' N_Q and N_K arguments hold the packed totals, `a.N_Q` and `a.N_K` here): whatever the offsets
// hold, no program reads or writes outside the tensors, and a decreasing pair gives an empty sequence.
struct SequenceSpan {
  Value row0, key0; // i64
  Value n_q, n_k;   // i32
  Value total_q;    // i32: TOTAL_Q, the row stride of LSE, Delta and DQ_ACC ([H, TOTAL_Q(, D)])
};
SequenceSpan read_sequence_span(const AttentionArgs& a, const VarlenArgs& v, const Value& off_b);

// The forward's view of program (.., off_hz): sequence b = off_hz / H, head h = off_hz % H. `args` is the
// kernel's arguments with N_Q and N_K replaced by the sequence's lengths (so that block pointers, masks, key
// ranges and the row mask of the stores stop at the sequence's end), `bases` the sequence's first row of head
// h in Q/O (first key of kv head h / (H / H_KV) in K/V) and its first LSE element (LSE is [H, TOTAL_Q]). A
// program whose tile (starting at row m0) starts at or past its sequence's last row (the grid is sized for
// the longest sequence) sees no key: its key loops are empty and every row of its stores is masked, so it
// writes nothing.
struct SequenceView {
  AttentionArgs args;
  AttentionHeadBases bases;
};
SequenceView varlen_sequence(const AttentionArgs& a, const VarlenArgs& v, const Value& off_hz,
                             const Value& m0);

// The backward's bases of query head `off_h` in sequence `s` (attention_bwd_bases's, offset to the sequence's
// first row and key; row0 = h · TOTAL_Q + the first row).
AttentionBwdBases varlen_bwd_bases(const AttentionBwdArgs& a, const SequenceSpan& s, const Value& off_h);

} // namespace kiln
