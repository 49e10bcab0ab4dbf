// Emitter: a loop's last products issued after the next iteration's first (LateProducts in
// codegen/lowering_plan.h).
//
// Before the loop: the words that keep the last products' A from one iteration to the next (one array for each
// distinct A). In iteration j: the first products are issued and not waited for; then, from the second iteration
// on, iteration j - 1's last products (their A from the words, their B from slot j - 1, accumulating into the
// carried registers); then the first products are waited for alone (`wgmma_wait<n>`, n the last products), and
// the ops up to the first read of a carried value run while the last products are on the tensor cores. Before
// that read, they are waited for and slot j - 1 goes back to the producer (with tile barriers, its tiles that only
// the first products read went back already, right after the first products' wait in iteration j - 1). Where each
// last product stood, its A is packed into the words and its accumulator copied into the carried registers. After
// the loop, the last iteration's products are issued, waited for, and their slot released; or, where the next loop
// continues this one (LateProduct::continued_by), only whether they are pending and their slot are set down, and
// that loop issues them in its first iteration (or after itself, when it runs none) from the same words.
#include "codegen/emitter.h"

#include <algorithm>
#include <map>

namespace kiln::emit_detail {

Emitter::LateLoop Emitter::open_late_product(const Op& loop, const LateProduct& late,
                                             const std::vector<std::string>& vars, const std::string& iv,
                                             const std::string& lo, const std::string& hi, const std::string& stage,
                                             int stages) {
  LateLoop l{&loop, &late, {}, {}, iv, lo, hi, stage, stages, "", ""};
  const LateHandover* handover = late.continues ? &late_handover_.at(&loop) : nullptr;
  if (handover) {
    l.pending = handover->pending;
    l.pending_slot = handover->slot;
  }
  std::map<ValueId, std::string> words_of; // one array of words for each distinct A
  for (size_t i = 0; i < late.last.size(); ++i) {
    const Op& last = *late.last[i];
    auto [it, fresh_a] = words_of.try_emplace(last.operands[0], "");
    if (fresh_a && handover) { // the words the loop before keeps its last iteration's A in
      it->second = handover->a_words.at(i);
    } else if (fresh_a) {
      it->second = fresh("late_a");
      // One word per two elements of A, as wgmma_register_a_words counts them.
      line("kiln::u32 {}[{}];", it->second, dot_a_layout(k_, plan_, last).num_regs() / 2);
    }
    line("// the product at {} is issued in the next iteration, after the product at {}: its A waits in {}",
         last.loc.str(), late.first.back()->loc.str(), it->second);
    l.a_words.push_back(it->second);
    l.acc.push_back(vars.at(late.carried[i]));
  }
  if (handover)
    line("// its first iteration issues the loop at {}'s last late product{} first, if {}", late.continues->loc.str(),
         late.last.size() > 1 ? "s" : "", l.pending);
  return l;
}

void Emitter::issue_late_product(const LateLoop& l, const std::string& slot, bool turn_held) {
  for (size_t i = 0; i < l.late->last.size(); ++i)
    at_ring_slot(*l.loop, slot,
                 [&] { emit_dot_wgmma(*l.late->last[i], l.acc[i], /*wait=*/false, l.a_words[i], turn_held); });
}

void Emitter::emit_late_product_after_first(const LateLoop& l) {
  const size_t n_last = l.late->last.size();
  line("if ({}) {{ // the previous iteration's product{} at {}, behind this one's", l.has_previous(),
       n_last > 1 ? "s" : "", l.late->last.front()->loc.str());
  open();
  issue_late_product(l, l.slot_of_previous(), /*turn_held=*/true);
  line("kiln::wgmma_wait<{}>(); // this iteration's first product{} done; the previous one's last stay{} in flight",
       n_last, l.late->first.size() > 1 ? "s are" : " is", n_last > 1 ? "" : "s");
  close();
  line("}} else {{");
  open();
  if (plan_.pingpong.dots.count(l.late->first.front()))
    pass_turn();
  line("kiln::wgmma_wait<0>();");
  close();
  line("}}");
  if (!l.late->released_after_first.empty()) // tile barriers: what only the first products read goes back now
    emit_tile_releases(*l.loop, l.stage, l.late->released_after_first);
  const Op& first = *l.late->first.back();
  read_after_wait(name_.at(first.result()), layout_of(first.result()).num_regs());
}

void Emitter::release_late_slot(const LateLoop& l, const std::string& slot) {
  if (!plan_.ws.tile_barriers) {
    emit_slot_release(*l.loop, slot);
    return;
  }
  std::vector<const Op*> rest; // the tiles the late products read, and any other reader's
  for (const Op* load : plan_.pipelined.at(l.loop))
    if (std::find(l.late->released_after_first.begin(), l.late->released_after_first.end(), load) ==
        l.late->released_after_first.end())
      rest.push_back(load);
  if (!rest.empty())
    emit_tile_releases(*l.loop, slot, rest);
}

void Emitter::emit_late_product_wait(const LateLoop& l) {
  // Unconditional: ptxas cannot tell that this branch and the one that issued the product agree, and serialises
  // every wgmma of the kernel if a path reads the accumulator with a product possibly in flight (C7514).
  line("kiln::wgmma_wait<0>(); // the previous iteration's product at {} is done (in the first, none is in flight)",
       l.late->last.front()->loc.str());
  line("if ({}) {{ // its slot goes back", l.has_previous());
  open();
  release_late_slot(l, l.slot_of_previous());
  close();
  line("}}");
  for (size_t i = 0; i < l.late->last.size(); ++i)
    read_after_wait(l.acc[i], layout_of(l.late->last[i]->result()).num_regs());
}

void Emitter::keep_late_product(const LateLoop& l, const Op& last) {
  const size_t i = static_cast<size_t>(std::find(l.late->last.begin(), l.late->last.end(), &last) - l.late->last.begin());
  line("// {}: issued in the next iteration (or after the loop); its A packed, its accumulator in {}",
       last.loc.str(), l.acc[i]);
  if (i == 0 || l.a_words[i] != l.a_words[i - 1]) { // products with the same A share its words
    const std::vector<std::string> words = wgmma_register_a_words(last);
    KILN_INTERNAL_CHECK(2 * static_cast<int>(words.size()) == dot_a_layout(k_, plan_, last).num_regs(),
                        "the product at {}: {} words of A for {} registers", last.loc.str(), words.size(),
                        dot_a_layout(k_, plan_, last).num_regs());
    for (size_t w = 0; w < words.size(); ++w)
      line("{}[{}] = {};", l.a_words[i], w, words[w]);
  }
  const Layout& L = layout_of(last.result());
  const std::string c = regs(last.operands[2], L);
  if (c != l.acc[i]) {
    for_regs(L.num_regs());
    line("  {}[r] = {}[r];", l.acc[i], c);
    line("}}");
  }
  name_[last.result()] = l.acc[i];
}

void Emitter::close_late_product(const LateLoop& l) {
  // After the loop: late products are pending where it ran, or where the loop before left some and it did not.
  const std::string ran = fmt::format("{} < {}", l.lo, l.hi);
  const std::string pending = l.pending.empty() ? ran : fmt::format("{} || {}", ran, l.pending);
  const std::string slot = l.previous_slot_if(ran);
  if (const Op* next = l.late->continued_by) { // issued in the next loop's first iteration, or after it
    LateHandover& h = late_handover_[next];
    h.pending = fresh("late_pending");
    h.slot = fresh("late_slot");
    h.stage = l.stage;
    h.a_words = l.a_words;
    line("// the last iteration's product{} at {}: issued by the loop at {}", l.late->last.size() > 1 ? "s" : "",
         l.late->last.front()->loc.str(), next->loc.str());
    line("const bool {} = {};", h.pending, pending);
    line("const int {} = {};", h.slot, slot);
    return;
  }
  line("if ({}) {{ // the last iteration's product at {}", pending, l.late->last.front()->loc.str());
  open();
  issue_late_product(l, slot, /*turn_held=*/false);
  line("kiln::wgmma_wait<0>();");
  release_late_slot(l, slot);
  close();
  line("}}");
  for (size_t i = 0; i < l.late->last.size(); ++i)
    read_after_wait(l.acc[i], layout_of(l.late->last[i]->result()).num_regs());
}

} // namespace kiln::emit_detail
