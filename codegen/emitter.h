// The CUDA emitter's state and its per-op-family printers (emit_cuda.cpp: values, layouts and dispatch;
// emit_compute.cpp: elementwise ops, broadcasts, reductions; emit_scan.cpp: scans and sorts; emit_dot.cpp: FMA, mma.sync and wgmma products;
// emit_memory.cpp: global loads, stores and atomics, shared-tile copies; emit_staged_loads.cpp: block loads staged
// through a loop's ring; emit_block_atomic_add.cpp: atomic adds
// through block pointers (element by element or through the bulk-reduction stage); emit_control.cpp: loops, pipelining,
// ifs; emit_tma.cpp: TMA rings; emit_warp_specialized.cpp: the producer warpgroup and slot releases). Every decision it prints comes from the LoweringPlan: it reads operands in the layouts operand_layouts.h
// gives, and each conversion that needs, and the scratch it uses, are the plan's. Internal to the code generator.
#pragma once

#include "codegen/cuda_text.h"
#include "codegen/emit_cuda.h"
#include "codegen/mma_shape.h"
#include "codegen/operand_layouts.h"
#include "codegen/plan_scratch.h"
#include "codegen/prelude.h"
#include "codegen/wgmma.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::emit_detail {

class Emitter {
public:
  Emitter(const Kernel& k, const LoweringPlan& plan, const Target& target, const CodegenOptions& options)
      : k_(k), plan_(plan), target_(target), opt_(options), threads_(32 * plan.num_warps) {}

  std::string run();

private:
  const Kernel& k_;
  const LoweringPlan& plan_;
  const Target& target_;
  const CodegenOptions& opt_;
  const int threads_;
  std::string out_;
  int indent_ = 1;
  int next_id_ = 0;
  // The op whose operands are being read (a yield for a loop's or an if's carried values): the plan's
  // conversions are looked up under it.
  const Op* reader_ = nullptr;
  std::vector<bool> conversion_made_; // per plan_.conversions entry
  int64_t largest_scratch_use_ = 0;
  std::unordered_map<ValueId, std::string> name_;
  std::vector<std::map<std::string, std::string>> scopes_{1}; // cached materialisations per scope
  std::map<std::string, int> layout_ids_;
  std::vector<std::string> layout_decls_;
  std::map<const Op*, std::string> stage_var_; // pipelined load -> its loop's stage counter
  // Products issued one iteration ahead (plan_.ahead), by dot: the registers holding the product in flight, and
  // what issuing the next one needs (its loop's variable, bound and step, stage counter and stages).
  struct AheadProduct {
    const Op* loop = nullptr;
    std::string regs, iv, hi, step, stage;
    int stages = 0;
  };
  std::map<const Op*, AheadProduct> ahead_;
  // A program may read back what its own threads stored (FA1 does): a barrier separates a global
  // store from the next global load. `global_write_unless_`, where not empty, is a condition under which
  // nothing is pending after all: the stores are those of an earlier iteration of a loop that nothing
  // before it stored, and in the first iteration ("i4 == 0") there was none (emit_for).
  bool global_write_pending_ = false;
  std::string global_write_unless_;
  // A global write by `op`; a reduction that no read of the kernel goes back to is left unordered
  // (plan_unordered_reductions).
  void note_global_store(const Op& op) {
    if (plan_.unordered_reductions.count(&op))
      return;
    global_write_pending_ = true;
    global_write_unless_.clear();
  }
  // What this straight-line code may still be reading from the scratch since the last barrier it passed: the
  // cross-warp reductions read it to skip their leading barrier (emit_reduce). None right after a barrier,
  // ReductionSlotN after a reduction that read slot N; Unknown after any other use of the scratch (scratch()
  // says so), on entering or leaving a loop, after an if whose branches end differently, and on entering the
  // persistent grid's loop. A branch starts from the reads before its if.
  enum class ScratchReads { None, ReductionSlot0, ReductionSlot1, Unknown };
  ScratchReads scratch_reads_ = ScratchReads::None;
  int scratch_reads_changes_ = 0; // how often scratch_reads_ was set: "nothing since" is a test of equality
  void set_scratch_reads(ScratchReads s) {
    scratch_reads_ = s;
    ++scratch_reads_changes_;
  }
  void forget_scratch_reads() { set_scratch_reads(ScratchReads::Unknown); }
  // Where the loop that set global_write_unless_ was entered: the scratch reads then, and the count of
  // changes right after its first iteration began. A barrier that the first iteration skips leaves that
  // iteration with the loop's entry state, if nothing touched the scratch in between.
  ScratchReads unless_entry_scratch_reads_ = ScratchReads::Unknown;
  int unless_scratch_reads_changes_ = -1;
  std::vector<std::pair<std::string, std::string>>
      helpers_; // device functions before the kernel: name, source
  bool in_producer_ = false; // emitting the producer warpgroup's branch: no barrier of the consumers there
  std::unordered_map<ValueId, std::string> register_operand_; // shared A -> the words read before the open loop
  // Where not empty, what program_id(0) reads instead of the persistent grid's kiln_program (the next program's
  // id, while its tiles' block pointers are computed for emit_next_program_copy).
  std::string program_id_override_;

  // A barrier among the threads that run the program: the whole CTA, or only the consumers when a producer
  // warpgroup is split off (it never reaches the consumers' barriers).
  std::string cta_barrier() const {
    KILN_INTERNAL_CHECK(!in_producer_, "a CTA barrier in the producer warpgroup's code");
    return plan_.ws.on() ? fmt::format("kiln::named_barrier_sync(1, {});", threads_) : "__syncthreads();";
  }

  void need_helper(const std::string& name, const std::string& source) {
    for (const auto& h : helpers_)
      if (h.first == name)
        return;
    helpers_.emplace_back(name, source);
  }

  // unary_expr, with the erf prelude added to the kernel when the op is erf below f64.
  std::string unary_text(UnaryOp u, const std::string& x, DType t) {
    if (u == UnaryOp::Erf && t != DType::f64)
      need_helper("kiln::erf", std::string(erf_prelude_source()));
    return unary_expr(u, x, t);
  }

  // The barrier after this thread's copies into shared tiles have landed; wgmma reads shared memory
  // through the async proxy, so the writes are fenced for it first.
  void publish_shared_tiles() {
    if (plan_.any_wgmma())
      line("kiln::fence_proxy_async();");
    line("{}", cta_barrier());
    set_scratch_reads(ScratchReads::None);
  }
  void order_global_memory() {
    if (!global_write_pending_)
      return;
    if (global_write_unless_.empty()) {
      line("{} // make this program's global stores visible to its loads", cta_barrier());
      set_scratch_reads(ScratchReads::None);
    } else { // uniform: a loop's induction variable
      line("if (!({})) {} // make the previous iterations' global stores visible to this one's loads",
           global_write_unless_, cta_barrier());
      // Past the barrier nothing is read; where the first iteration skips it, what was read before the loop.
      if (scratch_reads_changes_ == unless_scratch_reads_changes_)
        set_scratch_reads(unless_entry_scratch_reads_);
    }
    global_write_pending_ = false;
    global_write_unless_.clear();
  }
  // Whether `r` writes global memory that a later load must be ordered after (note_global_store's writes).
  bool stores_globally(const Region& r) const {
    bool any = false;
    walk(r, [&](const Op& o) {
      any |= (o.kind == OpKind::Store || o.kind == OpKind::StoreBlock || o.kind == OpKind::AtomicAdd ||
              o.kind == OpKind::AtomicAddBlock) &&
             !plan_.unordered_reductions.count(&o);
    });
    return any;
  }

  // ---- text ----
  template <typename... Args> void line(fmt::format_string<Args...> f, Args&&... args) {
    out_ += std::string(2 * indent_, ' ') + fmt::format(f, std::forward<Args>(args)...) + "\n";
  }
  std::string fresh(const std::string& hint) { return identifier(hint) + std::to_string(next_id_++); }
  std::string value_hint(ValueId v) const {
    const std::string& n = k_.info(v).name;
    return n.empty() ? "t" : n;
  }
  void open() { ++indent_, scopes_.emplace_back(); }
  void close() { --indent_, scopes_.pop_back(); }
  // The cache key of `v` converted into layout `l` (regs and the hoisted conversions share it).
  static std::string conversion_key(ValueId v, const Layout& l) { return fmt::format("cvt:{}:{}", v, layout_key(l)); }
  std::string* cached(const std::string& key) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end())
        return &f->second;
    }
    return nullptr;
  }
  void cache(const std::string& key, const std::string& name) { scopes_.back()[key] = name; }
  // Scratch is planned (plan_scratch); a use beyond it would overwrite memory the launch does not reserve,
  // and planned scratch no use needs would be shared memory wasted (run() checks the largest use is the plan's).
  void use_scratch(int64_t bytes) {
    KILN_INTERNAL_CHECK(bytes <= plan_.scratch_bytes, "{} bytes of scratch needed, {} planned", bytes,
                        plan_.scratch_bytes);
    largest_scratch_use_ = std::max(largest_scratch_use_, bytes);
  }
  // The scratch's address, for a use that starts with its own barrier (what it reads afterwards is unknown
  // to the reductions' bookkeeping, scratch_reads_).
  std::string scratch() {
    forget_scratch_reads();
    return fmt::format("(kiln_smem + {})", plan_.tiles_bytes);
  }

  // ---- layouts and coordinates ----
  int layout_id(const Layout& l) {
    std::string key = layout_key(l);
    auto it = layout_ids_.find(key);
    if (it != layout_ids_.end())
      return it->second;
    int id = static_cast<int>(layout_ids_.size());
    layout_ids_[key] = id;
    layout_decls_.push_back(fmt::format("// L{}: {}", id, l.str()));
    for (int d = 0; d < l.rank(); ++d)
      layout_decls_.push_back(fmt::format("const int L{}_t{} = 0{}{};", id, d, basis_terms(l.lane, d, "kiln_lane"),
                                          basis_terms(l.warp, d, "kiln_warp")));
    return id;
  }
  // " + ((index >> b) & 1) * basis" along dim d for each basis from bit `first` on that moves along d: the part of a
  // coordinate that the bits of `index` (a lane id, a warp id, a register index) contribute.
  static std::string basis_terms(const std::vector<Coord>& bases, int d, const std::string& index, size_t first = 0) {
    std::string e;
    for (size_t b = first; b < bases.size(); ++b)
      if (bases[b][d])
        e += fmt::format(" + (({} >> {}) & 1) * {}", index, b, bases[b][d]);
    return e;
  }
  // Coordinate of register `r` (a loop variable or constant) along dim d of layout l.
  std::string coord(const Layout& l, int d, const std::string& r) {
    return fmt::format("(L{}_t{}{})", layout_id(l), d, basis_terms(l.reg, d, r));
  }
  // Row-major linear index of register r's element in a tile of `shape`.
  std::string linear(const Layout& l, const Shape& shape, const std::string& r) {
    std::string e = "0";
    int64_t stride = 1;
    for (int d = l.rank() - 1; d >= 0; --d) {
      e = fmt::format("{} + {} * {}", e, coord(l, d, r), stride);
      stride *= shape[d];
    }
    return "(" + e + ")";
  }
  void for_regs(int n, const std::string& var = "r") {
    line("#pragma unroll");
    line("for (int {0} = 0; {0} < {1}; ++{0}) {{", var, n);
  }

  // ---- values ----
  std::string scalar(ValueId v) {
    auto it = name_.find(v);
    KILN_INTERNAL_CHECK(it != name_.end(), "scalar %{} has no name", v);
    return it->second;
  }
  const Layout& layout_of(ValueId v) const { return plan_.layout.at(v); }
  // The steps of advance op `adv` as a braced list's items, each "(long long)(step)<times>" (times: "" or
  // " * k"): how a pipelined block pointer moves by one iteration, or by k.
  std::string advance_steps(const Op& adv, const std::string& times) {
    std::string steps;
    for (size_t j = 1; j < adv.operands.size(); ++j)
      steps += (j > 1 ? ", " : "") + fmt::format("(long long)({}){}", invariant(adv.operands[j]), times);
    return steps;
  }
  // A loop-invariant scalar, usable before the loop body has been emitted (constants inline).
  std::string invariant(ValueId v) {
    const Op* def = k_.info(v).def;
    return def && def->kind == OpKind::Constant ? literal(def->f, k_.type(v).elem) : scalar(v);
  }
  std::string regs(ValueId v, const Layout& want);
  std::string materialize(ValueId v, const Layout& want);
  // The plan's next conversion of `v` by `reader_` with `method` (into `to`, if given); an InternalError when
  // the plan has none: the emitter makes no conversion the plan lacks. nullptr only when `optional`.
  const LayoutConversion* planned_conversion(ValueId v, ConversionMethod method, const Layout* to,
                                             bool optional = false);
  std::string convert(const std::string& src, const LayoutConversion& c);
  // A register tile of v's type in layout l with every element `value` (a scalar expression).
  std::string splat(ValueId v, const Layout& l, const std::string& value) {
    std::string n = declare_regs(v, l, "splat");
    for_regs(l.num_regs());
    line("  {}[r] = {};", n, value);
    line("}}");
    return n;
  }
  std::string declare_regs(ValueId v, const Layout& l, const std::string& hint = "") {
    std::string n = fresh(hint.empty() ? value_hint(v) : hint);
    line("{} {}[{}];", ctype_of(k_.type(v)), n, l.num_regs());
    return n;
  }

  // ---- ops ----
  void emit_region(const Region& r);
  void emit_op(const Op& op);
  void emit_stage_issue(const Op& loop, const std::vector<std::string>& vars, const std::string& from,
                        int ahead, const std::string& slot);
  // TMA rings (emit_tma.cpp): the mbarriers and phase bits every TMA-copied loop's ring needs, declared at
  // the top of the kernel; one thread's copies of a tile into a slot; the wait for a slot's tiles.
  std::string tma_ring_declarations() const;
  void emit_tma_issue(const Op& load, const std::string& bp, const std::string& slot);
  std::string tma_outer_coordinates(const TensorMapParam& m, const std::string& bp);
  // A block store plan_tma_stores sends out by TMA: registers `x` (layout L) to the store stage by stmatrix, then
  // one thread's TMA stores of its panels through block pointer `bp`'s tensor map.
  void emit_tma_store(const Op& op, const TmaStore& ts, const std::string& bp, const Layout& L, const std::string& x);
  void emit_stage_wait(const Op& loop, const SharedTile& first, const std::string& stage);
  // With WarpSpecialization::tile_barriers, a barrier and its parity bit are a tile's own (index `tile` of the
  // slot's loads), else the slot's (`tile` ignored): "kiln_full0[slot]" or "kiln_full0[(slot) * 2 + 1]", and the
  // bit's index. A consumer's wait for the tile of pipelined `load` in slot `stage`.
  std::string ring_barrier(const char* kind, int ring, const std::string& slot, int tile) const;
  std::string ring_bit(const std::string& slot, int tile) const;
  void emit_tile_wait(const Op& loop, const Op& load, const std::string& stage);
  // Warp specialisation (emit_warp_specialized.cpp): the producer warpgroup's branch (for each specialised
  // loop in program order its scalars, then one stage of copies per iteration of the loop, each after the
  // slot's release; `released` holds the parity bits of the slots' releases), and a consumer's release of
  // ring slot `slot` of `loop` once its warp is done reading it.
  void emit_producer();
  void emit_producer_loop(const Op& loop, const std::string& released);
  void emit_slot_release(const Op& loop, const std::string& slot);
  // With tile barriers: the release of the tiles of `loads` (some of the loop's) in `slot`.
  void emit_tile_releases(const Op& loop, const std::string& slot, const std::vector<const Op*>& loads);
  // The tiles the producer copies before the loops (emit_producer_tiles.cpp; ProducerTiles in
  // codegen/lowering_plan.h): their mbarriers' declarations and initialisation, the producer's copy of `load`'s
  // tile, the consumers' wait for it where the program loads it, and their release of every such tile's buffer at a
  // persistent program's end.
  std::string producer_tile_declarations() const;
  std::string producer_tile_init() const;
  void emit_producer_tile_copy(const Op& load);
  void emit_producer_tile_wait(const Op& load);
  void emit_producer_tile_releases();
  // The DSL program once, or, on a persistent grid, in a loop over the CTA's program ids (kiln_program).
  void emit_program();
  // The persistent grid (emit_persistent_grid.cpp): the loop over the program ids of the threads that run the
  // program, opened and closed; the producer warpgroup's loop over the same ids (closed by close() and "}");
  // the next program's id where a program prefetches the next one's tiles (emit_next_program_copy), as an
  // expression, after the code that obtains it; and a dynamic grid's shared program ids (with a producer, a ring
  // whose mbarriers tma_ring_declarations initialises with its own).
  void open_program_loop();
  void close_program_loop();
  void open_producer_program_loop();
  std::string next_program_id();
  std::string program_ring_declarations() const;
  std::string program_ring_init() const;
  // A scalar every lane of a warp reads from memory, through kiln::warp_uniform where products are wgmma.
  std::string warp_uniform_read(const std::string& value);
  void emit_scalar_op(const Op& op);
  void emit_elementwise(const Op& op);
  void emit_reduce(const Op& op);
  void finish_reduce(const Op& op, const std::string& result, const Layout& out);
  void emit_scan(const Op& op);
  void emit_sort(const Op& op);
  // A scan's or sort's operand (registers `xs` in layout `in`) staged row-major in scratch (declared as
  // `kiln_s`, of acc_t) between two barriers, and read back into the result's registers after one
  // (emit_scan.cpp): the two ends of every staged op.
  void stage_to_scratch(const Op& op, const Layout& in, const std::string& xs, DType acc_t);
  void read_back_from_scratch(const Op& op, DType acc_t);
  void emit_dot(const Op& op);
  void emit_dot_mma(const Op& op, const std::string& d);
  // `wait` false: the product is committed and left in flight (a product issued ahead). `packed_a`, where not
  // empty, names the words of a register A packed earlier (wgmma_register_a_words' order).
  // `turn_held`: under ping-pong, this warpgroup already holds the turn (a late product issued right after its
  // loop's first product): the product does not wait for it, only passes it on.
  void emit_staged_operand(ValueId a, const LayoutConversion& c, const SharedTile& tile);
  void emit_stmatrix_stores(const Layout& L, const StmatrixStore& st, const std::string& src, const SharedTile& tile);
  // wgmma_wait<n> before `before`, for the products `w` retires (schedule_products).
  void emit_product_wait(const ProductWait& w, const Op& before);
  // zero_acc: the accumulator is zero, `d` is not set; the first k step writes it (scale-d false).
  void emit_dot_wgmma(const Op& op, const std::string& d, bool wait = true, const std::string& packed_a = "",
                      bool turn_held = false, bool zero_acc = false);
  void take_turn();
  void pass_turn();
  std::vector<std::string> wgmma_register_a_words(const Op& op);
  // A loop's last product issued after the next iteration's first (emit_late_product.cpp, LateProducts in
  // lowering_plan.h). `LateLoop` is what the loop's emission knows: its products, the words its last products' A
  // is kept in, the carried values' registers, its induction variable, lower bound and ring counter.
  struct LateLoop {
    const Op* loop = nullptr;
    const LateProduct* late = nullptr;
    // For each last product: the words its A is kept in (shared by products with the same A) and its carried
    // value's registers.
    std::vector<std::string> a_words, acc;
    std::string iv, lo, hi, stage;
    int stages = 0;
    // A loop that continues the one before (LateProduct::continues): whether that loop left late products to issue
    // (a bool) and the slot they read; empty otherwise.
    std::string pending, pending_slot;
    std::string previous_slot() const { return fmt::format("(({} + {}) % {})", stage, stages - 1, stages); }
    // Whether an earlier iteration's late products are waiting to be issued, in the iteration at `iv`, and the
    // slot they read.
    std::string has_previous() const {
      return pending.empty() ? fmt::format("{} != {}", iv, lo) : fmt::format("({} != {} || {})", iv, lo, pending);
    }
    std::string slot_of_previous() const { return previous_slot_if(fmt::format("{} != {}", iv, lo)); }
    // The previous iteration's slot where `own` holds (this loop has run an iteration), else the loop before's.
    std::string previous_slot_if(const std::string& own) const {
      return pending.empty() ? previous_slot() : fmt::format("({} ? {} : {})", own, previous_slot(), pending_slot);
    }
  };
  // What a loop whose late products the next loop issues (LateProduct::continued_by) leaves it: whether they are
  // pending, their slot, the words their A is kept in, and the ring counter the next loop starts from.
  struct LateHandover {
    std::string pending, slot, stage;
    std::vector<std::string> a_words;
  };
  std::map<const Op*, LateHandover> late_handover_; // keyed by the loop that takes the products over
  std::map<const Op*, std::string> producer_slot_;  // the producer's ring counter of each loop it has emitted
  LateLoop open_late_product(const Op& loop, const LateProduct& late, const std::vector<std::string>& vars,
                             const std::string& iv, const std::string& lo, const std::string& hi,
                             const std::string& stage, int stages);
  void issue_late_product(const LateLoop& l, const std::string& slot, bool turn_held);
  void emit_late_product_after_first(const LateLoop& l);
  void emit_late_product_wait(const LateLoop& l);
  // Slot j - 1 back to the producer once its late products are done: the whole slot, or with tile barriers the
  // tiles not released right after the first products.
  void release_late_slot(const LateLoop& l, const std::string& slot);
  void keep_late_product(const LateLoop& l, const Op& last);
  void close_late_product(const LateLoop& l);
  // A product issued one iteration ahead (emit_product_ahead.cpp): before its loop, the first iteration's; in the
  // loop, this iteration's taken and the next one's issued.
  void open_product_ahead(const Op& loop, const Op& dot, const std::string& iv, const std::string& lo,
                          const std::string& hi, const std::string& step, const std::string& stage, int stages);
  void emit_product_ahead(const Op& dot, const std::string& d);
  void issue_product_ahead(const Op& dot, const AheadProduct& a, const std::string& slot);
  void read_after_wait(const std::string& regs, int n);
  // Runs `emit` with pipelined loop `loop`'s ring tiles addressed at `slot` rather than at the loop's stage counter
  // (a product issued for another iteration than the current one).
  void at_ring_slot(const Op& loop, const std::string& slot, const std::function<void()>& emit);
  std::string fragment_base(ValueId v, const std::string& lane_row, const std::string& lane_chunk);
  // mma.sync's A fragments (and wgmma's register A, the same for each warp's 16 rows) of shared tile `a` by ldmatrix:
  // the thread's base, declared once (kiln_wm, this warp's first row, must be in scope), and the instruction that
  // reads the fragment of k step `kt` and row block `mt` (blocks `block_rows` apart) into the 4 words `dst`.
  std::string a_fragment_base(ValueId a);
  std::string a_fragment_load(ValueId a, const std::string& base, const std::string& kt, const std::string& mt,
                              int64_t block_rows, const std::string& dst);
  // The shared A operands plan_register_operands reads into registers before `loop` (RegisterOperands), declared
  // and read there; the products in the loop take them from register_operand_ (emit_dot_wgmma) until
  // forget_register_operands after the loop.
  void emit_register_operands(const Op& loop);
  void forget_register_operands(const Op& loop);
  // Replicated lanes and warps (zero bases) hold copies of the same element; the one with those bits
  // clear writes it.
  static std::string owner_predicate(const Layout& L) {
    std::string owner = "true";
    for (size_t b = 0; b < L.lane.size(); ++b)
      if (std::all_of(L.lane[b].begin(), L.lane[b].end(), [](int64_t c) { return c == 0; }))
        owner += fmt::format(" && ((kiln_lane >> {}) & 1) == 0", b);
    for (size_t b = 0; b < L.warp.size(); ++b)
      if (std::all_of(L.warp[b].begin(), L.warp[b].end(), [](int64_t c) { return c == 0; }))
        owner += fmt::format(" && ((kiln_warp >> {}) & 1) == 0", b);
    return owner;
  }
  // Inside a per-register loop: declares register r's block coordinates c0, c1, ... and returns the
  // boundary-check predicate and the element offset from the block pointer's base.
  std::pair<std::string, std::string> block_element(const Op& op, const std::string& bp, const Type& bt,
                                                    const Layout& L) {
    std::string ok = "true", addr = "0";
    for (int d = 0; d < bt.rank(); ++d) {
      line("  const long long c{} = {}.off[{}] + {};", d, bp, d, coord(L, d, "r"));
      if (op.checks_dim(d))
        ok += " && " + in_bounds(fmt::format("c{}", d), bp, d);
      addr += fmt::format(" + c{0} * {1}.stride[{0}]", d, bp);
    }
    return {ok, addr};
  }
  std::string fragment_addr(ValueId v, const std::string& base, const std::string& chunk,
                            const std::string& row);
  // f32 -> f16/bf16 casts whose only use is an mma A operand: packed by the dot, never materialised.
  void emit_dot_fma(const Op& op, const std::string& d);
  void emit_pointer_load(const Op& op);
  void emit_pointer_store(const Op& op);
  void emit_block_load(const Op& op);
  // A persistent grid's copy of the next program's tile (plan_.persistent.prefetches), after its last reader.
  void emit_next_program_copy(const PersistentPrefetch& p);
  void emit_block_store(const Op& op);
  void emit_block_atomic_add(const Op& op);
  void emit_stage_writes(const BulkReduction& b, const Layout& L, const std::string& x);
  void emit_block_elements(const Op& op, const std::string& bp, const Type& bt, const Layout& L,
                           const std::string& x, bool add);
  bool emit_vector_block_store(const Op& op, const std::string& bp, const Type& bt, const Layout& L,
                               const std::string& x);
  void emit_block_pieces(const Op& op, const std::string& bp, const Type& bt, const Layout& W, const std::string& w,
                         int run, const std::function<void()>& whole);
  void emit_staged_block_load(const Op& op, const SharedTile& t);
  bool emit_vector_block_load(const Op& op, const std::string& bp, const Type& bt, const Layout& L,
                              const std::string& n, const std::string& pad);
  void emit_vector_load_or_elements(const std::string& vector_ok, const std::string& ptr, const std::string& ty,
                                    int count, int bytes, const std::string& dst, const std::string& element);
  void emit_tile_issue(const SharedTile& tile, const std::string& bp, const std::string& stage);
  void emit_vector_tile_issue(const SharedTile& tile, const std::string& bp, const std::string& stage);
  void emit_hoisted_conversions(const Op& loop);
  void emit_for(const Op& op);
  void emit_body_end_wait(const Op& loop); // the body's products still in flight (schedule_products)
  void emit_if(const Op& op);

  // Shared-memory tile addressing. A ring's stages lie back to back; a prefetched tile's second buffer
  // (plan_prefetch_buffers.h) lies further on, its "stage" 1.
  int64_t stage_stride(const SharedTile& t) const {
    const PersistentPrefetch* p = plan_.persistent.prefetch_of(t.load);
    return p && p->double_buffered() ? p->second_offset - t.offset : t.bytes_per_stage();
  }
  std::string tile_base(const SharedTile& t) {
    auto it = stage_var_.find(t.load);
    return it != stage_var_.end() ? fmt::format("({} + {} * {})", t.offset, it->second, stage_stride(t))
                                  : std::to_string(t.offset);
  }
  // The tile format (swizzled 16-byte chunks, 128-byte panels) is SharedTileGeometry's.
  SharedTileGeometry geometry(const SharedTile& t) const { return t.geometry(opt_.swizzle); }
  // Byte offset within one stage of a tile of 16-byte chunk `chunk` of row `row`.
  std::string stage_offset(const SharedTile& t, const std::string& row, const std::string& chunk) const {
    return geometry(t).chunk_offset_expr(row, chunk);
  }
  // Byte offset (from kiln_smem) of logical element (a, b) of a shared value.
  std::string tile_elem(ValueId v, const std::string& a, const std::string& b) {
    const SharedTile& t = plan_.tiles[plan_.tile_of.at(v)];
    int contig = plan_.contiguous_dim(v);
    std::string row = contig == 1 ? a : b, col = contig == 1 ? b : a;
    int per_chunk = 16 / t.elem_bytes;
    return fmt::format("({} + {} + (({}) % {}) * {})", tile_base(t),
                       stage_offset(t, row, fmt::format("(({}) / {})", col, per_chunk)), col, per_chunk,
                       t.elem_bytes);
  }
};

} // namespace kiln::emit_detail
