// Which shared tiles Hopper's Tensor Memory Accelerator copies instead of cp.async, and the tensor maps
// those copies read: what plan_tma_copies (and, for tiles loaded before the loops, plan_producer_tiles) decides,
// the emitter prints and a launch encodes.
//
// A block pointer is what a tensor map describes (base, shape, strides, box = block shape, order), so a
// pipelined block-pointer load whose block pointer the host can rebuild from the launch's arguments (its
// base a pointer parameter; its shape and strides parameters or constants) is copied by TMA: one thread
// issues one copy per 128-byte column panel of the tile, completing on the ring slot's mbarrier, and the
// hardware zero-fills what lies past the tensor. Whether the map is legal (alignment, strides) is known
// only at launch, so the kernel keeps its cp.async path behind a launch argument (`kiln_tma`) that the
// launch sets when every map encodes; a warp-specialised kernel keeps none, and a launch with illegal maps runs
// its unspecialised rendering (GeneratedKernel::illegal_maps_fallback).
#pragma once

#include "codegen/shared_tile_geometry.h"
#include "dsl/dtype.h"
#include "dsl/ir.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

struct Op;

// One integer of a tensor map known at launch: a constant times the values of integer parameters (none: the constant;
// one: a parameter's value; more where a per-program term's stride is a product, codegen/block_base.h: `(b * H + h)
// * N` is b at stride H * N and h at stride N).
struct LaunchScalar {
  std::vector<int> params; // indices into the kernel's parameters
  int64_t constant = 1;

  static LaunchScalar of_param(int index) { return {{index}, 1}; }
  static LaunchScalar of_constant(int64_t value) { return {{}, value}; }
};

// A dim of a tensor map beyond the block pointer's own: the block pointer's base is a pointer parameter plus
// `coordinate * stride` (a batch or head offset computed per program; codegen/block_base.h), so the map
// covers the whole tensor and each copy passes the coordinate. Its box is 1 element.
struct OuterDim {
  ValueId coordinate = -1; // a scalar of the kernel, |value| <= extent - 1 in every program
  LaunchScalar stride;     // elements
  int64_t extent = 0;      // the map's size along the dim (0 with extent_param)
  // >= 0: the coordinate is a minimum with this integer parameter (a cap the kernel writes: codegen/block_base.h),
  // so the map's size along the dim is the parameter's value + 1, known only at launch.
  int extent_param = -1;
  // The integer parameters that must be >= 0 at launch for the coordinate to be >= 0 in every program (empty:
  // it is whatever the arguments). A negative coordinate is legal pointer arithmetic, which cp.async reads
  // before the base but a tensor map would fill with zeros, so a launch that breaks one keeps cp.async.
  std::vector<int> nonneg_params;
};

// A tensor-map kernel parameter: how the launch builds it from the kernel's arguments. Per-dim vectors follow
// the block pointer's own dims; `outer` dims follow them, outside the block pointer's outermost.
struct TensorMapParam {
  int base_param = -1; // the pointer parameter that is the block pointer's base
  DType dtype = DType::f16;
  std::vector<LaunchScalar> shape, strides; // elements
  std::vector<int64_t> box;                 // elements per copy: the block, its contiguous dim cut to a line
  std::vector<int> order;                   // the block pointer's order: fastest-varying dim first
  std::vector<OuterDim> outer; // per-program terms of the base (empty: the base is the parameter)
  SwizzleMode swizzle = SwizzleMode::Bytes128;
  std::string source; // the make_block_ptr's DSL location, for messages
};

// How one TMA-copied load is issued.
struct TmaCopy {
  int map = 0;                 // index into TmaPlan::maps (the kernel's kiln_map<i> parameter)
  int panels = 1;              // copies per tile: one per 128-byte column panel
  int64_t panel_elems = 0;     // elements of the contiguous dim per panel (the box's inner dim)
  int64_t bytes_per_stage = 0; // transaction bytes the slot's mbarrier expects for this tile
};

// plan_producer_tiles: a shared tile the program loads once before its specialised loops (FA2's Q, dK/dV's K and V)
// copied by the warp-specialised producer by TMA, as FlashAttention-3 does, instead of by the consumers' cp.async
// with its address and bound arithmetic. Each tile has a full mbarrier a buffer (the producer's one arrival
// announcing the bytes; the copy completes it) on which the consumers wait where the program loads the tile. On a
// persistent grid the tile has two buffers (plan_prefetch_buffers), program turn k reading buffer k % 2, and an
// empty mbarrier a buffer that each consumer warp arrives on at the program's end; the producer waits for it before
// copying the tile of turn k + 2 into the buffer, so it copies a program's tile as soon as it has issued the
// previous program's ring copies, on a dynamic grid as on a static one.
struct ProducerTile {
  const Op* load = nullptr; // a top-level block load into a shared tile (not a loop's ring)
  TmaCopy copy;             // its map (in TmaPlan::maps), panels and bytes
};
struct ProducerTiles {
  std::vector<ProducerTile> tiles; // in program order; index i's barriers are kiln_tile_full[i * buffers + b]
  int buffers = 1;                 // 2 on a persistent grid
  std::string why_not;             // a tile loaded once before the loops that the consumers copy: why
  bool on() const { return !tiles.empty(); }
  // The index of `load`'s tile, or -1.
  int index_of(const Op* load) const {
    for (size_t i = 0; i < tiles.size(); ++i)
      if (tiles[i].load == load)
        return static_cast<int>(i);
    return -1;
  }
};

struct TmaPlan {
  std::vector<TensorMapParam> maps;
  std::map<const Op*, TmaCopy> copies;      // pipelined load -> its copy
  std::map<const Op*, int> loops;           // pipelined loop copied by TMA -> its ring's index
  std::map<const Op*, std::string> why_not; // pipelined loop whose loads stay on cp.async -> why
  int64_t barrier_bytes = 0;                // static shared memory of the rings' mbarriers (8 per slot)
  bool any() const { return !copies.empty(); }
};

} // namespace kiln
