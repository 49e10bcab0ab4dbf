// Pass: a second shared buffer for each tile a persistent program prefetches (PersistentPrefetch in
// codegen/lowering_plan.h). Runs after plan_bulk_reductions, the last pass that places shared memory: the second
// buffers go after everything else.
//
// With one buffer, a program copies the next program's tile (FA2's Q) once its own last reader is done, so the
// copy's latency runs under the epilogue alone, and where a program is only a few key tiles (short sequences) the
// next one waits for most of it. With two, the CTA's program of turn k reads buffer k % 2 and issues the next
// program's copy into the other buffer where it starts: right after the wait and barrier that publish its own tile
// (PersistentGrid::next_copies_after), when every consumer is past the program before, the other buffer's last
// reader. The copy then has a whole program to land. Where the producer copies the tiles (plan_producer_tiles.h)
// it fills buffer k % 2 for turn k itself, and the consumers only wait.
//
// Done where the grid is static or the producer copies the tiles (plan_producer_tiles.h; on a dynamic grid the
// consumers learn the next id near the program's end, too late to copy its tile early), the kernel is
// warp-specialised (its consumers issue no cp.async but these tiles', so waiting for a program's own tile does not
// wait for the next one's), every prefetched tile is waited for where it is loaded, CodegenOptions::prefetch_buffers
// is on, and the second buffers fit the block's shared memory and the CTAs an SM the grid runs. Otherwise
// PersistentGrid::why_not_second_buffers says why and the tiles keep one buffer.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "codegen/target.h"

namespace kiln {

void plan_prefetch_buffers(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
