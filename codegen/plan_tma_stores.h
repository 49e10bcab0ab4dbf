// Pass: which finished tiles a warp-specialised kernel stores by TMA (LoweringPlan::tma_stores), the tensor
// maps they take and the shared memory of their stage. Runs after plan_prefetch_buffers: the stage follows
// every other use of shared memory.
//
// A block store (OpKind::StoreBlock) goes through the stage on sm_90a, with TMA and swizzling on and the
// kernel warp-specialised, where the store is at the top of the program (its barriers need every consumer
// thread: not in a loop or a branch), the block is 2-D, row-major and of 16-bit elements held in registers as
// whole 8x8 fragments (stmatrix_store.h), its tile is one TMA writes whole (a swizzled line of 32, 64 or 128
// bytes, at most 256 rows), its block pointer traces to a make_block_ptr whose tensor a map can describe
// (block_tensor_maps.h), no load of the kernel reads through its base (the store lands asynchronously), and
// the stage fits beside the rest of the CTA's shared memory (and beside the CTAs MIN_BLOCKS_PER_SM asks to
// share an SM). The consumers write the tile to the stage by stmatrix, fence it for the async proxy, meet at
// their barrier, and one thread issues one TMA store per 128-byte panel; the tensor map drops what lies past
// the tensor, so no thread checks a bound. This replaces the register path's lane exchanges (the
// accumulator's 4-byte runs widened to 16) and its per-piece address and bound checks: FA2's epilogue was
// about 485 instructions a consumer warp, most of a key tile's worth at N = 1024 (worklog §106). A launch
// whose maps break a rule runs the kernel's unspecialised rendering, which stores from registers. Other
// stores keep the register path, each with its reason for `--stage lowered`.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_tma_stores(const Kernel& k, const Target& target, const CodegenOptions& options,
                     LoweringPlan& plan);

} // namespace kiln
