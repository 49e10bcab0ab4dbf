// Emitter: a loop's first product issued one iteration ahead (ProductsAhead in codegen/lowering_plan.h).
//
// Before the loop, when it runs at all, the first iteration's slot is waited for and its product issued into
// registers of its own. Iteration i waits for that product (the only one in flight: the previous iteration's
// others were waited for where they were issued), takes it as the dot's value, then, unless it is the last,
// waits for iteration i + 1's slot and issues i + 1's product without waiting for it: it runs on the tensor cores
// while iteration i computes the rest of its body. The loop's first ring load no longer waits (its slot was
// waited for when the product was issued), and the slot is released at the end of the iteration as before.
#include "codegen/emitter.h"

namespace kiln::emit_detail {

void Emitter::open_product_ahead(const Op& loop, const Op& dot, const std::string& iv, const std::string& lo,
                                 const std::string& hi, const std::string& step, const std::string& stage,
                                 int stages) {
  AheadProduct a{&loop, fresh("ahead"), iv, hi, step, stage, stages};
  const Layout& L = layout_of(dot.result());
  line("// the product at {}, issued one iteration ahead: iteration i takes it and issues i + 1's", dot.loc.str());
  line("float {}[{}];", a.regs, L.num_regs());
  regs(dot.operands[2], L); // the constant accumulator, made here so that the loop's issues see it
  line("if ({} < {}) {{", lo, hi);
  open();
  issue_product_ahead(dot, a, stage);
  close();
  line("}}");
  ahead_[&dot] = a;
}

void Emitter::emit_product_ahead(const Op& dot, const std::string& d) {
  const AheadProduct& a = ahead_.at(&dot);
  const int R = layout_of(dot.result()).num_regs();
  line("kiln::wgmma_wait<0>(); // this iteration's product, issued one iteration ahead, is done");
  read_after_wait(a.regs, R);
  for_regs(R);
  line("  {}[r] = {}[r];", d, a.regs);
  line("}}");
  line("if ({} + {} < {}) {{ // the next iteration's product, left in flight under the rest of this one", a.iv,
       a.step, a.hi);
  open();
  const std::string next = fresh("next_slot");
  line("const int {0} = {1} + 1 == {2} ? 0 : {1} + 1;", next, a.stage, a.stages);
  issue_product_ahead(dot, a, next);
  close();
  line("}}");
}

void Emitter::issue_product_ahead(const Op& dot, const AheadProduct& a, const std::string& slot) {
  emit_stage_wait(*a.loop, plan_.ring_tile(a.loop), slot);
  const Layout& L = layout_of(dot.result());
  const std::string c = regs(dot.operands[2], L);
  for_regs(L.num_regs());
  line("  {}[r] = {}[r];", a.regs, c);
  line("}}");
  at_ring_slot(*a.loop, slot, [&] { emit_dot_wgmma(dot, a.regs, /*wait=*/false); });
}

} // namespace kiln::emit_detail
