// kiln's code generator: a verified Kernel and its config in, CUDA C++ out.
//
// Lowering script (generate_cuda in codegen.cpp); the passes fill a LoweringPlan (codegen/lowering_plan.h)
// that the emitter only prints:
//   verify -> assign_layouts (register layouts, shared-memory operands, warp split, pipelined loads)
//          -> plan_shared_memory (tile offsets) -> choose_dot_lowering (wgmma / mma.sync / FMA, fused casts)
//          -> schedule_async_copies (products left in flight, loads waited for by a later loop)
//          -> plan_tma_copies (sm_90a loops whose tiles TMA copies, their tensor maps)
//          -> plan_warp_specialization (WARP_SPECIALIZE=1: a producer warpgroup for the TMA loop, setmaxnreg)
//          -> plan_pingpong (PINGPONG=1: the consumer warpgroups issue the loops' products in turn)
//          -> plan_products_ahead (PRODUCT_AHEAD=1: a loop's first product issued one iteration ahead)
//          -> plan_late_products (LAST_PRODUCT_LATE=1: a loop's last product issued after the next one's first)
//          -> plan_persistent_grid (PERSISTENT=1: one wave of CTAs walks the program ids)
//          -> analyze_contiguity (vector width of pointer-tensor accesses, hints included, block-store pieces)
//          -> plan_layout_conversions (every conversion between layouts: shared memory or register shuffles)
//          -> plan_scratch (scratch shared memory)
//          -> schedule_products (a loop body's products issued when their operands are ready, waited where read)
//          -> plan_bulk_reductions (sm_90a: block atomic adds through a stage and bulk reductions, the stage)
//          -> plan_unordered_reductions (reductions no read goes back to: no barrier before the next loads)
//          -> plan_rescale_skips (LAZY_RESCALE=1: a loop accumulator's rescale skipped where its factors are 1)
//          -> plan_exp2_on_fma (EXP2_ON_FMA=K: one exponential in K by the FMA pipe's polynomial)
//          -> plan_warp_uniform_scalars (sm_90a: scalar loads and wgmma loops' bounds shown warp-uniform to ptxas)
//          -> describe_plan (the lowered summary)
//          -> emit_cuda (prelude + one __global__ function)
#pragma once

#include "codegen/target.h"
#include "codegen/tma_plan.h"
#include "dsl/ir.h"
#include "support/error.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {

// A kernel's config may carry MIN_BLOCKS_PER_SM (default 1): the second __launch_bounds__ argument,
// which caps registers per thread so that that many CTAs can be resident on one SM; and WARP_SPECIALIZE
// (default 0): 1 asks for a producer warpgroup beside the num_warps consumer warps where the kernel allows
// one (codegen/plan_warp_specialization.h; the block then has 32 * num_warps + 128 threads); and PERSISTENT
// (default 0): 1 launches one wave of CTAs that walk the program ids, each every gridDim.x-th, 2 one whose CTAs draw
// their next program id from a counter (codegen/plan_persistent_grid.h); and
// PINGPONG (default 0): 1 has a warp-specialised kernel's consumer warpgroups issue their tensor-core products in
// turn (codegen/plan_pingpong.h); and PRODUCT_AHEAD (default 0): 1 has each specialised loop issue its first
// product one iteration ahead (codegen/plan_products_ahead.h); and LAST_PRODUCT_LATE (default 0): 1 has each
// specialised loop issue its last product after the next iteration's first (codegen/plan_late_products.h); and
// LAZY_RESCALE (default 0): 1 has a loop skip its accumulator's rescale by a row factor in a warp whose factors
// are all 1 (codegen/plan_rescale_skips.h); and EXP2_ON_FMA (default 0): K has one register in every K of an f32
// exp2 tile computed by a polynomial on the FMA pipe (codegen/plan_exp2_on_fma.h).
//
// Code-generator switches: each optimisation can be turned off to measure what it is worth.
struct CodegenOptions {
  bool tensor_cores = true;  // dot through mma.sync (else FMA on shared memory)
  bool swizzle = true;       // XOR-swizzled shared-memory operand tiles
  bool async_copy = true;    // cp.async staging of operand tiles (num_stages-deep when in a loop)
  bool vectorize = true;     // 16-byte global accesses where contiguity is proven
  bool wgmma = true;         // on sm_90a, dot through Hopper's warpgroup MMA where it applies (else mma.sync)
  bool tma = true;           // on sm_90a, pipelined block-pointer tiles copied by TMA where it applies (else cp.async)
  // on sm_90a, a producer warpgroup issuing a TMA loop's copies where the config asks (WARP_SPECIALIZE=1) and it
  // applies (else every thread issues them and waits at a CTA barrier each step)
  bool warp_specialize = true;
  bool persistent = true; // a persistent grid where the config asks (PERSISTENT=1) (else one CTA per program id)
  // warp-specialised kernels whose config asks (PINGPONG=1): the consumer warpgroups issue the loops' products in
  // turn (else each issues them as soon as it reaches them)
  bool pingpong = true;
  // warp-specialised kernels whose config asks (PRODUCT_AHEAD=1): each loop's first product issued one iteration
  // ahead (else where the program computes it)
  bool product_ahead = true;
  // warp-specialised kernels whose config asks (LAST_PRODUCT_LATE=1): each loop's last product issued after the
  // next iteration's first (else where the program computes it)
  bool late_product = true;
  // on sm_90a, a loop body's products waited for where the body first reads them, so that independent products and
  // the work between them run under them (else each right after its issue)
  bool product_schedule = true;
  // on sm_90a, scalar loads and the non-constant bounds of loops that issue wgmma read through a warp reduction, so
  // that ptxas knows them warp-uniform and does not put the kernel's products in series (else read plainly;
  // codegen/plan_warp_uniform_scalars.h)
  bool warp_uniform = true;
  // warp-specialised kernels whose config asks (TILE_BARRIERS=1): a full and an empty mbarrier per tile of a ring
  // slot (else one pair a slot; codegen/plan_tile_barriers.h)
  bool tile_barriers = true;
  // late products (LAST_PRODUCT_LATE=1) in sibling loops of one ring: the next loop issues the last iteration's late
  // products of the one before in its first iteration (else each loop issues its own after its end;
  // codegen/plan_late_products.h)
  bool late_across_loops = true;
  // static persistent grids of warp-specialised kernels whose programs prefetch the next one's tile (FA2's Q): a
  // second buffer for it, the next program's copy issued where this one starts (else one buffer, the copy issued
  // after this program's last read of it; codegen/plan_prefetch_buffers.h)
  bool prefetch_buffers = true;
  // on sm_90, the threads that write a block to a bulk-reduction stage take their registers in a lane-rotated order
  // where that spreads a warp's stores over more banks (else every lane in register order;
  // codegen/stage_write_banks.h)
  bool rotated_stage_writes = true;
  // on sm_90a, a wgmma product's A that is a shared tile loaded before the product's loop (dK/dV's K and V) read
  // into registers once before that loop, within a register budget (else read from shared memory by every
  // product; codegen/plan_register_operands.h)
  bool register_operands = true;
  // on sm_90a, warp-specialised kernels: a finished 16-bit tile stored through a block pointer (FA2's O, dK and dV,
  // a matmul's C) written to a shared stage by stmatrix and stored by TMA (else each thread stores its registers,
  // checked piece by piece; codegen/plan_tma_stores.h)
  bool tma_stores = true;
  // on sm_90a, warp-specialised kernels: a shared tile the program loads once before its loops (FA2's Q, dK/dV's K
  // and V) copied by the producer by TMA, into two buffers on a persistent grid, dynamic ones included (else by the
  // consumers' cp.async; codegen/plan_producer_tiles.h)
  bool producer_tiles = true;
  // on sm_90a, warp-specialised kernels: an atomic_add of an f32 block through a bulk-reduction stage (the fused
  // backward's dQ) written in kiln's swizzled shared format and added by TMA tensor reductions, one a 128-byte
  // panel (else the stage's rows lie as in the tensor, written in a rotated order and added by bulk reductions;
  // codegen/plan_bulk_reductions.h)
  bool tma_reductions = true;

  static constexpr int kSwitches = 21;
  int switches_off() const {
    return !tensor_cores + !swizzle + !async_copy + !vectorize + !wgmma + !tma + !warp_specialize + !persistent +
           !pingpong + !product_ahead + !late_product + !product_schedule + !warp_uniform + !tile_barriers +
           !late_across_loops + !prefetch_buffers + !rotated_stage_writes + !register_operands + !tma_stores +
           !producer_tiles + !tma_reductions;
  }
  bool all_on() const { return switches_off() == 0; }
  std::string str() const; // "tensor_cores=1 swizzle=1 ... producer_tiles=1 tma_reductions=1"
};

// What a launch needs besides the source: the entry point, the block size and dynamic shared memory.
struct GeneratedKernel {
  std::string name;         // the __global__ function's name
  std::string source;       // complete CUDA C++, prelude included
  int threads = 128;        // 32 * num_warps, plus a producer warpgroup's 128 when warp-specialised
  int shared_bytes = 0;     // dynamic shared memory per CTA
  int static_shared_bytes = 0; // its own __shared__ variables, padded by the dynamic region's alignment: 0 or 1024
  std::string lowered;      // a summary of the lowering decisions (layouts, smem, pipelining)
  // Tensor maps the kernel's TMA copies read: after the DSL parameters it takes one
  // `const __grid_constant__ kiln::TensorMap kiln_map<i>` per entry, then `int kiln_tma` (1: the maps are
  // valid, copy by TMA; 0: take the cp.async path). Empty: no extra parameters (jit/tensor_map_args.h).
  std::vector<TensorMapParam> tensor_maps;
  // How many of them the kernel's TMA stores write through (the last ones; codegen/plan_tma_stores.h); the others
  // are its copies' (loads).
  int tma_store_maps = 0;
  // How many of the loads' maps are those of tiles the producer copies once before the loops (FA2's Q;
  // codegen/plan_producer_tiles.h); the rest are the loops' rings'.
  int producer_tile_maps = 0;
  // A warp-specialised kernel copies by TMA alone (its producer keeps no cp.async path, so that its registers go
  // to the consumers): a launch whose maps are illegal runs this instead, the same kernel and config generated
  // without warp specialisation (JitKernel::launch compiles it when a launch first needs it). Null otherwise.
  std::shared_ptr<const GeneratedKernel> illegal_maps_fallback;
  // The config asks for WARP_SPECIALIZE=1 and the kernel or target does not allow it: why (the code is then the
  // WARP_SPECIALIZE=0 kernel's, so the autotuner prunes the config rather than time the same code twice).
  std::string why_not_warp_specialized;
  // A persistent grid (> 0): the launch starts at most this many CTAs an SM, and passes the grid's x size as one
  // more parameter, `int kiln_programs`, after the tensor maps' (jit/jit_kernel.cpp). 0: one CTA per program id.
  int persistent_ctas_per_sm = 0;
  // A dynamic persistent grid (PERSISTENT=2) takes one more, `int* kiln_program_counter`: an int in global memory
  // that is 0 when the launch starts, and that the launch's last draw sets back to 0 (kiln::draw_program).
  bool persistent_dynamic = false;
  std::string why_not_persistent; // PERSISTENT=1 and not done: why (pruned by the autotuner, as above)
  std::string why_not_pingpong;   // PINGPONG=1 and not done: why (pruned by the autotuner, as above)
  std::string why_not_product_ahead; // PRODUCT_AHEAD=1 and not done: why (pruned by the autotuner, as above)
  std::string why_not_late_product;  // LAST_PRODUCT_LATE=1 and not done: why (pruned by the autotuner, as above)
  std::string why_not_tile_barriers; // TILE_BARRIERS=1 and not done: why (pruned by the autotuner, as above)
};

// A config the target cannot run at all: shared tiles beyond the arch's per-block limit, or MIN_BLOCKS_PER_SM
// CTAs that cannot be resident on one of its SMs. Raised before the CUDA is emitted; the autotuner prunes such
// configs instead of counting them as failures.
class TargetLimitError : public Error {
public:
  using Error::Error;
};

// Throws TargetLimitError (naming the kernel, its config, what it needs and the arch's limit) before emitting
// anything when `k` exceeds `target`'s limits.
[[nodiscard]] GeneratedKernel generate_cuda(const Kernel& k, const Target& target,
                                            const CodegenOptions& options = {});

} // namespace kiln
