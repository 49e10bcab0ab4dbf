// How a scan (OpKind::Scan) runs on the GPU, decided before any CUDA is written: its tile is staged row-major
// in scratch shared memory (in its accumulator type), scanned there, and read back in the result's layout.
// The tile is `lines` independent lines of `len` elements, `stride` apart along the axis. With at least as
// many lines as threads, each thread scans whole lines one after another; otherwise each line is cut into
// `chunks` runs, one a thread: every thread scans its run, then adds the totals of the runs before it (three
// steps, each after a CTA barrier), so that a long line is not scanned by one thread.
#pragma once

#include "dsl/ir.h"

namespace kiln {

struct ScanSplit {
  // Element q of line l is at (l / stride) * len * stride + l % stride + q * stride, row-major.
  int64_t lines = 1, len = 1, stride = 1;
  int64_t chunks = 1; // runs a line is cut into (a power of two); 1: a thread a line
  int64_t run() const { return len / chunks; }
};

// The split of a scan of `scan`'s operand over `threads` threads: chunks near sqrt(len) (each thread then
// combines about 3 sqrt(len) elements) and at most threads / lines.
ScanSplit plan_scan(const Kernel& k, const Op& scan, int threads);

// The element type a scan combines in (and a sort stages in): f16/bf16 in f32, every other dtype in its own.
DType scan_accumulator(DType t);
// Bytes of scratch a scan (or a sort, op `scan` of kind Sort: its lines as plan_scan gives them) stages its
// tile in.
int64_t scan_scratch_bytes(const Kernel& k, const Op& scan);

} // namespace kiln
