// Pass: how each atomic_add through a block pointer (OpKind::AtomicAddBlock) is issued, and the shared memory its
// stage takes (LoweringPlan::bulk).
//
// On sm_90, with the TMA unit enabled (CodegenOptions::tma), an f32 block of rank 1 or 2 whose rows along its
// contiguous dim are 16 bytes or more goes through shared memory: the threads write the block to a stage, and
// bulk reductions (cp.reduce.async.bulk .add.f32) add it to global memory while the threads go on, one for the
// whole block where the tensor's rows are contiguous and the block lies inside, else one a row
// (FlashAttention-3 accumulates dQ so). Its sums land asynchronously, so the pass takes this path only where no
// load of the kernel reads through the same base pointer parameter (a program cannot see its own adds late). A
// row the launch cannot reduce in bulk (misaligned, a stride other than 1 along the row, a boundary that cuts it
// at other than a multiple of 4 elements) is added element by element from the stage. Everything else adds
// element by element from registers (`red`), each op's reason kept for `--stage lowered`: so does a block whose
// stage would not fit in shared memory beside the kernel's tiles and scratch, or would keep the CTAs that the
// config's MIN_BLOCKS_PER_SM asks to share an SM from fitting there.
//
// In a warp-specialised sm_90a kernel (CodegenOptions::tma_reductions, swizzle on) a 2-D row-major block of at most
// 256 rows whose rows are a swizzled line's multiple, and whose block pointer traces to a make_block_ptr a tensor
// map describes (block_tensor_maps.h), takes TMA reductions instead: its stage is a tile of kiln's shared format
// (128-byte panels, swizzled chunks, on a 1024-byte boundary), written at the places StageWrites::chunk_xor /
// byte_add give (no rotation: the swizzle spreads the rows over the banks), and one thread issues one
// cp.reduce.async.bulk.tensor .add a panel through the block's map (appended to TmaPlan::maps), which drops what
// lies past the tensor. A launch whose maps are illegal runs the kernel generated without warp specialisation, so
// with the bulk reductions; BulkReduction::why_not_tma says why a block did not take the path.
//
// Runs after plan_scratch: the stages follow the scratch, each as large as the largest block, shared by the ops in
// turn. Two where they fit (as the single stage must): the uses alternate between them, and a use's threads write
// their stage, wait until their previous use's reductions have read the other one, and pass one CTA barrier before
// the reductions are issued; the next use writes that other stage. With one stage, a use first waits for the
// previous reductions' reads and passes a barrier before it writes, then a second before it issues.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_bulk_reductions(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
