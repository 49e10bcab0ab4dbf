// Emitter: the persistent grid's loops over program ids (PersistentGrid in codegen/lowering_plan.h).
//
// PERSISTENT=1 (static): every thread steps kiln_program by gridDim.x. PERSISTENT=2 (dynamic): a CTA runs
// blockIdx.x first, then programs drawn from kiln_program_counter (kiln::draw_program), one draw a program:
// - without a producer warpgroup, thread 0 draws the next id where a program starts (so the atomic's latency
//   runs under the program) into one of two shared slots, and every thread reads it after a barrier at the
//   program's end; the slot written at program p + 1 is not the one read at the end of p;
// - with one, the producer draws (thread 0 of the warpgroup, once it has issued the last program's copies; drawn
//   a program ahead, the ids balanced the causal tiles worse: worklog §77) and publishes each id in a two-slot
//   ring, kiln_program_ring, with a full and an empty mbarrier a slot. Every consumer thread and every producer
//   thread (the one that drew too) reads it and arrives on the slot's empty barrier itself, so that each read is
//   ordered before the next write by the reader's own release (one lane's arrival after __syncwarp releases that
//   lane's read only, and compute-sanitizer's racecheck reports the others'). The id past the last program ends
//   every loop. On the TMA path the producer's first warp runs the loop (lane 0 issues the copies), not one
//   thread, so that every producer warp takes the id through kiln::warp_uniform: read by one thread from shared
//   memory, the id made the producer's 56 registers spill (24-124 bytes), likely because ptxas then keeps what it
//   computes from the id out of its uniform registers; taken whole-warp, nothing spills at the D = 128 tiles. The consumers read the id through kiln::warp_uniform where products are wgmma, so that ptxas
//   knows the loops it bounds are not divergent (a divergent path to a wgmma serialises it, C7520).
#include "codegen/emitter.h"

namespace kiln::emit_detail {

namespace {
constexpr const char* kDrawComment = "the next program: the first CTA done takes it (kiln::draw_program)";
} // namespace

std::string Emitter::warp_uniform_read(const std::string& value) {
  if (!plan_.any_wgmma())
    return value;
  need_helper("kiln::warp_uniform", std::string(warp_uniform_prelude_source()));
  return "kiln::warp_uniform(" + value + ")";
}

std::string Emitter::program_ring_declarations() const {
  if (!plan_.persistent.dynamic())
    return "";
  if (!plan_.ws.on()) // thread 0's draws; no barrier
    return "  __shared__ int kiln_drawn_program[2]; // a dynamic persistent grid: the next program, drawn by thread 0\n";
  return "  __shared__ int kiln_program_ring[2]; // a dynamic persistent grid: program ids, producer to consumers\n"
         "  __shared__ __align__(8) unsigned long long kiln_program_full[2], kiln_program_empty[2];\n";
}

std::string Emitter::program_ring_init() const {
  if (!plan_.persistent.dynamic() || !plan_.ws.on())
    return "";
  return fmt::format("    for (int s = 0; s < 2; ++s) {{\n"
                     "      kiln::mbarrier_init(kiln::smem_u32(&kiln_program_full[s]), 1);\n"
                     "      kiln::mbarrier_init(kiln::smem_u32(&kiln_program_empty[s]), {});\n    }}\n",
                     threads_ + 32);
}

void Emitter::open_program_loop() {
  const PersistentGrid& p = plan_.persistent;
  if (!p.dynamic() && p.second_buffers_end > 0) { // the turn picks the prefetched tiles' buffer
    line("for (int kiln_program = blockIdx.x, kiln_turn = 0; kiln_program < kiln_programs; "
         "kiln_program += gridDim.x, ++kiln_turn) {{ // persistent grid; turn k reads buffer k % 2 of {} tile(s)",
         p.prefetches.size());
    open();
  } else if (!p.dynamic()) {
    line("for (int kiln_program = blockIdx.x; kiln_program < kiln_programs; kiln_program += gridDim.x) {{ // "
         "persistent grid");
    open();
  } else if (!plan_.ws.on()) {
    line("int kiln_program = blockIdx.x;");
    line("for (int kiln_turn = 0; kiln_program < kiln_programs; ++kiln_turn) {{ // persistent grid, dynamic");
    open();
    line("if (threadIdx.x == 0) // {}", kDrawComment);
    line("  kiln_drawn_program[kiln_turn & 1] = kiln::draw_program(kiln_program_counter, kiln_programs);");
  } else {
    line("for (int kiln_turn = 0;; ++kiln_turn) {{ // persistent grid, dynamic: the producer's ids");
    open();
    line("kiln::mbarrier_wait(kiln::smem_u32(&kiln_program_full[kiln_turn & 1]), (kiln_turn >> 1) & 1);");
    const std::string id = "kiln_program_ring[kiln_turn & 1]";
    line("const int kiln_program = {};", warp_uniform_read(id));
    line("kiln::mbarrier_arrive(kiln::smem_u32(&kiln_program_empty[kiln_turn & 1])); // this thread has read it");
    line("if (kiln_program >= kiln_programs)");
    line("  break;");
  }
  forget_scratch_reads(); // the previous program's reductions may still be read
  for (const PersistentPrefetch& f : p.prefetches)
    if (f.double_buffered())
      stage_var_[f.load] = "(kiln_turn & 1)";
}

void Emitter::close_program_loop() {
  emit_producer_tile_releases();
  for (const PersistentPrefetch& f : plan_.persistent.prefetches)
    stage_var_.erase(f.load);
  if (plan_.persistent.dynamic() && !plan_.ws.on()) {
    line("__syncthreads(); // thread 0's draw is visible, and every thread is past this program");
    line("kiln_program = {};", warp_uniform_read("kiln_drawn_program[kiln_turn & 1]"));
  }
  close();
  line("}}");
}

void Emitter::open_producer_program_loop() {
  if (!plan_.persistent.dynamic() && plan_.producer_tiles.on()) { // the turn picks the copied tiles' buffer
    line("for (int kiln_program = blockIdx.x, kiln_turn = 0; kiln_program < kiln_programs; "
         "kiln_program += gridDim.x, ++kiln_turn) {{ // persistent grid; turn k fills buffer k % 2 of the tiles "
         "copied before the loops");
    open();
    return;
  }
  if (!plan_.persistent.dynamic()) {
    line("for (int kiln_program = blockIdx.x; kiln_program < kiln_programs; kiln_program += gridDim.x) {{ // "
         "persistent grid");
    open();
    return;
  }
  need_helper("kiln::warp_uniform", std::string(warp_uniform_prelude_source()));
  line("for (int kiln_turn = 0;; ++kiln_turn) {{ // persistent grid, dynamic: draw, publish, read, copy");
  open();
  line("if (kiln_ptid == 0) {{");
  line("  // {}", kDrawComment);
  line("  const int kiln_drawn = kiln_turn > 0 ? kiln::draw_program(kiln_program_counter, kiln_programs) : "
       "(int)blockIdx.x;");
  line("  // the slot's last id has been read (the first two turns find both slots free)");
  line("  kiln::mbarrier_wait(kiln::smem_u32(&kiln_program_empty[kiln_turn & 1]), ((kiln_turn >> 1) & 1) ^ 1);");
  line("  kiln_program_ring[kiln_turn & 1] = kiln_drawn;");
  line("  kiln::mbarrier_arrive(kiln::smem_u32(&kiln_program_full[kiln_turn & 1])); // releases the write");
  line("}}");
  line("kiln::mbarrier_wait(kiln::smem_u32(&kiln_program_full[kiln_turn & 1]), (kiln_turn >> 1) & 1);");
  line("const int kiln_program = kiln::warp_uniform(kiln_program_ring[kiln_turn & 1]); // each producer warp whole");
  line("kiln::mbarrier_arrive(kiln::smem_u32(&kiln_program_empty[kiln_turn & 1]));");
  line("if (kiln_program >= kiln_programs)");
  line("  break;");
}

std::string Emitter::next_program_id() {
  const PersistentGrid& p = plan_.persistent;
  if (!p.dynamic())
    return "kiln_program + (int)gridDim.x";
  if (!plan_.ws.on()) // drawn where the program started; the prefetch's barrier has passed since
    return "kiln_drawn_program[kiln_turn & 1]";
  // The next turn's slot, once the producer has published it (read again, and released, when that turn starts).
  line("kiln::mbarrier_wait(kiln::smem_u32(&kiln_program_full[(kiln_turn + 1) & 1]), ((kiln_turn + 1) >> 1) & 1);");
  return "kiln_program_ring[(kiln_turn + 1) & 1]";
}

} // namespace kiln::emit_detail
