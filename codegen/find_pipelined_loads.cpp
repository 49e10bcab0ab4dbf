#include "codegen/find_pipelined_loads.h"

#include "codegen/plan_tma_copies.h"

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <vector>

namespace kiln {

namespace {

struct PipelinedLoadFinder {
  const Kernel& k;
  const Target& target;
  const CodegenOptions& options;
  LoweringPlan& plan;

  // How load `inner` of loop `body` moves its block pointer, when the loop carries it and advances it by a
  // loop-invariant step each iteration (what a pipelined load needs); nullopt otherwise.
  std::optional<PipelinedStep> pipelined_step(const Region& body, const Op& inner,
                                              const std::unordered_set<ValueId>& defined_inside) const {
    const Op& yield = *body.ops.back();
    ValueId bp = inner.operands[0];
    auto arg = std::find(body.args.begin() + 1, body.args.end(), bp);
    if (arg == body.args.end() || inner.padding != Padding::Zero) // the cp.async pipeline fills zeros
      return std::nullopt;
    const size_t carried = static_cast<size_t>(arg - body.args.begin() - 1);
    const Op* step = k.info(yield.operands[carried]).def;
    if (!step || step->kind != OpKind::Advance || step->operands[0] != bp)
      return std::nullopt;
    for (size_t i = 1; i < step->operands.size(); ++i) {
      const Op* def = k.info(step->operands[i]).def;
      if (defined_inside.count(step->operands[i]) && !(def && def->kind == OpKind::Constant))
        return std::nullopt;
    }
    return PipelinedStep{carried, step};
  }

  // A register block load staged through a loop's shared ring (SharedTile::to_registers): a 2-D tile (a
  // streaming loop's) or a vector (one row; a warp-specialised dot loop's) whose contiguous rows are whole 16-byte
  // chunks, the chunks cp.async copies.
  std::optional<SharedTile> staged_tile(const Op& load, const std::vector<const Op*>& nest) const {
    const Type& t = k.type(load.result());
    if ((t.rank() != 1 && t.rank() != 2) || dtype_bytes(t.elem) > 16)
      return std::nullopt;
    SharedTile tile;
    tile.value = load.result();
    tile.load = &load;
    tile.contig_dim = k.type(load.operands[0]).order[0];
    tile.cols = t.shape[tile.contig_dim];
    tile.rows = t.rank() == 1 ? 1 : t.shape[1 - tile.contig_dim];
    tile.elem_bytes = dtype_bytes(t.elem);
    tile.loop_nest = nest;
    tile.to_registers = true;
    if ((tile.cols * tile.elem_bytes) % 16 != 0)
      return std::nullopt;
    return tile;
  }

  // Whether the config asks for a producer warpgroup that plan_warp_specialization can give it on this target
  // (the rest of its rules are about the loops, which it checks later).
  bool asks_for_a_producer() const {
    return k.config.get_or("WARP_SPECIALIZE", 0) != 0 && target.sm >= 90 && target.arch_specific &&
           options.warp_specialize && options.tma && options.swizzle && k.config.num_warps % 4 == 0;
  }

  // Whether a dot loop's row vector is staged beside its tiles: where a producer warpgroup copies the ring, as one
  // TMA copy of the whole vector, which the consumers read at each use (LSE and Delta in the backward's dK/dV:
  // loaded into registers, each is 16-32 registers a thread and the arithmetic on them; worklog §88). Elsewhere
  // the consumers would issue the copies themselves, which measured slower than loading into registers.
  bool stages_vector(const SharedTile& t) const {
    return asks_for_a_producer() && why_no_tma_copy_of_vector(t).empty();
  }

  // Stages `loop`'s register block loads that advance by a loop-invariant step through its ring: a streaming
  // loop's 2-D ones (it has no dot operand tiles), or a dot loop's row vectors (stages_vector) that come after the
  // loop's first tile, whose load waits for the slot. Each follows the loop's tiles in its ring.
  void stage_register_loads(const Op& loop, int num_stages, std::vector<const Op*>& nest,
                            const std::unordered_set<ValueId>& defined_inside) {
    const Region& body = loop.regions[0];
    auto pit = plan.pipelined.find(&loop);
    const bool dot_loop = pit != plan.pipelined.end();
    const Op* waiting = dot_loop ? pit->second.front() : nullptr;
    bool after_wait = !dot_loop;
    std::vector<const Op*> staged;
    const Op& yield = *body.ops.back();
    nest.push_back(&loop);
    for (const auto& inner : body.ops) {
      after_wait |= inner.get() == waiting;
      if (!after_wait || inner->kind != OpKind::LoadBlock || plan.where(inner->result()) != Placement::Registers ||
          k.type(inner->result()).rank() != (dot_loop ? 1 : 2))
        continue;
      std::optional<PipelinedStep> step = pipelined_step(body, *inner, defined_inside);
      std::optional<SharedTile> tile = step ? staged_tile(*inner, nest) : std::nullopt;
      if (!tile)
        continue;
      tile->stages = num_stages;
      // A vector is read at its uses, all before the slot's release at the end of the body: one the loop carries
      // out would be read by the yield, after it.
      if (dot_loop && (!stages_vector(*tile) || std::count(yield.operands.begin(), yield.operands.end(),
                                                            inner->result()) != 0))
        continue;
      plan.tile_of[inner->result()] = static_cast<int>(plan.tiles.size());
      plan.tiles.push_back(*tile);
      staged.push_back(inner.get());
      plan.pipelined_steps[inner.get()] = *step;
    }
    nest.pop_back();
    if (!staged.empty()) {
      std::vector<const Op*>& loads = plan.pipelined[&loop];
      loads.insert(loads.end(), staged.begin(), staged.end());
    }
  }

  // Loads of a loop-carried block pointer advanced by a loop-invariant step, pipelined num_stages deep through
  // a shared ring: a loop's dot operand tiles, and its row vectors where a producer copies them
  // (stage_register_loads); in a loop that has no dot tiles (a streaming loop), its 2-D block loads into
  // registers. A staged 2-D load reads the ring into its register layout where the program loads it; a staged
  // vector is read at each use.
  void find_pipelined_loads(const Region& r, int num_stages, std::vector<const Op*>& nest) {
    for (const auto& op : r.ops) {
      if (op->kind == OpKind::For)
        nest.push_back(op.get());
      for (const Region& sub : op->regions)
        find_pipelined_loads(sub, num_stages, nest);
      if (op->kind == OpKind::For)
        nest.pop_back();
      if (op->kind != OpKind::For || num_stages < 2)
        continue;
      const Region& body = op->regions[0];
      std::unordered_set<ValueId> defined_inside(body.args.begin(), body.args.end());
      walk(body, [&](const Op& o) { defined_inside.insert(o.results.begin(), o.results.end()); });
      for (const auto& inner : body.ops) {
        if (inner->kind != OpKind::LoadBlock || plan.where(inner->result()) != Placement::Shared)
          continue;
        if (std::optional<PipelinedStep> step = pipelined_step(body, *inner, defined_inside)) {
          plan.pipelined[op.get()].push_back(inner.get());
          plan.pipelined_steps[inner.get()] = *step;
          plan.tiles[plan.tile_of.at(inner->result())].stages = num_stages;
        }
      }
      stage_register_loads(*op, num_stages, nest, defined_inside);
    }
  }
};

} // namespace

void find_pipelined_loads(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan) {
  std::vector<const Op*> nest;
  PipelinedLoadFinder{k, target, options, plan}.find_pipelined_loads(k.body, k.config.num_stages, nest);
}

} // namespace kiln
