#include "codegen/choose_dot_lowering.h"
#include "codegen/assign_layouts.h"
#include "codegen/choose_warp_splits.h"
#include "codegen/operand_layouts.h"
#include "codegen/find_pipelined_loads.h"

#include "codegen/wgmma.h"
#include "dsl/verifier.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <map>
#include <set>

namespace kiln {

namespace {

struct Assigner {
  const Kernel& k;
  const Target& target;
  const CodegenOptions& options;
  LoweringPlan plan;
  std::unordered_map<ValueId, std::vector<const Op*>> users;
  std::unordered_map<ValueId, const Op*> defs;
  std::unordered_map<const Op*, const Op*> loop_of_yield; // a for body's yield -> the for

  bool is_flexible(ValueId v) const {
    auto it = plan.placement.find(v);
    return it != plan.placement.end() && it->second == Placement::Flexible;
  }
  bool has_layout(ValueId v) const { return plan.layout.count(v) > 0; }

  void collect_users(const Region& r) {
    for (const auto& op : r.ops) {
      for (ValueId v : op->operands)
        users[v].push_back(op.get());
      for (ValueId v : op->results)
        defs[v] = op.get();
      for (const Region& sub : op->regions)
        collect_users(sub);
      if (op->kind == OpKind::For)
        loop_of_yield[op->regions[0].ops.back().get()] = op.get();
    }
  }

  // What `v` becomes when `u` carries it around a loop (u a for that takes it as an initial value, or the yield of
  // a for's body): the body's argument and the loop's result; nothing otherwise.
  std::vector<ValueId> carried_as(ValueId v, const Op& u) const {
    const Op* loop = u.kind == OpKind::For ? &u : nullptr;
    size_t first = 3; // a for's operands: lo, hi, step, then the initial values
    if (u.kind == OpKind::Yield) {
      auto it = loop_of_yield.find(&u);
      loop = it == loop_of_yield.end() ? nullptr : it->second;
      first = 0;
    }
    std::vector<ValueId> out;
    if (!loop)
      return out;
    for (size_t i = first; i < u.operands.size(); ++i)
      if (u.operands[i] == v) {
        out.push_back(loop->regions[0].args[i - first + 1]);
        out.push_back(loop->results[i - first]);
      }
    return out;
  }

  // A load whose every use is a dot operand (possibly through trans) can stay in shared memory.
  bool feeds_only_dots(ValueId v) const {
    auto it = users.find(v);
    if (it == users.end())
      return false;
    for (const Op* u : it->second) {
      if (u->kind == OpKind::Dot && (u->operands[0] == v || u->operands[1] == v) && u->operands[2] != v)
        continue;
      if (u->kind == OpKind::Trans && feeds_only_dots(u->result()))
        continue;
      return false;
    }
    return true;
  }

  // The layout a rank-1 block-pointer load should take so that no conversion follows it: a row or column
  // vector (LSE, Delta, a bias, LayerNorm's weight) that, through elementwise ops of its own shape, is
  // expanded to (1, C) or (R, 1) and then meets a (R, C) tile is loaded straight into the slice of that tile's
  // layout, as the broadcast will read it: a dot's accumulator layout where a dot makes tiles of that shape,
  // else the layout the tile's other operands give it (foreseen_layout). The uses are followed around loops
  // that carry the vector (a load a step ahead of its use). Several such uses must agree; otherwise none.
  std::optional<Layout> wanted_vector_layout(ValueId loaded) const {
    const Shape& shape = k.type(loaded).shape;
    if (shape.size() != 1)
      return std::nullopt;
    std::optional<Layout> wanted;
    bool conflict = false;
    std::vector<ValueId> todo{loaded};
    std::unordered_set<ValueId> seen;
    while (!todo.empty() && !conflict) {
      ValueId v = todo.back();
      todo.pop_back();
      if (!seen.insert(v).second)
        continue;
      auto it = users.find(v);
      if (it == users.end())
        continue;
      for (const Op* u : it->second) {
        if (std::vector<ValueId> carried = carried_as(v, *u); !carried.empty()) { // its uses in later iterations
          todo.insert(todo.end(), carried.begin(), carried.end());
          continue;
        }
        if (u->results.empty())
          continue;
        const Shape& out = k.type(u->result()).shape;
        bool elementwise = u->kind == OpKind::Unary || u->kind == OpKind::Binary || u->kind == OpKind::Cast ||
                           u->kind == OpKind::Where || u->kind == OpKind::Fma;
        if (elementwise && out == shape) {
          todo.push_back(u->result());
          continue;
        }
        if (u->kind != OpKind::ExpandDims || out.size() != 2)
          continue;
        // The 2-D tiles the expanded vector meets: shapes of elementwise users (through a broadcast).
        std::vector<const Op*> meets;
        for (const Op* w : users.count(u->result()) ? users.at(u->result()) : std::vector<const Op*>{}) {
          if (w->kind == OpKind::Broadcast && users.count(w->result()))
            for (const Op* x : users.at(w->result()))
              meets.push_back(x);
          else
            meets.push_back(w);
        }
        for (const Op* w : meets) {
          if (w->results.empty() || k.type(w->result()).rank() != 2)
            continue;
          const Type& tile = k.type(w->result());
          std::optional<Layout> tile_layout;
          if (auto d = dot_shapes.find(std::vector<int64_t>(tile.shape.begin(), tile.shape.end()));
              d != dot_shapes.end())
            tile_layout = mma_acc_layout(tile.shape[0], tile.shape[1], d->second);
          else // a tile no dot makes (LayerNorm's rows): the layout the tile's other operands give it
            for (ValueId o : w->operands)
              if (k.type(o).shape == tile.shape && !tile_layout)
                tile_layout = foreseen_layout(o, 0);
          if (!tile_layout)
            continue;
          Layout l = slice_layout(*tile_layout, u->axis);
          if (wanted && !wanted->same_bases(l))
            conflict = true;
          wanted = l;
        }
      }
    }
    if (conflict)
      return std::nullopt;
    return wanted;
  }

  // Result shapes of the kernel's dots and their warp splits (mma accumulator layouts).
  std::map<std::vector<int64_t>, WarpSplit> dot_shapes;

  // The layout `v` has or, when it is not assigned yet, will have: an elementwise result's is its operands' of
  // its shape (the highest-priority one, as operand_layout chooses), a register load's the default for its
  // shape; nullopt where that cannot be told without assigning (a flexible value, a broadcast, a loop's value).
  std::optional<Layout> foreseen_layout(ValueId v, int depth) const {
    if (auto it = plan.layout.find(v); it != plan.layout.end())
      return it->second;
    auto d = defs.find(v);
    if (depth > 8 || d == defs.end())
      return std::nullopt;
    const Op& op = *d->second;
    const Type& t = k.type(v);
    switch (op.kind) {
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Cast:
    case OpKind::Where:
    case OpKind::Fma: {
      std::optional<Layout> best;
      for (ValueId o : op.operands)
        if (k.type(o).shape == t.shape)
          if (std::optional<Layout> l = foreseen_layout(o, depth + 1); l && (!best || priority(*l) > priority(*best)))
            best = l;
      return best;
    }
    case OpKind::Load:
    case OpKind::LoadBlock:
      return t.rank() >= 2 ? std::optional<Layout>(default_layout(t.shape, t.elem, plan.num_warps)) : std::nullopt;
    default:
      return std::nullopt;
    }
  }

  Layout mma_layout_for(const Op& dot) const {
    const Type& t = k.type(dot.result());
    return mma_acc_layout(t.shape[0], t.shape[1], plan.warps_of(dot));
  }

  static int priority(const Layout& l) {
    if (l.kind == LayoutKind::Mma && !l.collapsed)
      return 3;
    if ((l.kind == LayoutKind::Slice && !l.collapsed) || l.kind == LayoutKind::Mma ||
        l.kind == LayoutKind::MmaA || l.kind == LayoutKind::MmaB)
      return 2;
    return 1;
  }

  void set_registers(ValueId v, Layout l) {
    plan.placement[v] = Placement::Registers;
    plan.layout[v] = std::move(l);
  }

  // The layout of an elementwise result: its highest-priority fixed operand's.
  std::optional<Layout> operand_layout(const Op& op) const {
    std::optional<Layout> best;
    for (ValueId v : op.operands) {
      auto it = plan.layout.find(v);
      if (it != plan.layout.end() && k.type(v).shape == k.type(op.result()).shape &&
          (!best || priority(it->second) > priority(*best)))
        best = it->second;
    }
    return best;
  }

  void assign_op(const Op& op) {
    for (ValueId r : op.results) {
      const Type& t = k.type(r);
      if (t.is_block_ptr()) {
        plan.placement[r] = Placement::BlockPtr;
      } else if (t.shape.empty()) {
        plan.placement[r] = Placement::Scalar;
      }
    }
    if (op.kind == OpKind::For) {
      assign_loop(op);
      return;
    }
    if (op.kind == OpKind::If) {
      for (const Region& r : op.regions)
        assign_region(r);
      for (size_t i = 0; i < op.results.size(); ++i) {
        ValueId res = op.results[i];
        if (k.type(res).shape.empty() || k.type(res).is_block_ptr())
          continue;
        ValueId y = op.regions[0].ops.back()->operands[i];
        set_registers(res, has_layout(y)
                               ? plan.layout[y]
                               : default_layout(k.type(res).shape, k.type(res).elem, plan.num_warps));
      }
      return;
    }
    if (op.results.empty() || k.type(op.result()).shape.empty() || k.type(op.result()).is_block_ptr())
      return;
    ValueId r = op.result();
    const Type& t = k.type(r);
    auto all_flexible = [&] {
      for (ValueId v : op.operands)
        if (!k.type(v).shape.empty() && !is_flexible(v))
          return false;
      return true;
    };
    switch (op.kind) {
    case OpKind::Constant:
    case OpKind::Arange:
    // A broadcast is computed where it is used, in the user's layout: a row vector broadcast into an
    // mma tile is then free whichever tile (S or O) it meets.
    case OpKind::Broadcast:
      plan.placement[r] = Placement::Flexible;
      return;
    case OpKind::ExpandDims:
    case OpKind::Reshape:
    case OpKind::Trans:
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Cast:
    case OpKind::Where:
    case OpKind::Fma:
    case OpKind::AddPtr:
      if (all_flexible()) {
        plan.placement[r] = Placement::Flexible;
        return;
      }
      break;
    default:
      break;
    }
    switch (op.kind) {
    case OpKind::Dot:
      set_registers(r, dot_below_mma_tile(k, op) ? default_layout(t.shape, t.elem, plan.num_warps) : mma_layout_for(op));
      return;
    case OpKind::Reduce:
    case OpKind::ArgMax: {
      // A flexible input (a mask built from indices alone) is materialized in the default layout, as the
      // emitter reads it (reduce_input_layout).
      const Layout in = reduce_input_layout(k, plan, op);
      Layout s = slice_layout(in, op.axis);
      if (op.keepdims)
        s = expand_layout(s, op.axis);
      set_registers(r, s);
      return;
    }
    case OpKind::ExpandDims: {
      ValueId x = op.operands[0];
      set_registers(r, expand_layout(plan.layout.at(x), op.axis));
      return;
    }
    case OpKind::Trans:
      if (plan.where(op.operands[0]) == Placement::Shared) {
        plan.placement[r] = Placement::Shared;
        plan.tile_of[r] = plan.tile_of.at(op.operands[0]);
        plan.transposed[r] = !plan.transposed[op.operands[0]];
        return;
      }
      set_registers(r, trans_layout(plan.layout.at(op.operands[0])));
      return;
    case OpKind::Reshape:
      set_registers(r, default_layout(t.shape, t.elem, plan.num_warps));
      return;
    case OpKind::LoadBlock:
      if (plan.tile_of.count(r)) // loops are assigned twice; a tile is made once
        return;
      if (feeds_only_dots(r) && t.rank() == 2) {
        const Type& bp = k.type(op.operands[0]);
        SharedTile tile;
        tile.value = r;
        tile.load = &op;
        tile.contig_dim = bp.order[0];
        tile.cols = t.shape[tile.contig_dim];
        tile.rows = t.shape[1 - tile.contig_dim];
        tile.elem_bytes = dtype_bytes(t.elem);
        tile.loop_nest = loop_stack;
        plan.placement[r] = Placement::Shared;
        plan.tile_of[r] = static_cast<int>(plan.tiles.size());
        plan.transposed[r] = false;
        plan.tiles.push_back(tile);
        return;
      }
      set_registers(r, wanted_vector_layout(r).value_or(default_layout(t.shape, t.elem, plan.num_warps)));
      return;
    case OpKind::Load: {
      ValueId p = op.operands[0];
      // (Only block-pointer loads take wanted_vector_layout so far: the pointer-tensor path in that layout
      // has not run on a GPU yet.)
      set_registers(r, has_layout(p) ? plan.layout[p] : default_layout(t.shape, t.elem, plan.num_warps));
      return;
    }
    case OpKind::AtomicAdd: {
      ValueId v = op.operands[1];
      set_registers(r, has_layout(v) ? plan.layout[v] : default_layout(t.shape, t.elem, plan.num_warps));
      return;
    }
    default: {
      std::optional<Layout> l = operand_layout(op);
      set_registers(r, l ? *l : default_layout(t.shape, t.elem, plan.num_warps));
      return;
    }
    }
  }

  std::vector<const Op*> loop_stack; // enclosing for ops, outermost first

  // The layout the first register load of `shape` in `body` (nested regions included) will be given, if there
  // is one: a loop-carried tile of that shape starts in it, so that a streaming loop (an f16 tile loaded with
  // 8 elements a thread, f32 running state beside it, whose default would hold 4) needs no conversion in
  // its body. Loads through pointer tiles that already have a layout follow their pointers, and are left out.
  std::optional<Layout> loop_load_layout(const Region& body, const Shape& shape) const {
    std::optional<Layout> found;
    walk(body, [&](const Op& op) {
      if (found || op.results.empty() || k.type(op.result()).shape != shape)
        return;
      const Type& t = k.type(op.result());
      if (op.kind == OpKind::LoadBlock && !(feeds_only_dots(op.result()) && t.rank() == 2))
        found = wanted_vector_layout(op.result()).value_or(default_layout(t.shape, t.elem, plan.num_warps));
      else if (op.kind == OpKind::Load && !has_layout(op.operands[0]))
        found = default_layout(t.shape, t.elem, plan.num_warps);
    });
    return found;
  }

  void assign_loop(const Op& op) {
    loop_stack.push_back(&op);
    struct Pop {
      std::vector<const Op*>& s;
      ~Pop() { s.pop_back(); }
    } pop{loop_stack};
    const Region& body = op.regions[0];
    plan.placement[body.args[0]] = Placement::Scalar;
    const Op& yield = *body.ops.back();
    // Carried tiles: the layout of what the body yields (found by a first pass with the inits').
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < op.results.size(); ++i) {
        ValueId arg = body.args[i + 1], init = op.operands[3 + i], res = op.results[i];
        const Type& t = k.type(arg);
        if (t.is_block_ptr() || t.shape.empty()) {
          Placement p = t.is_block_ptr() ? Placement::BlockPtr : Placement::Scalar;
          plan.placement[arg] = plan.placement[res] = p;
          continue;
        }
        ValueId y = yield.operands[i];
        Layout l = pass > 0 && has_layout(y) ? plan.layout[y]
                   : has_layout(init)        ? plan.layout[init]
                                             : loop_load_layout(body, t.shape)
                                                   .value_or(default_layout(t.shape, t.elem, plan.num_warps));
        if (pass > 0 && !has_layout(y) && has_layout(arg))
          l = plan.layout[arg];
        set_registers(arg, l);
        set_registers(res, l);
      }
      assign_region(body);
    }
  }

  void assign_region(const Region& r) {
    for (const auto& op : r.ops)
      assign_op(*op);
  }
};

} // namespace

LoweringPlan assign_layouts(const Kernel& k, const Target& target, const CodegenOptions& options) {
  Assigner a{k, target, options, {}, {}, {}, {}, {}, {}};
  a.plan.num_warps = k.config.num_warps;
  if (k.config.num_warps < 1 || k.config.num_warps > 32 || !is_power_of_two(k.config.num_warps))
    fail("num_warps must be a power of two from 1 to 32, got {}", k.config.num_warps);
  a.collect_users(k.body);
  const WarpSplits splits = choose_warp_splits(k, target, options, a.plan.num_warps);
  a.plan.warps = splits.kernel;
  a.plan.dot_warps = splits.dots;
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::Dot && !dot_below_mma_tile(k, op))
      a.dot_shapes.emplace(std::vector<int64_t>(k.type(op.result()).shape.begin(), k.type(op.result()).shape.end()),
                           a.plan.warps_of(op));
  });
  for (const Param& p : k.params)
    a.plan.placement[p.value] = Placement::Scalar;
  a.assign_region(k.body);
  if (options.async_copy)
    find_pipelined_loads(k, target, options, a.plan);
  return std::move(a.plan);
}

int64_t plan_shared_memory(LoweringPlan& plan) {
  // 1024-byte alignment keeps a tile's swizzle field clear of its base address (see fragment_base).
  auto size = [](const SharedTile& t) { return (t.bytes_per_stage() * t.stages + 1023) / 1024 * 1024; };
  // The loop tree of the tiles: each loop's own tiles and the loops nested in it (nullptr: the kernel body).
  // Tiles loaded outside any loop live for the whole kernel; the tiles of a loop are dead once it ends (the
  // emitter drains cp.async and syncs at every pipelined loop's exit and before every other tile copy).
  struct Node {
    std::vector<SharedTile*> tiles;
    std::vector<const Op*> children; // in program order of first appearance
  };
  std::map<const Op*, Node> tree;
  for (SharedTile& t : plan.tiles) {
    const Op* parent = nullptr;
    for (const Op* loop : t.loop_nest) {
      std::vector<const Op*>& siblings = tree[parent].children;
      if (std::find(siblings.begin(), siblings.end(), loop) == siblings.end())
        siblings.push_back(loop);
      parent = loop;
    }
    tree[parent].tiles.push_back(&t);
  }
  // A loop's own tiles first, then its nested loops side by side at the same offset; returns the end.
  std::function<int64_t(const Op*, int64_t)> place = [&](const Op* loop, int64_t offset) {
    Node& n = tree[loop];
    for (SharedTile* t : n.tiles) {
      t->offset = offset;
      offset += size(*t);
    }
    int64_t end = offset;
    for (const Op* child : n.children)
      end = std::max(end, place(child, offset));
    return end;
  };
  plan.tiles_bytes = place(nullptr, 0);
  return plan.tiles_bytes;
}

} // namespace kiln
