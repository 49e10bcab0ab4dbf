// Pass: the shared tiles a warp-specialised program loads once before its loops (FA2's Q; dK/dV's K and V)
// copied by the producer by TMA (ProducerTiles in codegen/lowering_plan.h). Runs after plan_prefetch_buffers
// (a persistent grid's second buffers) and before plan_tma_stores (whose stage goes after everything else).
//
// FlashAttention-3's order: the producer copies the query tile before the key ring's first slots, so the
// consumers start a program with one mbarrier wait (and their barrier after it: ptxas serialises the products
// after a wait's loop otherwise, C7520) instead of computing the tile's addresses and bounds and issuing
// cp.async themselves (worklog §106 counted 296 SASS instructions a consumer warp there), and on a persistent
// grid the producer, which walks the program ids ahead of the consumers, copies the next program's tile into
// the other buffer without waiting for the consumers to learn that id. That also gives a dynamic grid two
// buffers.
//
// A tile qualifies where CodegenOptions::producer_tiles is on, the kernel is warp-specialised, the load is at
// the top of the program before the first specialised loop, TMA can copy the tile (why_no_tma_copy_of_tile)
// through its block pointer's map (tensor_map_for), no other tile shares its bytes, the tensor is one the
// kernel never writes (the producer copies it early), the producer can compute the block pointer
// (top_level_scalar_slice), and, on a persistent grid, the tile has a second buffer (with one, the producer
// would wait for this program's end before copying the next program's ring). Otherwise ProducerTiles::why_not
// says why and the consumers copy it as before.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

#include <string>

namespace kiln {

void plan_producer_tiles(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

// Why the producer cannot copy `load`'s tile, the second buffer aside ("" when it can). plan_prefetch_buffers
// asks it before giving a dynamic grid's prefetched tiles two buffers.
std::string why_not_producer_tile(const Kernel& k, const CodegenOptions& options, const LoweringPlan& plan,
                                  const Op& load);

} // namespace kiln
