// Emitter: a loop's last product issued after the next iteration's first (LateProducts in codegen/lowering_plan.h).
//
// Before the loop: the words that keep the last product's A from one iteration to the next. In iteration j: the
// first product is issued and not waited for; then, from the second iteration on, iteration j - 1's last product
// (its A from the words, its B from slot j - 1, accumulating into the carried registers); then the first product
// is waited for alone (`wgmma_wait<1>`), and the ops up to the first read of the carried value run while the
// last product is on the tensor cores. Before that read, the last product is waited for and slot j - 1 goes back
// to the producer. Where the last product stood, its A is packed into the words and its accumulator copied into
// the carried registers. After the loop, the last iteration's product is issued, waited for, and its slot
// released.
#include "codegen/emitter.h"

namespace kiln::emit_detail {

Emitter::LateLoop Emitter::open_late_product(const Op& loop, const LateProduct& late,
                                             const std::vector<std::string>& vars, const std::string& iv,
                                             const std::string& lo, const std::string& stage, int stages) {
  LateLoop l{&loop, &late, fresh("late_a"), vars.at(late.carried), iv, lo, stage, stages};
  line("// the product at {} is issued in the next iteration, after the product at {}: its A waits in {}",
       late.last->loc.str(), late.first->loc.str(), l.a_words);
  // One word per two elements of A, as wgmma_register_a_words counts them.
  const Layout& A = dot_a_layout(k_, plan_, *late.last);
  line("kiln::u32 {}[{}];", l.a_words, A.num_regs() / 2);
  return l;
}

void Emitter::issue_late_product(const LateLoop& l, const std::string& slot, bool turn_held) {
  at_ring_slot(*l.loop, slot, [&] { emit_dot_wgmma(*l.late->last, l.acc, /*wait=*/false, l.a_words, turn_held); });
}

void Emitter::emit_late_product_after_first(const LateLoop& l) {
  line("if ({} != {}) {{ // the previous iteration's product at {}, behind this one's", l.iv, l.lo,
       l.late->last->loc.str());
  open();
  issue_late_product(l, l.previous_slot(), /*turn_held=*/true);
  line("kiln::wgmma_wait<1>(); // this iteration's first product is done; the previous one's last stays in flight");
  close();
  line("}} else {{");
  open();
  if (plan_.pingpong.dots.count(l.late->first))
    pass_turn();
  line("kiln::wgmma_wait<0>();");
  close();
  line("}}");
  read_after_wait(name_.at(l.late->first->result()), layout_of(l.late->first->result()).num_regs());
}

void Emitter::emit_late_product_wait(const LateLoop& l) {
  // Unconditional: ptxas cannot tell that this branch and the one that issued the product agree, and serialises
  // every wgmma of the kernel if a path reads the accumulator with a product possibly in flight (C7514).
  line("kiln::wgmma_wait<0>(); // the previous iteration's product at {} is done (in the first, none is in flight)",
       l.late->last->loc.str());
  line("if ({} != {}) {{ // its slot goes back", l.iv, l.lo);
  open();
  emit_slot_release(*l.loop, l.previous_slot());
  close();
  line("}}");
  read_after_wait(l.acc, layout_of(l.late->last->result()).num_regs());
}

void Emitter::keep_late_product(const LateLoop& l) {
  const Op& last = *l.late->last;
  line("// {}: issued in the next iteration (or after the loop); its A packed, its accumulator in {}",
       last.loc.str(), l.acc);
  const std::vector<std::string> words = wgmma_register_a_words(last);
  KILN_INTERNAL_CHECK(2 * static_cast<int>(words.size()) == dot_a_layout(k_, plan_, last).num_regs(),
                      "the product at {}: {} words of A for {} registers", last.loc.str(), words.size(),
                      dot_a_layout(k_, plan_, last).num_regs());
  for (size_t w = 0; w < words.size(); ++w)
    line("{}[{}] = {};", l.a_words, w, words[w]);
  const Layout& L = layout_of(last.result());
  const std::string c = regs(last.operands[2], L);
  if (c != l.acc) {
    for_regs(L.num_regs());
    line("  {}[r] = {}[r];", l.acc, c);
    line("}}");
  }
  name_[last.result()] = l.acc;
}

void Emitter::close_late_product(const LateLoop& l) {
  line("if ({} < {}) {{ // the last iteration's product at {}", l.lo, scalar(l.loop->operands[1]),
       l.late->last->loc.str());
  open();
  issue_late_product(l, l.previous_slot(), /*turn_held=*/false);
  line("kiln::wgmma_wait<0>();");
  emit_slot_release(*l.loop, l.previous_slot());
  close();
  line("}}");
  read_after_wait(l.acc, layout_of(l.late->last->result()).num_regs());
}

} // namespace kiln::emit_detail
