// Emitter: for loops (with the pipelined loads' prologue and steady state) and ifs (see emitter.h).
#include "codegen/emitter.h"

namespace kiln::emit_detail {

// Issues the tiles of pipelined loop `op` for iteration `from` + `ahead` (if it exists) into ring slot
// `slot`, each block pointer advanced `ahead` steps from its carried value: the prologue calls it with from =
// lo and ahead = 0, 1, ..., the steady state with the induction variable and the lookahead.
void Emitter::emit_stage_issue(const Op& op, const std::vector<std::string>& vars, const std::string& from,
                               int ahead, const std::string& slot) {
  line("if ({} + {} * {} < {}) {{", from, ahead, scalar(op.operands[2]), scalar(op.operands[1]));
  open();
  const std::vector<const Op*>& loads = plan_.pipelined.at(&op);
  const bool tma = plan_.tma.loops.count(&op) > 0;
  // Each tile's block pointer, advanced `ahead` steps; on the cp.async path each is issued as it is made.
  std::vector<std::string> bps;
  for (const Op* l : loads) {
    const PipelinedStep& step = plan_.pipelined_steps.at(l);
    bps.push_back(fresh("bp"));
    line("const auto {} = {}.advanced({{{}}});", bps.back(), vars[step.carried],
         advance_steps(*step.advance, " * " + std::to_string(ahead)));
    if (!tma)
      emit_tile_issue(plan_.tiles[plan_.tile_of.at(l->result())], bps.back(), slot);
  }
  if (tma) {
    // One thread copies every tile by TMA; launches whose maps are illegal take the cp.async path.
    line("if (kiln_tma) {{");
    line("  if (threadIdx.x == 0) {{");
    open();
    open();
    for (size_t i = 0; i < loads.size(); ++i)
      emit_tma_issue(*loads[i], bps[i], slot);
    close();
    close();
    line("  }}");
    line("}} else {{");
    open();
    for (size_t i = 0; i < loads.size(); ++i)
      emit_tile_issue(plan_.tiles[plan_.tile_of.at(loads[i]->result())], bps[i], slot);
    close();
    line("}}");
  }
  close();
  line("}}");
  line("kiln::cp_async_commit();");
}

void Emitter::at_ring_slot(const Op& loop, const std::string& slot, const std::function<void()>& emit) {
  std::map<const Op*, std::string> saved;
  for (const Op* load : plan_.pipelined.at(&loop)) {
    saved[load] = stage_var_.at(load);
    stage_var_[load] = slot;
  }
  emit();
  for (const auto& [load, stage] : saved)
    stage_var_[load] = stage;
}

// The conversions the plan hoisted out of loop `op` (LayoutConversion::hoisted_before): each made once here,
// in the scope around the loop, where the loop's reads (and later ones in this scope) find it.
void Emitter::emit_hoisted_conversions(const Op& op) {
  for (size_t i = 0; i < plan_.conversions.size(); ++i) {
    const LayoutConversion& c = plan_.conversions[i];
    if (c.hoisted_before != &op || conversion_made_[i])
      continue;
    conversion_made_[i] = true;
    const std::string key = conversion_key(c.value, c.to);
    if (cached(key))
      continue;
    line("// %{}, read at {}, is the same in every iteration: converted once before the loop", c.value,
         c.loc().str());
    cache(key, convert(name_.at(c.value), c));
  }
}

// The products `loop`'s body left in flight and nothing in it waited for: done before its slot goes back and its
// carried values are yielded (schedule_products).
void Emitter::emit_body_end_wait(const Op& loop) {
  auto it = plan_.products.at_end.find(&loop);
  if (it == plan_.products.at_end.end())
    return;
  line("kiln::wgmma_wait<0>(); // the iteration's product{} at {} done", it->second.size() > 1 ? "s" : "",
       source_lines(it->second));
}

void Emitter::emit_for(const Op& op) {
  const Region& body = op.regions[0];
  const Op& yield = *body.ops.back();
  emit_hoisted_conversions(op);
  line("// for {}", op.loc.str());
  std::string lo = scalar(op.operands[0]), hi = scalar(op.operands[1]), step = scalar(op.operands[2]);
  // Bounds ptxas must see warp-uniform, lest it put the loop's wgmma in series (plan_warp_uniform_scalars.h).
  if (const std::vector<int>* bounds = plan_.uniform.bounds_of(op); bounds && !in_producer_)
    for (int i : *bounds) {
      std::string& bound = i == 0 ? lo : hi;
      const std::string read = warp_uniform_read(bound);
      bound = fresh("bound");
      line("const {} {} = {}; // warp-uniform to ptxas", ctype(k_.type(op.operands[i]).elem), bound, read);
    }
  // Carried values live in variables declared before the loop; the results are those variables.
  std::vector<std::string> vars;
  for (size_t i = 0; i < op.results.size(); ++i) {
    ValueId arg = body.args[i + 1], init = op.operands[3 + i];
    const Type& t = k_.type(arg);
    std::string n = fresh(value_hint(arg));
    Placement p = plan_.where(arg);
    if (p == Placement::Registers) {
      const Layout& L = layout_of(arg);
      std::string src = regs(init, L);
      line("{} {}[{}];", ctype_of(t), n, L.num_regs());
      for_regs(L.num_regs());
      line("  {}[r] = {}[r];", n, src);
      line("}}");
    } else {
      line("{} {} = {};", t.is_block_ptr() ? "auto" : ctype_of(t), n, scalar(init));
    }
    vars.push_back(n);
    name_[arg] = n;
    name_[op.results[i]] = n;
  }
  // Pipelining: issue the first num_stages - 1 iterations' tiles before the loop.
  auto pit = plan_.pipelined.find(&op);
  const bool specialized = plan_.ws.specializes(&op);
  std::string stage;
  int stages = 0;
  if (pit != plan_.pipelined.end()) {
    const std::vector<const Op*>& loads = pit->second;
    stages = plan_.ring_tile(&op).stages;
    stage = fresh("stage");
    if (!specialized) { // else the producer warpgroup issues every stage
      line("{} // shared tiles of earlier code are free", cta_barrier());
      for (int s = 0; s < plan_.lookahead(&op, stages); ++s)
        emit_stage_issue(op, vars, lo, s, std::to_string(s));
    }
    auto late_loop = plan_.late.loops.find(&op);
    if (late_loop != plan_.late.loops.end() && late_loop->second.continues) // where the loop before stopped
      line("int {} = {}; // the ring continues from the loop at {}", stage, late_handover_.at(&op).stage,
           late_loop->second.continues->loc.str());
    else
      line("int {} = 0;", stage);
    for (const Op* l : loads)
      stage_var_[l] = stage;
  }
  std::string iv = fresh("i");
  name_[body.args[0]] = iv;
  if (auto ahead = plan_.ahead.dots.find(&op); ahead != plan_.ahead.dots.end())
    open_product_ahead(op, *ahead->second, iv, lo, hi, step, stage, stages);
  std::optional<LateLoop> late;
  if (auto it = plan_.late.loops.find(&op); it != plan_.late.loops.end())
    late = open_late_product(op, it->second, vars, iv, lo, hi, stage, stages);
  bool loop_stores = stores_globally(body);
  const bool write_pending_before = global_write_pending_; // still pending after a loop that ran no iteration
  const std::string write_unless_before = global_write_unless_;
  const ScratchReads scratch_reads_before = scratch_reads_;
  line("for ({} {} = {}; {} < {}; {} += {}) {{", ctype(k_.type(body.args[0]).elem), iv, lo, iv, hi, iv, step);
  open();
  forget_scratch_reads(); // the previous iteration's
  if (loop_stores) {      // the previous iteration's stores: none before the first, unless stores came before
    const std::string first = fmt::format("{} == {}", iv, lo);
    global_write_unless_ = !global_write_pending_          ? first
                           : global_write_unless_.empty() ? ""
                                                          : fmt::format("({}) && {}", global_write_unless_, first);
    global_write_pending_ = true;
    unless_entry_scratch_reads_ = scratch_reads_before;
    unless_scratch_reads_changes_ = scratch_reads_changes_;
  }
  if (pit != plan_.pipelined.end()) {
    // Emit the body, issuing iteration i + stages - 1 right after this iteration's wait.
    bool issued = false;
    for (const Op* inner : plan_.products.body_order(op)) {
      if (inner->kind == OpKind::Yield)
        continue;
      if (late && std::find(late->late->last.begin(), late->late->last.end(), inner) != late->late->last.end()) {
        keep_late_product(*late, *inner);
        continue;
      }
      if (late && inner == late->late->first_reader)
        emit_late_product_wait(*late);
      emit_op(*inner);
      if (late && inner == late->late->first.back())
        emit_late_product_after_first(*late);
      if (!issued && inner == pit->second.front() && !specialized) {
        issued = true;
        const int ahead = plan_.lookahead(&op, stages);
        emit_stage_issue(op, vars, iv, ahead, fmt::format("(({} + {}) % {})", stage, ahead, stages));
      }
    }
    emit_body_end_wait(op);
    if (specialized) {
      // Hand the slot back to the producer once no product still reads it: this iteration's, or, while a
      // product stays in flight, the previous iteration's (its wgmma_wait<1> above has retired it).
      if (late) {
        // nothing: this iteration's slot goes back where the next iteration (or the code after the loop) has
        // waited for the product that reads it
      } else if (plan_.deferred_dots.count(&op)) {
        line("if ({} != {}) {{", iv, lo);
        open();
        emit_slot_release(op, fmt::format("(({} + {}) % {})", stage, stages - 1, stages));
        close();
        line("}}");
      } else {
        emit_slot_release(op, stage);
      }
    }
  } else {
    for (const Op* inner : plan_.products.body_order(op))
      if (inner->kind != OpKind::Yield)
        emit_op(*inner);
    emit_body_end_wait(op);
  }
  // Yield: compute every next value before assigning any (a yield may read another carried value).
  reader_ = &yield;
  std::vector<std::string> next;
  for (size_t i = 0; i < op.results.size(); ++i) {
    ValueId arg = body.args[i + 1], y = yield.operands[i];
    Placement p = plan_.where(arg);
    if (p == Placement::Registers) {
      const Layout& L = layout_of(arg);
      std::string src = regs(y, L);
      if (src == vars[i]) {
        next.push_back("");
        continue;
      }
      std::string n = fresh("next");
      line("{} {}[{}];", ctype_of(k_.type(arg)), n, L.num_regs());
      for_regs(L.num_regs());
      line("  {}[r] = {}[r];", n, src);
      line("}}");
      next.push_back(n);
    } else {
      std::string n = fresh("next");
      line("const {} {} = {};", k_.type(arg).is_block_ptr() ? "auto" : ctype_of(k_.type(arg)), n,
           scalar(y)); // NOLINT
      next.push_back(n);
    }
  }
  for (size_t i = 0; i < op.results.size(); ++i) {
    if (next[i].empty())
      continue;
    ValueId arg = body.args[i + 1];
    if (plan_.where(arg) == Placement::Registers) {
      for_regs(layout_of(arg).num_regs());
      line("  {}[r] = {}[r];", vars[i], next[i]);
      line("}}");
    } else {
      line("{} = {};", vars[i], next[i]);
    }
  }
  if (!stage.empty())
    line("{0} = {0} + 1 == {1} ? 0 : {0} + 1;", stage, stages);
  close();
  line("}}");
  forget_scratch_reads(); // the body's, or, should the loop run no iteration, what came before it
  // Past the loop its induction variable is gone: what is pending is pending unconditionally, except stores
  // from before a loop that stores nothing, which keep their condition.
  const bool body_pending = global_write_pending_;
  global_write_pending_ = body_pending || write_pending_before;
  global_write_unless_ = !loop_stores && !body_pending ? write_unless_before : "";
  if (late)
    close_late_product(*late);
  if (plan_.deferred_dots.count(&op)) {
    line("kiln::wgmma_wait<0>(); // the last product");
    if (specialized) { // its slot goes back too: the producer fills it again when the loop is entered again
      line("if ({} < {}) {{", lo, hi);
      open();
      emit_slot_release(op, fmt::format("(({} + {}) % {})", stage, stages - 1, stages));
      close();
      line("}}");
    }
  }
  if (!stage.empty()) {
    if (!specialized) { // the consumers issued no copy, and no other tile shares the ring's bytes
      line("kiln::cp_async_wait_all();");
      publish_shared_tiles(); // also tiles loaded before the loop, should it have run no iteration
    }
    for (const Op* l : pit->second)
      stage_var_.erase(l);
  }
}

void Emitter::emit_if(const Op& op) {
  line("// if {}", op.loc.str());
  std::vector<std::string> vars;
  for (ValueId res : op.results) {
    const Type& t = k_.type(res);
    std::string n = fresh(value_hint(res));
    if (plan_.where(res) == Placement::Registers)
      line("{} {}[{}];", ctype_of(t), n, layout_of(res).num_regs());
    else
      line("{} {};",
           t.is_block_ptr()
               ? "decltype(" + scalar(op.regions[0].ops.back()->operands[&res - &op.results[0]]) + ")"
               : ctype_of(t),
           n);
    vars.push_back(n);
  }
  // Each branch starts from the stores pending before the if; afterwards a store either left is pending.
  const bool write_pending_before = global_write_pending_;
  const std::string write_unless_before = global_write_unless_;
  const ScratchReads scratch_reads_before = scratch_reads_;
  std::vector<ScratchReads> scratch_reads_after; // each branch's
  bool write_pending_after = false;
  std::vector<std::string> unless_after; // of each branch that leaves stores pending
  for (int branch = 0; branch < 2; ++branch) {
    global_write_pending_ = write_pending_before;
    global_write_unless_ = write_unless_before;
    if (branch == 0)
      line("if ({}) {{", scalar(op.operands[0]));
    else
      line("}} else {{");
    open();
    set_scratch_reads(scratch_reads_before); // a branch is entered from here: the same reads are in flight
    emit_region(op.regions[branch]);
    const Op& y = *op.regions[branch].ops.back();
    reader_ = &y;
    for (size_t i = 0; i < op.results.size(); ++i) {
      ValueId res = op.results[i];
      if (plan_.where(res) == Placement::Registers) {
        std::string src = regs(y.operands[i], layout_of(res));
        for_regs(layout_of(res).num_regs());
        line("  {}[r] = {}[r];", vars[i], src);
        line("}}");
      } else {
        line("{} = {};", vars[i], scalar(y.operands[i]));
      }
    }
    write_pending_after |= global_write_pending_;
    if (global_write_pending_)
      unless_after.push_back(global_write_unless_);
    scratch_reads_after.push_back(scratch_reads_);
    close();
  }
  line("}}");
  global_write_pending_ = write_pending_after;
  // One condition where every pending branch has the same; else pending unconditionally.
  const bool same_unless = !unless_after.empty() && std::all_of(unless_after.begin(), unless_after.end(),
                                                                [&](const std::string& u) { return u == unless_after[0]; });
  global_write_unless_ = same_unless ? unless_after[0] : "";
  // Either branch's: where both end with the same reads, those.
  set_scratch_reads(scratch_reads_after[0] == scratch_reads_after[1] ? scratch_reads_after[0]
                                                                     : ScratchReads::Unknown);
  for (size_t i = 0; i < op.results.size(); ++i)
    name_[op.results[i]] = vars[i];
}

} // namespace kiln::emit_detail
