// The lowering plan: every decision the code generator's passes make about a kernel, recorded before any
// CUDA is written, so that the emitter only prints it and `kiln emit --stage lowered` (describe_plan) can show
// it. The passes, in the order plan_lowering (codegen.cpp) runs them:
//   assign_layouts          placement and register layout of every value, shared operand tiles, the warp
//                           split, pipelined loads
//   plan_shared_memory      byte offsets of the shared tiles
//   choose_dot_lowering     the instruction of each dot, fused casts of register operands
//   schedule_async_copies   products left in flight across iterations, loads whose wait a later loop covers
//   plan_tma_copies         pipelined loops whose tiles TMA copies (sm_90a), the tensor maps they read
//   plan_warp_specialization a producer warpgroup that only issues the TMA loops' copies (WARP_SPECIALIZE=1),
//                           the consumers' barriers, the registers each side keeps (setmaxnreg)
//   plan_pingpong           the consumer warpgroups take turns issuing the specialised loops' products
//                           (PINGPONG=1), so one's softmax runs beside another's tensor-core work
//   plan_products_ahead     each specialised loop's first product issued one iteration ahead (PRODUCT_AHEAD=1),
//                           so that it runs on the tensor cores under the rest of the iteration
//   plan_late_products      each specialised loop's last product issued after the next iteration's first
//                           (LAST_PRODUCT_LATE=1), so that the next softmax runs under it
//   plan_tile_barriers      a full and an empty mbarrier per tile of a ring slot (TILE_BARRIERS=1)
//   plan_persistent_grid    one wave of CTAs that walk the program ids (PERSISTENT=1, or 2: drawn from a counter)
//   analyze_contiguity      the vector width of global accesses through pointer tensors (hints included), the
//                           pieces block stores are written in
//   plan_layout_conversions every layout conversion: the value, the op that reads it, from and to layouts,
//                           through shared memory (with its scratch) or by register shuffles
//   plan_scratch            the scratch shared memory after the tiles
//   schedule_products       the loop bodies' products issued as early as their operands allow and waited for
//                           where the body first reads them, so that independent products and the work between
//                           them overlap
//   plan_bulk_reductions    atomic adds through block pointers made from a shared-memory stage by bulk
//                           reductions (sm_90), or, warp-specialised, by TMA reductions of a swizzled stage, the
//                           stage after the scratch
//   plan_prefetch_buffers   a second buffer for a persistent program's prefetched tile (FA2's Q)
//   plan_producer_tiles     tiles loaded once before the specialised loops (FA2's Q) copied by the producer by TMA
//   plan_tma_stores         finished 16-bit tiles of warp-specialised kernels stored by TMA from a shared stage
//                           after everything else (sm_90a)
//   plan_unordered_reductions reductions no read of the kernel goes back to, left unordered
//   plan_rescale_skips      loop accumulators rescaled by a row factor that skip the multiply where a
//                           warp's factors are all 1 (LAZY_RESCALE=1)
//   plan_exp2_on_fma        f32 exp2 tiles with one register in every K computed by a polynomial on the FMA
//                           pipe (EXP2_ON_FMA=K)
//   plan_register_operands  wgmma A operands loaded into shared memory before a loop, read into registers once
//                           before it, so that its products read only B from shared memory
//   plan_warp_uniform_scalars scalar loads and the bounds of loops that issue wgmma, read through a warp
//                           reduction so that ptxas knows them warp-uniform and does not put products in series
#pragma once

#include "codegen/bulk_reduction_plan.h"
#include "codegen/layout.h"
#include "codegen/shared_tile_geometry.h"
#include "codegen/stmatrix_store.h"
#include "codegen/tma_plan.h"
#include "dsl/ir.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln {

// One global access through a tensor of pointers (a load, store or atomic add).
struct AccessPlan {
  int vector = 1;           // registers per access (consecutive elements); 1: element by element
  bool aligned = false;     // the addresses are known aligned to the vector (no run-time check)
  bool reduce_only = false; // an atomic add whose old values nothing reads: a reduction (red)
};

// A block-pointer store of a register tile, or a block-pointer load into one: in pieces of `piece` consecutive
// elements along the block's contiguous dim (one st.global / ld.global each where the piece is aligned and
// inside the tensor, element by element where not), or element by element throughout (piece 0). A piece may
// be a single 4- or 8-byte element.
struct BlockAccessPlan {
  int piece = 0;
};

enum class DotInstruction : uint8_t { Fma, MmaSync, Wgmma };
const char* dot_instruction_name(DotInstruction i); // "fma", "mma.sync", "wgmma"

struct DotPlan {
  DotInstruction instruction = DotInstruction::Fma;
  // On a target with wgmma, why a 16-bit dot stayed on mma.sync ("" otherwise).
  std::string why_not_wgmma;
};

enum class Placement : uint8_t { Scalar, BlockPtr, Flexible, Registers, Shared, None };

// A block-pointer load kept in shared memory: `rows` x `cols` in memory order (cols contiguous).
struct SharedTile {
  ValueId value = kNoValue;
  const Op* load = nullptr;
  int64_t rows = 0, cols = 0;
  int elem_bytes = 2;
  int contig_dim = 1;               // the logical dim of the loaded block that is contiguous in memory
  int stages = 1;                   // ring depth when pipelined
  int64_t offset = 0;               // bytes from the start of dynamic shared memory
  std::vector<const Op*> loop_nest; // every for op around the load, outermost first
  // A streaming loop's block load into registers, staged through this ring (the loop has no dot operand tiles):
  // cp.async fills the slots ahead as for a dot operand, and the load reads its slot into its register layout.
  bool to_registers = false;
  // The widest swizzle line (SharedTileGeometry::line_cap): 128 bytes, narrower where choose_dot_lowering lets a
  // warpgroup's slice of an N-major wgmma operand be whole lines.
  int64_t line_cap = 128;

  int64_t bytes_per_stage() const { return rows * cols * elem_bytes; }
  // Whether this tile's stages and `other`'s share a byte of shared memory.
  bool overlaps(const SharedTile& other) const {
    return offset < other.offset + other.bytes_per_stage() * other.stages &&
           other.offset < offset + bytes_per_stage() * stages;
  }
  // The innermost for op around the load (nullptr: none).
  const Op* loop() const { return loop_nest.empty() ? nullptr : loop_nest.back(); }
  SharedTileGeometry geometry(bool swizzled = true) const { return {rows, cols, elem_bytes, swizzled, line_cap}; }
};

// How a register tile moves from one layout to another.
enum class ConversionMethod : uint8_t {
  SharedMemory,     // every thread writes what it holds to scratch, a barrier, each reads what it needs
  RegisterShuffles, // register bits traded with lane bits by warp shuffles (no shared memory, no barrier)
  // A wgmma product's register A operand not in the A layout (the fused backward's dS for dQ): every thread
  // writes what it holds to scratch laid out as a K-major operand tile (shared_tile_geometry.h), a barrier, and
  // the product reads A through a descriptor; no thread holds the operand in registers.
  SharedOperand,
};
const char* conversion_method_name(ConversionMethod m); // "through shared memory", "by register shuffles"

// One layout conversion the emitter performs: `value` (in registers, or recomputed in `from`) is read by
// `user` in `to`. The user is the op whose DSL line needs it (a yield for a loop's or an if's carried value).
struct LayoutConversion {
  ValueId value = kNoValue;
  const Op* user = nullptr;
  Layout from, to;
  ConversionMethod method = ConversionMethod::SharedMemory;
  int64_t scratch_bytes = 0;           // SharedMemory, SharedOperand: the scratch the round trip needs
  std::vector<LaneRegisterSwap> swaps; // RegisterShuffles: the lane/register exchanges, in order
  // SharedMemory: the outermost loop around `user` that does not define `value`: the conversion is made once
  // before that loop instead of every iteration (nullptr: where the user reads it).
  const Op* hoisted_before = nullptr;
  // SharedOperand: the threads write their registers by stmatrix where they are whole 8x8 fragments
  // (codegen/stmatrix_store.h); empty: one store an element.
  std::optional<StmatrixStore> stmatrix = std::nullopt;

  SourceLoc loc() const { return user->loc; }
};

// A producer warpgroup that issues nothing but the copies of the kernel's TMA-copied loops, while the kernel's
// num_warps warps (the consumers, threads [0, consumer_threads)) run the program without issuing a copy: they
// wait on the ring slot's full barrier and release the slot on its empty barrier, and their CTA barriers become
// a named barrier of consumer_threads. The producer (threads [consumer_threads, +128)) recomputes the scalars
// the loops' bounds and block pointers need, then walks the loops' iterations in program order. Several loops
// (FA2's unmasked and masked key loops) share one ring: their tiles occupy the same bytes, so one sequence of
// full/empty barriers orders every fill after the release of the slot's previous use, across the loops.
struct WarpSpecialization {
  static constexpr int kProducerThreads = 128;
  std::vector<const Op*> loops;        // the loops whose copies the producer issues, in program order; empty: not
                                       // specialised
  std::vector<const Op*> producer_ops; // top-level scalar ops before the last loop the producer recomputes, in order
  int consumer_threads = 0;
  // setmaxnreg targets (0: registers are not reallocated): the producer releases down to producer_registers,
  // the consumers take up to consumer_registers, from entry_registers (what __launch_bounds__ caps at entry).
  int entry_registers = 0, producer_registers = 0, consumer_registers = 0;
  std::string why_not; // asked for (WARP_SPECIALIZE=1) and not done: why
  // plan_tile_barriers: each tile of a slot has its own full and empty mbarrier (TILE_BARRIERS=1), so the producer
  // refills a tile once its own readers are done and the consumers wait for a tile where it is loaded; asked for
  // and not done: why.
  bool tile_barriers = false;
  std::string why_not_tile_barriers;

  bool on() const { return !loops.empty(); }
  // Why a kernel is not specialised, for the passes that need it (ping-pong, products ahead).
  std::string why_off() const { return why_not.empty() ? std::string("WARP_SPECIALIZE=0") : why_not; }
  bool specializes(const Op* loop) const { return std::find(loops.begin(), loops.end(), loop) != loops.end(); }
  int threads() const { return consumer_threads + (on() ? kProducerThreads : 0); }
};

// Ping-pong between consumer warpgroups (FlashAttention-3's schedule): each tensor-core product of the
// specialised loops is issued by one warpgroup at a time, in a fixed rotation 0, 1, ..., G-1, 0, ... With FA2's
// two products an iteration, the tensor cores run warpgroup 1's Q Kᵀ while warpgroup 0 computes its softmax, then
// warpgroup 0's P V while warpgroup 1 computes its own, so the exponentials no longer leave them idle. The turn
// is a named barrier per warpgroup (kFirstBarrier + g, 2 · 128 threads): warpgroup g waits at its own before a
// product's first wgmma and, once the product is committed, arrives at the next warpgroup's. Warpgroup 0 gives
// itself the first turn and takes the last one back at the end, so every barrier ends with no arrival pending.
// The products' order per warpgroup is unchanged: results are the same bits as without the turns.
struct PingPong {
  static constexpr int kFirstBarrier = 2; // 0 is __syncthreads', 1 the consumers' (WarpSpecialization)
  std::unordered_set<const Op*> dots;     // the products issued in turn; empty: no ping-pong
  int warpgroups = 0;                     // consumer warpgroups taking turns
  std::string why_not;                    // asked for (PINGPONG=1) and not done: why

  bool on() const { return !dots.empty(); }
};

// Products issued one iteration ahead (FlashAttention-3's intra-warpgroup overlap): in a specialised loop whose
// first product reads only loop-invariant A, one of the loop's ring tiles as B and a constant accumulator (FA2's
// S = Q Kᵀ), iteration i issues iteration i + 1's product right after taking its own, waiting for its slot
// first, and does not wait for it: it runs on the tensor cores while iteration i computes its softmax and P V.
// The first iteration's product is issued before the loop. Results are the same bits: each product is the same
// instructions on the same tiles, only issued earlier.
struct ProductsAhead {
  std::map<const Op*, const Op*> dots; // specialised loop -> its product issued ahead; empty: none
  std::string why_not;                 // asked for (PRODUCT_AHEAD=1) and not done: why

  bool on() const { return !dots.empty(); }
  const Op* loop_of(const Op& dot) const {
    for (const auto& [loop, d] : dots)
      if (d == &dot)
        return loop;
    return nullptr;
  }
};

// A persistent grid: the launch starts at most ctas_per_sm CTAs an SM, and each runs the program for program
// ids below the grid's size, which the kernel takes as `kiln_programs`; program_id(0) and num_programs(0) read
// those. With PERSISTENT=1 (static) a CTA takes ids blockIdx.x, blockIdx.x + gridDim.x, ...; with PERSISTENT=2
// (dynamic) it takes blockIdx.x first, then each next id from a counter in global memory (`kiln_program_counter`,
// which the launch passes), so that the CTA that finishes first takes the next program: the ids still start in
// increasing order, and a CTA that drew heavy tiles draws fewer. A warp-specialised kernel's producer walks the
// same ids (it draws them, and hands them to the consumers through a two-slot ring in shared memory), so it fills
// the next program's ring while the consumers finish the last one's epilogue.
//
// A shared tile the program loads once, before its loops (FA2's Q), is prefetched across programs: the program
// issues the next program's copy as soon as its own last reader of the tile is done (before its epilogue), so
// that the copy's latency runs under the epilogue and the next program finds the tile landed. The first program
// a CTA runs issues its own.
//
// Where plan_prefetch_buffers gives the tile a second buffer (second_offset >= 0), the CTA's program of turn k reads
// buffer k % 2, and the next program's copy goes into the other one where this program starts
// (PersistentGrid::next_copies_after) instead of after issue_after: the copy has a whole program to land.
struct PersistentPrefetch {
  const Op* load = nullptr;         // a top-level block load into a shared tile (not a loop's ring)
  const Op* issue_after = nullptr;  // the last top-level op that reads the tile: the next copy goes after it
  std::vector<const Op*> slice;     // the top-level scalar ops the load's block pointer needs, in program order
  int64_t second_offset = -1;       // the second buffer's bytes from kiln_smem; -1: one buffer
  bool double_buffered() const { return second_offset >= 0; }
};
struct PersistentGrid {
  bool on = false;
  int asked = 0;        // the config's PERSISTENT (1 static, 2 dynamic), also where it is not done (why_not)
  int ctas_per_sm = 1;
  std::string why_not; // asked for (PERSISTENT=1 or 2) and not done: why
  std::vector<PersistentPrefetch> prefetches;
  std::string why_not_prefetch; // a shared tile loaded before the loops that is not prefetched: why
  // plan_prefetch_buffers: the last top-level load of a shared tile the program makes before its loops; with second
  // buffers the next program's copies are issued right after it (its wait and barrier passed). Shared bytes up to
  // the end of the second buffers (0: none), and why the prefetched tiles keep one buffer, where they do.
  const Op* next_copies_after = nullptr;
  int64_t second_buffers_end = 0;
  std::string why_not_second_buffers;
  // A dynamic grid: ids drawn from kiln_program_counter (PERSISTENT=2, and done).
  bool dynamic() const { return on && asked == 2; }
  const PersistentPrefetch* prefetch_of(const Op* load) const {
    for (const PersistentPrefetch& p : prefetches)
      if (p.load == load)
        return &p;
    return nullptr;
  }
};

// How a finished 16-bit tile stored through a block pointer (OpKind::StoreBlock) goes out by TMA (plan_tma_stores):
// the consumers write it by stmatrix to the store stage, a tile of kiln's shared format (rows x cols at
// stage_offset, 128-byte panels), and one thread stores the panels through tensor map `map`, which drops what lies
// past the tensor. The kernel's TMA stores share the stage; a use that an earlier store may still be reading from
// waits for it first.
struct TmaStore {
  int map = 0;             // index into TmaPlan::maps
  int panels = 1;          // one TMA store per 128-byte column panel
  int64_t panel_elems = 0; // elements of the contiguous dim per panel (the box's inner dim)
  int64_t rows = 0, cols = 0;
  StmatrixStore writes;        // how the threads write the stage
  bool waits_for_stage = true; // an earlier store (this program's, or the previous program's) may read the stage
};
struct TmaStores {
  std::map<const Op*, TmaStore> ops;
  std::map<const Op*, std::string> why_not; // block stores that stay stores from registers: why
  int64_t stage_offset = 0;                 // bytes from kiln_smem, after every other use of shared memory
  int64_t stage_bytes = 0;                  // the largest stored tile's
  bool any() const { return !ops.empty(); }
  int64_t end() const { return any() ? stage_offset + stage_bytes : 0; } // shared bytes up to the end
};

// How a pipelined load's block pointer moves: the loop carries it as carried value `carried` (body arg
// carried + 1, loop operand 3 + carried) and its yield is `advance`, whose steps are loop-invariant.
struct PipelinedStep {
  size_t carried = 0;
  const Op* advance = nullptr;
};

// A loop's last product issued late, after the next iteration's first (FlashAttention-3's intra-warpgroup
// overlap, in the order its paper gives): in a specialised loop whose first product needs nothing the iteration
// computes (FA2's S = Q Kᵀ) and whose last product accumulates into a carried value from a register A and a
// ring tile (FA2's O += P V), iteration j packs its last product's A (P_j) into words carried to iteration
// j + 1, which issues S_{j+1}, then P_j V_j, waits for S_{j+1} alone and runs its softmax while P_j V_j is on
// the tensor cores; it waits for P_j V_j before the first op that reads the carried value (FA2's rescale of O)
// and only then hands slot j back to the producer. The loop's last iteration's product is issued after the loop.
// Results are the same bits: each product is the same instructions on the same operands, issued later.
struct LateProduct {
  // The loop's first products (issued, then the previous iteration's last ones): one, or a chain in which each
  // accumulates onto the one before (Q Kᵀ over two head-dim tiles).
  std::vector<const Op*> first;
  // The loop's last products, each issued in the next iteration (or after the loop): one, or one per
  // accumulator (P V into two head-dim tiles).
  std::vector<const Op*> last;
  const Op* first_reader = nullptr; // the first op after `first` that reads a carried value: waits before it
  std::vector<size_t> carried;      // which of the loop's carried values each of `last` yields
  // plan_tile_barriers: the loop's pipelined loads whose tiles only `first` reads (FA2's K), handed back right after
  // the first products' wait instead of with the late products' tiles an iteration later.
  std::vector<const Op*> released_after_first;
  // One pipeline across sibling loops (FA2's unmasked and masked key tiles): `continued_by`, the next loop of the same
  // region, issues this loop's last iteration's late products in its first iteration, after its own first products,
  // instead of this loop issuing them after its end with nothing beside them; `continues` is the reverse link. The
  // later loop's ring starts at the slot the earlier one stopped at, on both sides. Null: none.
  const Op* continued_by = nullptr;
  const Op* continues = nullptr;
};
struct LateProducts {
  std::map<const Op*, LateProduct> loops; // specialised loop -> its products; empty: none
  std::string why_not;                    // asked for (LAST_PRODUCT_LATE=1) and not done: why
  // Sibling loops with late products that do not continue one another (LateProduct::continued_by): why, the first
  // pair's reason; empty where every such pair is one pipeline or no loop has a sibling.
  std::string why_not_across_loops;

  bool on() const { return !loops.empty(); }
  // Whether `dot` is one of a loop's first or late products (their issue order is planned).
  bool plans(const Op& dot) const {
    for (const auto& [loop, p] : loops)
      if (std::find(p.first.begin(), p.first.end(), &dot) != p.first.end() ||
          std::find(p.last.begin(), p.last.end(), &dot) != p.last.end())
        return true;
    return false;
  }
  const LateProduct* of_first(const Op& dot) const {
    for (const auto& [loop, p] : loops)
      if (std::find(p.first.begin(), p.first.end(), &dot) != p.first.end())
        return &p;
    return nullptr;
  }
};

// schedule_products (codegen/schedule_products.h): in loop bodies, wgmma products issued as early as their operands
// allow (right after an earlier op instead of where the program computes them) and left in flight at their issue;
// each is waited for where the body first needs it done: `wgmma_wait<pending>` before an op that reads it (the
// products committed after it stay in flight), or at the end of its loop's body.
struct ProductWait {
  int pending = 0;                // the n of wgmma_wait<n>: products that stay in flight
  std::vector<const Op*> retired; // the products this wait finds done, oldest first
};
struct ProductSchedule {
  // loop -> its body's ops in the order they are emitted, where a product moved up (absent: program order)
  std::map<const Op*, std::vector<const Op*>> order;
  std::map<const Op*, const Op*> issued_after;        // product moved up -> the op it is issued right after
  std::unordered_set<const Op*> in_flight;            // products not waited for at their issue
  std::map<const Op*, ProductWait> before;            // op -> the wait emitted before it
  std::map<const Op*, std::vector<const Op*>> at_end; // loop -> products its body ends waiting for

  // `loop`'s body's ops in the order they are emitted.
  std::vector<const Op*> body_order(const Op& loop) const {
    if (auto it = order.find(&loop); it != order.end())
      return it->second;
    std::vector<const Op*> ops;
    for (const auto& op : loop.regions[0].ops)
      ops.push_back(op.get());
    return ops;
  }
  bool stays_in_flight(const Op& dot) const { return in_flight.count(&dot) > 0; }
  const ProductWait* before_op(const Op& op) const {
    auto it = before.find(&op);
    return it == before.end() ? nullptr : &it->second;
  }
};

// Multiplies of a loop's dot accumulator by a broadcast row factor that a warp skips when every factor its threads
// hold is exactly 1 (codegen/plan_rescale_skips.h): the online softmax's O *= exp2(m_old − m_new) under a running max that
// moves only by jumps (LAZY_RESCALE=1). The same bits either way (x · 1 = x).
struct RescaleSkip {
  ValueId factor = kNoValue;   // the vector the multiply broadcasts (in registers, read in its own layout)
  int accumulator_operand = 0; // which operand of the multiply is the carried accumulator
};
struct RescaleSkips {
  std::map<const Op*, RescaleSkip> ops; // the multiplies
  std::string why_not;                  // asked for (LAZY_RESCALE=1) and no multiply matched: why

  const RescaleSkip* of(const Op& mul) const {
    auto it = ops.find(&mul);
    return it == ops.end() ? nullptr : &it->second;
  }
};

// plan_exp2_on_fma (codegen/plan_exp2_on_fma.h): f32 exp2 tiles in registers of which register r is computed by
// kiln::ex2_fma (codegen/prelude/kiln_ex2_fma.cuh) where r % every == every - 1, by ex2.approx elsewhere.
struct Exp2OnFma {
  int every = 0;                  // EXP2_ON_FMA; 0: none
  std::set<const Op*> ops;        // the exp2 ops split so
  std::string why_not;            // asked for and no exp2 matched: why
  bool splits(const Op& op) const { return ops.count(&op) > 0; }
};

// plan_register_operands (codegen/plan_register_operands.h): shared A operands of wgmma products read into
// registers (ldmatrix, in wgmma's register-A fragment) once before a loop in which they do not change.
struct RegisterOperands {
  struct Operand {
    ValueId value = kNoValue; // the dots' A (a shared value)
    WarpSplit split;          // the warps of every product that reads it (the fragments' rows follow from it)
    int registers = 0;        // 32-bit registers a thread holds
  };
  std::map<const Op*, std::vector<Operand>> before; // loop -> the operands read right before it
  std::set<const Op*> products;                     // the products that read their A from those registers
  std::string why_not;                              // the products' shared A left in shared memory: why
  const std::vector<Operand>* before_loop(const Op& loop) const {
    auto it = before.find(&loop);
    return it == before.end() ? nullptr : &it->second;
  }
};

// plan_warp_uniform_scalars (codegen/plan_warp_uniform_scalars.h): scalars passed through kiln::warp_uniform outside a
// producer warpgroup, so that ptxas sees them warp-uniform and keeps the kernel's wgmma products overlapped.
struct WarpUniformScalars {
  std::unordered_set<const Op*> loads;                          // scalar loads
  std::unordered_map<const Op*, std::vector<int>> loop_bounds; // loops issuing wgmma: operand indices of their
                                                                // non-constant bounds (0 lo, 1 hi)
  bool load(const Op& op) const { return loads.count(&op) > 0; }
  const std::vector<int>* bounds_of(const Op& loop) const {
    auto it = loop_bounds.find(&loop);
    return it == loop_bounds.end() ? nullptr : &it->second;
  }
};

struct LoweringPlan {
  std::unordered_map<ValueId, Placement> placement;
  std::unordered_map<ValueId, Layout> layout; // Registers values
  std::vector<SharedTile> tiles;
  std::unordered_map<ValueId, int> tile_of;     // Shared values -> tiles index (through trans too)
  std::unordered_map<ValueId, bool> transposed; // Shared values reached through an odd number of trans
  std::map<const Op*, std::vector<const Op*>> pipelined; // for op -> its pipelined loads, in order
  std::map<const Op*, PipelinedStep> pipelined_steps;     // pipelined load -> how its block pointer moves
  // How the warps share the kernel's mma tiles. A dot with fewer rows than `warps` spreads over (dK/dV's
  // atomic dQ, BLOCK_M rows against the key tiles' BLOCK_N) takes a split of its own: `dot_warps`.
  WarpSplit warps;
  std::unordered_map<const Op*, WarpSplit> dot_warps;
  const WarpSplit& warps_of(const Op& dot) const {
    auto it = dot_warps.find(&dot);
    return it == dot_warps.end() ? warps : it->second;
  }
  int num_warps = 4;
  int64_t tiles_bytes = 0; // shared memory for tiles; scratch follows

  // choose_dot_lowering: the instruction of every dot, and the f32 -> f16/bf16 casts packed straight into
  // a register A operand instead of being materialised.
  std::map<const Op*, DotPlan> dots;
  std::unordered_set<ValueId> fused_casts;
  // schedule_async_copies: matmul-style loops whose wgmma chain stays in flight (loop -> its dot), and shared
  // tiles loaded before a pipelined loop whose wait that loop's first wait covers.
  std::map<const Op*, const Op*> deferred_dots;
  std::unordered_set<const Op*> unwaited_loads;
  // plan_tma_copies: the pipelined loops whose tiles one thread copies by TMA onto mbarriers (with the
  // cp.async path kept for launches whose maps are illegal), and the kernel's tensor-map parameters.
  TmaPlan tma;
  // plan_warp_specialization: the producer/consumer split, when the config asks for it and the kernel allows it.
  WarpSpecialization ws;
  // plan_pingpong: the products the consumer warpgroups issue in turn.
  PingPong pingpong;
  // plan_products_ahead: the products issued one iteration ahead.
  ProductsAhead ahead;
  // plan_late_products: the products issued after the next iteration's first.
  LateProducts late;
  // schedule_products: loop bodies' products issued early and waited for where first needed.
  ProductSchedule products;
  // plan_persistent_grid: whether the program runs in a loop over program ids.
  PersistentGrid persistent;
  // analyze_contiguity: the width of every global access through pointer tensors, and the pieces block
  // stores of register tiles are written in and block loads into registers read in.
  std::map<const Op*, AccessPlan> accesses;
  std::map<const Op*, BlockAccessPlan> block_accesses;
  // plan_layout_conversions: every conversion between the layout a value is in and the layout an op reads it
  // in, in the order the emitter performs them (a conversion already made in an enclosing scope is reused,
  // and appears once).
  std::vector<LayoutConversion> conversions;
  // plan_scratch: bytes of shared memory after the tiles (at tiles_bytes) that conversions through shared
  // memory, cross-warp reductions and FMA operand staging reuse, one at a time.
  int64_t scratch_bytes = 0;
  // plan_bulk_reductions: the atomic adds through block pointers made from a shared-memory stage.
  BulkReductions bulk;
  // plan_producer_tiles: the tiles loaded before the loops that the producer copies by TMA.
  ProducerTiles producer_tiles;
  // plan_tma_stores: the finished tiles stored by TMA from a shared-memory stage.
  TmaStores tma_stores;
  // plan_unordered_reductions: the reductions through parameters no read of the kernel goes through, which no
  // barrier orders before the program's later loads.
  std::unordered_set<const Op*> unordered_reductions;
  // plan_rescale_skips: the accumulator rescales a warp skips where its factors are all 1.
  RescaleSkips rescale_skips;
  // plan_exp2_on_fma: the exp2 tiles one register in every `every` of which the FMA pipe computes.
  Exp2OnFma exp2_on_fma;
  // plan_register_operands: the shared A operands read into registers once before a loop.
  RegisterOperands register_operands;
  // plan_warp_uniform_scalars: the scalar loads and loop bounds shown to ptxas as warp-uniform.
  WarpUniformScalars uniform;
  // plan_scratch: the cross-warp reductions' slots at the start of the scratch, each reduction_slot_bytes long
  // (the largest such reduction's bytes, rounded up to 16): 1, or 2 when the kernel has two or more such
  // reductions, so that one can exchange its partial results in the slot the previous one still reads and
  // skip its leading barrier (Emitter::emit_reduce); 0 without cross-warp reductions.
  int64_t reduction_slot_bytes = 0;
  int reduction_slots = 0;

  Placement where(ValueId v) const { return placement.at(v); }
  int conversions_by(ConversionMethod m) const {
    int n = 0;
    for (const LayoutConversion& c : conversions)
      n += c.method == m;
    return n;
  }
  // How many iterations ahead a pipelined loop issues its tiles: one stage less when its product stays in
  // flight (the tile that product reads must not be overwritten).
  int lookahead(const Op* loop, int stages) const {
    return deferred_dots.count(loop) ? stages - 2 : stages - 1;
  }
  // The kernel's own __shared__ variables (the TMA rings' mbarriers; a dynamic persistent grid's program ids, with
  // their mbarriers where warp-specialised) as the dynamic region's 1024-byte alignment pads them: 0 or 1024 (what
  // ptxas reports as static shared memory), taken beside the dynamic bytes.
  int64_t static_shared_bytes() const {
    int64_t bytes = tma.barrier_bytes;
    if (persistent.dynamic())
      bytes += ws.on() ? 2 * 4 + 4 * 8 : 2 * 4; // emit_persistent_grid's program ring (and full/empty barriers)
    return (bytes + 1023) / 1024 * 1024;
  }
  // Whether `op` is a product on wgmma (choose_dot_lowering).
  bool on_wgmma(const Op& op) const {
    return op.kind == OpKind::Dot && dots.at(&op).instruction == DotInstruction::Wgmma;
  }
  bool any_wgmma() const {
    for (const auto& [dot, d] : dots)
      if (d.instruction == DotInstruction::Wgmma)
        return true;
    return false;
  }
  bool is_deferred_dot(const Op& dot) const {
    for (const auto& [loop, d] : deferred_dots)
      if (d == &dot)
        return true;
    return false;
  }
  // The first ring tile of pipelined loop `loop` (its stages are the ring's; its load is the one that waits).
  const SharedTile& ring_tile(const Op* loop) const { return tiles[tile_of.at(pipelined.at(loop).front()->result())]; }
  // The pipelined loop `load` is one of the loads of, or nullptr; and the load's place among them (its tile's
  // barriers under WarpSpecialization::tile_barriers).
  const Op* loop_of_pipelined(const Op* load) const {
    for (const auto& [loop, loads] : pipelined)
      if (std::find(loads.begin(), loads.end(), load) != loads.end())
        return loop;
    return nullptr;
  }
  int ring_tile_index(const Op* loop, const Op* load) const {
    const std::vector<const Op*>& loads = pipelined.at(loop);
    return static_cast<int>(std::find(loads.begin(), loads.end(), load) - loads.begin());
  }
  // The tiles a slot of the warp-specialised kernel's ring holds (every specialised loop copies as many:
  // plan_tile_barriers checks it where it gives each its own barriers).
  size_t ring_tiles_per_slot() const { return pipelined.at(ws.loops.front()).size(); }
  // The pipelined loop whose first load `load` is (the load that waits for the loop's slot), or nullptr.
  const Op* loop_waiting_at(const Op* load) const {
    const Op* loop = loop_of_pipelined(load);
    return loop && pipelined.at(loop).front() == load ? loop : nullptr;
  }
  bool is_pipelined(const SharedTile& t) const {
    for (const auto& [loop, loads] : pipelined)
      for (const Op* l : loads)
        if (l == t.load)
          return true;
    return false;
  }
  // The logical dim of shared value `v` that is contiguous in shared memory (its tile's, flipped by an
  // odd number of trans).
  int contiguous_dim(ValueId v) const {
    const SharedTile& t = tiles[tile_of.at(v)];
    return transposed.at(v) ? 1 - t.contig_dim : t.contig_dim;
  }
};

// The lowering script (codegen.cpp): every pass generate_cuda runs before it emits, in their order, over `k`. It
// plans a kernel whose tiles or threads cannot exist on `target` too (generate_cuda then refuses it), so that the
// plan's reasons can be read. Tests that read the plan as data run it, so that the order lives in one place.
struct CodegenOptions;
struct Target;
LoweringPlan plan_lowering(const Kernel& k, const Target& target, const CodegenOptions& options);

} // namespace kiln
