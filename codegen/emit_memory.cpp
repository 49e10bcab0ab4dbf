// Emitter: global loads, stores and atomics through pointer tensors and block pointers, and the cp.async
// copies of shared operand tiles (see emitter.h).
#include "codegen/emitter.h"

namespace kiln::emit_detail {

// ---------------------------------------------------------------------------------------------

// The run-time half of "this group is one aligned vector": nothing when the plan knows the addresses are.
std::string alignment_check(const AccessPlan& access, const std::string& p, int bytes) {
  return access.aligned ? ""
                        : fmt::format(" && reinterpret_cast<unsigned long long>({}[g]) % {} == 0", p, bytes);
}

// One vector load of `count` elements of type `ty` (bytes in all) into dst[g ...], taken where `vector_ok`
// holds, element by element (`element`, an expression of i) otherwise. Both branches fill the same 32-bit
// words and the elements are taken out of them after the branches merge: merged element by element, every
// 16-bit (or 8-bit) element would hold a register of its own until it is used, where the words hold two (or
// four) a register (ptxas spilled 4 bytes of the tutorial LayerNorm at its 32-register cap for that).
void Emitter::emit_vector_load_or_elements(const std::string& vector_ok, const std::string& ptr, const std::string& ty,
                                           int count, int bytes, const std::string& dst, const std::string& element) {
  if (bytes % 4 != 0) { // a 2-byte vector: nothing to merge in words
    line("  if ({}) {{", vector_ok);
    line("    alignas(16) {} kiln_v[{}];", ty, count);
    line("    kiln::ld_global<{}>({}, kiln_v);", bytes, ptr);
    line("    #pragma unroll");
    line("    for (int i = 0; i < {}; ++i) {}[g + i] = kiln_v[i];", count, dst);
    line("  }} else {{");
    line("    #pragma unroll");
    line("    for (int i = 0; i < {}; ++i) {}[g + i] = {};", count, dst, element);
    line("  }}");
    return;
  }
  const int words = bytes / 4;
  line("  kiln::u32 kiln_w[{}];", words);
  line("  if ({}) {{", vector_ok);
  line("    kiln::ld_global<{}>({}, kiln_w);", bytes, ptr);
  line("  }} else {{");
  line("    alignas(16) {} kiln_e[{}];", ty, count);
  line("    #pragma unroll");
  line("    for (int i = 0; i < {}; ++i) kiln_e[i] = {};", count, element);
  line("    #pragma unroll");
  line("    for (int i = 0; i < {}; ++i) kiln_w[i] = reinterpret_cast<const kiln::u32*>(kiln_e)[i];", words);
  line("  }}");
  line("  alignas(16) {} kiln_v[{}];", ty, count);
  line("  #pragma unroll");
  line("  for (int i = 0; i < {}; ++i) reinterpret_cast<kiln::u32*>(kiln_v)[i] = kiln_w[i];", words);
  line("  #pragma unroll");
  line("  for (int i = 0; i < {}; ++i) {}[g + i] = kiln_v[i];", count, dst);
}

void Emitter::emit_pointer_load(const Op& op) {
  order_global_memory();
  ValueId r = op.result();
  const Layout& L = layout_of(r);
  std::string p = regs(op.operands[0], L);
  std::string m = op.has_mask ? regs(op.operands[1], L) : "";
  std::string o = op.has_mask ? regs(op.operands[2], L) : "";
  std::string n = declare_regs(r, L);
  name_[r] = n;
  const AccessPlan& access = plan_.accesses.at(&op);
  int V = access.vector;
  if (V > 1) {
    // Groups of V registers hold V consecutive elements: one vector load when the group is wholly
    // unmasked and aligned, element by element otherwise.
    int bytes = V * dtype_bytes(k_.type(r).elem);
    std::string ty = ctype(k_.type(r).elem);
    line("#pragma unroll");
    line("for (int g = 0; g < {}; g += {}) {{", L.num_regs(), V);
    std::string full = "true";
    if (op.has_mask)
      for (int i = 0; i < V; ++i)
        full += fmt::format(" && {}[g + {}]", m, i);
    emit_vector_load_or_elements(full + alignment_check(access, p, bytes), p + "[g]", ty, V, bytes, n,
                                 op.has_mask ? fmt::format("{0}[g + i] ? *{1}[g + i] : {2}[g + i]", m, p, o)
                                             : fmt::format("*{}[g + i]", p));
    line("}}");
    return;
  }
  for_regs(L.num_regs());
  if (op.has_mask)
    line("  {0}[r] = {1}[r] ? *{2}[r] : {3}[r];", n, m, p, o);
  else
    line("  {}[r] = *{}[r];", n, p);
  line("}}");
}

void Emitter::emit_pointer_store(const Op& op) {
  ValueId v = op.operands[1];
  if (op.kind == OpKind::Store && k_.type(v).shape.empty()) {
    // Every thread holds the scalar and its address: thread 0 writes it.
    note_global_store(op);
    const std::string store = fmt::format("*{} = {};", scalar(op.operands[0]), scalar(v));
    line("if (threadIdx.x == 0{}) {}", op.has_mask ? " && " + scalar(op.operands[2]) : "", store);
    return;
  }
  const Layout L = access_layout(k_, plan_, op);
  std::string p = regs(op.operands[0], L);
  std::string x = regs(v, L);
  std::string m = op.has_mask ? regs(op.operands[2], L) : "";
  std::string owner = owner_predicate(L);
  note_global_store(op);
  // An atomic add whose old values nobody reads is a reduction (`red`): no value comes back, so the updates
  // pipeline; on sm_90, runs of f32 proven contiguous go two or four at a time (analyze_contiguity).
  const AccessPlan& access = plan_.accesses.at(&op);
  const bool reduce_only = access.reduce_only;
  std::string result;
  if (op.kind == OpKind::AtomicAdd && !reduce_only) {
    result = declare_regs(op.result(), L);
    name_[op.result()] = result;
  }
  line("if ({}) {{", owner);
  open();
  const int V = access.vector;
  if (V > 1) { // as in emit_pointer_load: whole aligned unmasked groups in one vector store or reduction
    const int bytes = V * dtype_bytes(k_.type(v).elem);
    std::string full = "true";
    if (op.has_mask)
      for (int i = 0; i < V; ++i)
        full += fmt::format(" && {}[g + {}]", m, i);
    line("#pragma unroll");
    line("for (int g = 0; g < {}; g += {}) {{", L.num_regs(), V);
    line("  if ({}{}) {{", full, alignment_check(access, p, bytes));
    if (reduce_only) {
      std::string args;
      for (int i = 0; i < V; ++i)
        args += fmt::format(", {}[g + {}]", x, i);
      line("    kiln::red_add_v{}({}[g]{});", V, p, args);
    } else {
      line("    alignas(16) {} kiln_v[{}];", ctype(k_.type(v).elem), V);
      line("    #pragma unroll");
      line("    for (int i = 0; i < {}; ++i) kiln_v[i] = {}[g + i];", V, x);
      line("    kiln::st_global<{}>({}[g], kiln_v);", bytes, p);
    }
    line("  }} else {{");
    line("    #pragma unroll");
    line("    for (int i = 0; i < {}; ++i)", V);
    const std::string guard = op.has_mask ? m + "[g + i]" : "true";
    if (reduce_only)
      line("      if ({}) kiln::red_add({}[g + i], {}[g + i]);", guard, p, x);
    else
      line("      if ({}) *{}[g + i] = {}[g + i];", guard, p, x);
    line("  }}");
    line("}}");
    close();
    line("}}");
    return;
  }
  for_regs(L.num_regs());
  std::string guard = op.has_mask ? m + "[r]" : "true";
  if (reduce_only)
    line("  if ({}) kiln::red_add({}[r], {}[r]);", guard, p, x);
  else if (op.kind == OpKind::AtomicAdd)
    line("  if ({}) {}[r] = kiln::atomic_add({}[r], {}[r]);", guard, result, p, x);
  else
    line("  if ({}) *{}[r] = {}[r];", guard, p, x);
  line("}}");
  close();
  line("}}");
}

// A block-pointer load: into shared memory (a dot operand: cp.async, maybe pipelined) or registers.
void Emitter::emit_block_load(const Op& op) {
  order_global_memory();
  ValueId r = op.result();
  std::string bp = scalar(op.operands[0]);
  const Type& bt = k_.type(op.operands[0]);
  if (plan_.where(r) == Placement::Shared) {
    const SharedTile& t = plan_.tiles[plan_.tile_of.at(r)];
    if (plan_.is_pipelined(t)) { // issued ahead by emit_for; the first load of the loop waits for the stage
      if (const Op* loop = plan_.loop_of_pipelined(&op); plan_.ws.tile_barriers && plan_.ws.specializes(loop)) {
        emit_tile_wait(*loop, op, stage_var_.at(&op)); // every tile where it is loaded (plan_tile_barriers.h)
        return;
      }
      if (const Op* loop = plan_.loop_waiting_at(&op)) {
        if (plan_.ahead.dots.count(loop)) {
          line("// the slot was waited for where this iteration's product was issued, one iteration ahead");
        } else {
          emit_stage_wait(*loop, t, stage_var_.at(&op));
          if (!plan_.ws.specializes(loop)) // a producer's tiles are visible once the slot's barrier completes
            publish_shared_tiles();
        }
      }
      return;
    }
    if (plan_.producer_tiles.index_of(&op) >= 0)
      return emit_producer_tile_wait(op);
    const PersistentPrefetch* prefetch = plan_.persistent.prefetch_of(&op);
    const bool prefetched = prefetch != nullptr;
    if (prefetched) {
      line("if (kiln_program == blockIdx.x) {{ // this CTA's first program copies its own tile; each later one's "
           "copy was issued by the program before it");
      open();
    } else {
      line("{} // the tile's previous readers are done", cta_barrier());
    }
    emit_tile_issue(t, bp, "0");
    line("kiln::cp_async_commit();");
    if (prefetched) {
      close();
      line("}}");
    }
    if (plan_.unwaited_loads.count(&op)) {
      line("// waited for with the first tiles of the pipelined loop that reads it");
      return;
    }
    if (prefetched && prefetch->double_buffered() && plan_.any_wgmma()) // ordered before the barrier below
      line("kiln::wgmma_wait<0>(); // the program before has no product left on the buffer the next copy fills");
    line("kiln::cp_async_wait_all();");
    publish_shared_tiles();
    return;
  }
  if (auto staged = plan_.tile_of.find(r); staged != plan_.tile_of.end()) {
    emit_staged_block_load(op, plan_.tiles[staged->second]);
    return;
  }
  const Layout& L = layout_of(r);
  std::string n = declare_regs(r, L);
  name_[r] = n;
  std::string pad = literal(op.padding.value, bt.elem);
  if (emit_vector_block_load(op, bp, bt, L, n, pad))
    return;
  for_regs(L.num_regs());
  auto [ok, addr] = block_element(op, bp, bt, L);
  line("  {}[r] = ({}) ? {}.base[{}] : {};", n, ok, bp, addr, pad);
  line("}}");
}

void Emitter::emit_next_program_copy(const PersistentPrefetch& p) {
  const SharedTile& t = plan_.tiles[plan_.tile_of.at(p.load->result())];
  std::string stage = "0";
  if (p.double_buffered()) {
    // Every consumer passed the barrier that published this program's tile, so the program before, the other
    // buffer's last reader, is done everywhere.
    line("// persistent grid: the next program's tile of {} ({}), copied into the other buffer while this program "
         "runs",
         p.load->loc.str(), value_hint(p.load->result()));
    stage = "((kiln_turn + 1) & 1)";
  } else {
    line("// persistent grid: the next program's tile of {} ({}), copied while this program finishes",
         p.load->loc.str(), value_hint(p.load->result()));
    if (plan_.any_wgmma())
      line("kiln::wgmma_wait<0>(); // this thread's products that read the tile are done ...");
    line("{} // ... and every thread's", cta_barrier());
    set_scratch_reads(ScratchReads::None);
  }
  const std::string next = fresh("next_program"); // one per prefetched tile (SPLIT_D prefetches two Q tiles)
  line("const int {} = {};", next, next_program_id());
  line("if ({} < kiln_programs) {{", next);
  open();
  // The block pointer's scalars again, for the next program id, under fresh names; this program's stay as they were.
  std::vector<std::pair<ValueId, std::string>> saved;
  for (const Op* op : p.slice)
    saved.emplace_back(op->result(), name_.at(op->result()));
  program_id_override_ = next;
  for (const Op* op : p.slice)
    emit_scalar_op(*op);
  program_id_override_.clear();
  emit_tile_issue(t, scalar(p.load->operands[0]), stage);
  line("kiln::cp_async_commit();");
  for (const auto& [v, name] : saved)
    name_[v] = name;
  close();
  line("}}");
}

// A block load into registers in the plan's pieces along the block's contiguous dim
// (LoweringPlan::block_accesses): one ld.global per piece that is aligned and wholly inside the tensor, element
// by element (with the padding outside) otherwise. Returns false (nothing emitted) when the plan reads the tile
// element by element.
bool Emitter::emit_vector_block_load(const Op& op, const std::string& bp, const Type& bt, const Layout& L,
                                     const std::string& n, const std::string& pad) {
  auto it = plan_.block_accesses.find(&op);
  const int run = it == plan_.block_accesses.end() ? 0 : it->second.piece;
  if (run == 0)
    return false;
  const int cdim = bt.order[0];
  KILN_INTERNAL_CHECK(register_run(L, cdim, run) == run, "block load at {}: pieces of {} longer than the layout's runs",
                      op.loc.str(), run);
  const int bytes = run * dtype_bytes(bt.elem);
  line("#pragma unroll");
  line("for (int g = 0; g < {}; g += {}) {{", L.num_regs(), run);
  std::string other_ok = "true", addr = "0";
  for (int d = 0; d < bt.rank(); ++d) {
    line("  const long long c{} = {}.off[{}] + {};", d, bp, d, coord(L, d, "g"));
    if (d != cdim && op.checks_dim(d))
      other_ok += " && " + in_bounds(fmt::format("c{}", d), bp, d);
    addr += fmt::format(" + c{0} * {1}.stride[{0}]", d, bp);
  }
  const bool check_c = op.checks_dim(cdim);
  std::string whole = check_c ? " && " + run_in_bounds(fmt::format("c{}", cdim), bp, cdim, run) : "";
  line("  const {} * const kiln_p = {}.base + ({});", ctype(bt.elem), bp, addr);
  emit_vector_load_or_elements(
      fmt::format("{}{} && {}.stride[{}] == 1 && reinterpret_cast<unsigned long long>(kiln_p) % {} == 0", other_ok,
                  whole, bp, cdim, bytes),
      "kiln_p", ctype(bt.elem), run, bytes, n,
      fmt::format("({}{}) ? kiln_p[i * {}.stride[{}]] : {}", other_ok,
                  check_c ? " && " + in_bounds(fmt::format("c{} + i", cdim), bp, cdim) : "", bp, cdim, pad));
  line("}}");
  return true;
}

void Emitter::emit_block_store(const Op& op) {
  note_global_store(op);
  std::string bp = scalar(op.operands[0]);
  const Type& bt = k_.type(op.operands[0]);
  ValueId v = op.operands[1];
  const Layout L = access_layout(k_, plan_, op);
  std::string x = regs(v, L);
  if (auto tma = plan_.tma_stores.ops.find(&op); tma != plan_.tma_stores.ops.end())
    return emit_tma_store(op, tma->second, bp, L, x);
  if (emit_vector_block_store(op, bp, bt, L, x))
    return;
  emit_block_elements(op, bp, bt, L, x, /*add=*/false);
}

// Each owned register's element of the block, stored (or, with `add`, added by `red`) where its checked dims
// leave it inside the tensor.
void Emitter::emit_block_elements(const Op& op, const std::string& bp, const Type& bt, const Layout& L,
                                  const std::string& x, bool add) {
  line("if ({}) {{", owner_predicate(L));
  open();
  for_regs(L.num_regs());
  auto [ok, addr] = block_element(op, bp, bt, L);
  if (add)
    line("  if ({}) kiln::red_add({}.base + ({}), {}[r]);", ok, bp, addr, x);
  else
    line("  if ({}) {}.base[{}] = {}[r];", ok, bp, addr, x);
  line("}}");
  close();
  line("}}");
}

// A register tile stored through a block pointer in the plan's pieces along the block's contiguous dim
// (LoweringPlan::block_accesses), after the plan's lane exchanges that widen the threads' runs, if any (a
// conversion by register shuffles: one shuffle per register pair and exchange). A piece that is misaligned
// or crosses the boundary is stored element by element. Returns false (nothing emitted) when the plan stores
// the tile element by element.
bool Emitter::emit_vector_block_store(const Op& op, const std::string& bp, const Type& bt, const Layout& L,
                                      const std::string& x) {
  const DType elem = bt.elem;
  const int eb = dtype_bytes(elem);
  const int run = plan_.block_accesses.at(&op).piece;
  if (run == 0)
    return false;
  const int cdim = bt.order[0];
  const LayoutConversion* widen =
      planned_conversion(op.operands[1], ConversionMethod::RegisterShuffles, nullptr, /*optional=*/true);
  const Layout& W = widen ? widen->to : L;
  const std::vector<LaneRegisterSwap> swaps = widen ? widen->swaps : std::vector<LaneRegisterSwap>{};
  KILN_INTERNAL_CHECK(register_run(W, cdim, 16 / eb) == run,
                      "block store at {}: pieces of {} need a widening of the stored layout the plan lacks",
                      op.loc.str(), run);
  const int n = W.num_regs();
  std::string w = x;
  if (!swaps.empty()) {
    w = fresh("wide");
    line("{} {}[{}];", ctype(elem), w, n);
    line("#pragma unroll");
    line("for (int r = 0; r < {}; ++r) {}[r] = {}[r];", n, w, x);
    for (const LaneRegisterSwap& sw : swaps) {
      const int other = 1 << sw.reg_bit, lane_mask = 1 << sw.lane_bit;
      line("#pragma unroll");
      line("for (int r = 0; r < {}; r += {}) {{", n, eb == 2 ? 2 : 1);
      if (eb == 2)
        line("  if (((r >> {}) & 1) == 0) kiln::exchange_lane_bit_pair({}[r], {}[r + 1], {}[r + {}], {}[r + "
             "{}], {});",
             sw.reg_bit, w, w, w, other, w, other + 1, lane_mask);
      else
        line("  if (((r >> {}) & 1) == 0) kiln::exchange_lane_bit({}[r], {}[r + {}], {});", sw.reg_bit, w, w,
             other, lane_mask);
      line("}}");
    }
  }
  emit_block_pieces(op, bp, bt, W, w, run, [&] {
    line("    alignas(16) {} kiln_v[{}];", ctype(elem), run);
    line("    #pragma unroll");
    line("    for (int i = 0; i < {}; ++i) kiln_v[i] = {}[g + i];", run, w);
    line("    kiln::st_global<{}>(kiln_p, kiln_v);", run * eb);
  });
  return true;
}

// Pieces of `run` consecutive registers of `w` (layout W) along the block's contiguous dim, each at kiln_p: `whole`
// emits the access of a piece that is aligned and wholly inside the tensor, the others go element by element
// (a store, or for an atomic add a `red`).
void Emitter::emit_block_pieces(const Op& op, const std::string& bp, const Type& bt, const Layout& W,
                                const std::string& w, int run, const std::function<void()>& whole) {
  const int cdim = bt.order[0];
  const int n = W.num_regs();
  line("if ({}) {{", owner_predicate(W));
  open();
  line("#pragma unroll");
  line("for (int g = 0; g < {}; g += {}) {{", n, run);
  std::string other_ok = "true", addr = "0";
  for (int d = 0; d < bt.rank(); ++d) {
    line("  const long long c{} = {}.off[{}] + {};", d, bp, d, coord(W, d, "g"));
    if (d != cdim && op.checks_dim(d))
      other_ok += " && " + in_bounds(fmt::format("c{}", d), bp, d);
    addr += fmt::format(" + c{0} * {1}.stride[{0}]", d, bp);
  }
  const bool check_c = op.checks_dim(cdim);
  std::string whole_inside = check_c ? " && " + run_in_bounds(fmt::format("c{}", cdim), bp, cdim, run) : "";
  line("  {} * const kiln_p = {}.base + ({});", ctype(bt.elem), bp, addr);
  line("  if ({}{} && {}.stride[{}] == 1 && reinterpret_cast<unsigned long long>(kiln_p) % {} == 0) {{",
       other_ok, whole_inside, bp, cdim, run * dtype_bytes(bt.elem));
  whole();
  line("  }} else {{");
  line("    #pragma unroll");
  line("    for (int i = 0; i < {}; ++i)", run);
  const std::string inside = other_ok + (check_c ? " && " + in_bounds(fmt::format("c{} + i", cdim), bp, cdim) : "");
  if (op.kind == OpKind::AtomicAddBlock)
    line("      if ({}) kiln::red_add(kiln_p + i * {}.stride[{}], {}[g + i]);", inside, bp, cdim, w);
  else
    line("      if ({}) kiln_p[i * {}.stride[{}]] = {}[g + i];", inside, bp, cdim, w);
  line("  }}");
  line("}}");
  close();
  line("}}");
}

// Copies a block into a shared tile (stage `stage` of its ring): 16-byte cp.async chunks with zero
// fill outside the boundary when the block is aligned, element by element otherwise.
void Emitter::emit_tile_issue(const SharedTile& t, const std::string& bp, const std::string& stage) {
  order_global_memory();
  const Op& op = *t.load;
  if (k_.type(op.operands[0]).rank() == 1) {
    emit_vector_tile_issue(t, bp, stage);
    return;
  }
  int cdim = t.contig_dim, sdim = 1 - cdim;
  int per_chunk = 16 / t.elem_bytes;
  int64_t cpr = t.cols / per_chunk, chunks = t.rows * cpr;
  bool check_c = op.checks_dim(cdim);
  bool check_s = op.checks_dim(sdim);
  std::string base = fmt::format("({} + ({}) * {})", t.offset, stage, stage_stride(t));
  std::string ty = ctype(k_.type(op.result()).elem);
  line("{{ // {} -> shared [{} x {}] {}", op.loc.str(), t.rows, t.cols, ty);
  open();
  line("const bool kiln_fast = {0}.stride[{1}] == 1 && (reinterpret_cast<unsigned long long>({0}.base) % 16) "
       "== 0 && "
       "{0}.stride[{2}] % {3} == 0 && {0}.off[{1}] % {3} == 0{4};",
       bp, cdim, sdim, per_chunk,
       check_c ? fmt::format(" && {}.shape[{}] % {} == 0", bp, cdim, per_chunk) : "");
  if (opt_.async_copy && threads_ % cpr == 0 && (threads_ / cpr) % 8 == 0) {
    // Thread x copies chunk x % cpr of rows x / cpr + i * R (R = threads / cpr rows apart). R is a multiple
    // of the swizzle's 8-row period, so every chunk a thread copies has the same swizzled column: the
    // addresses are worked out once, and each further chunk is one step along global and shared memory.
    const int64_t R = threads_ / cpr;
    line("if (kiln_fast) {{");
    open();
    line("const int row0 = threadIdx.x / {0}, chunk = threadIdx.x % {0};", cpr);
    line("const long long gs0 = {}.off[{}] + row0, gc = {}.off[{}] + chunk * {};", bp, sdim, bp, cdim,
         per_chunk);
    line("const {0}* const src0 = {1}.base + gs0 * {1}.stride[{2}] + gc;", ty, bp, sdim);
    line("const long long src_step = {}LL * {}.stride[{}];", R, bp, sdim);
    line("const unsigned dst0 = kiln::smem_u32(kiln_smem + {} + {});", base,
         stage_offset(t, "row0", "chunk"));
    std::string ok_c = check_c ? in_bounds("gc", bp, cdim) : "true";
    line("const bool ok_c = {};", ok_c);
    auto copy_rows = [&](const std::string& ok) {
      line("#pragma unroll");
      line("for (int i = 0; i < {}; ++i) {{", (t.rows + R - 1) / R);
      if (t.rows % R)
        line("  if (row0 + i * {} >= {}) break;", R, t.rows);
      line("  const bool ok = {};", ok);
      line("  kiln::cp_async_16(dst0 + i * {}, ok ? src0 + i * src_step : {}.base, ok);",
           R * geometry(t).line_bytes(), bp);
      line("}}");
    };
    auto copy_checked_rows = [&] {
      if (!check_s)
        return copy_rows("ok_c");
      // The rows inside, as a 32-bit window [rows_lo, rows_hi) of steps from row0 (clamped to the tile), so
      // that each chunk's check is two compares with constants, not 64-bit arithmetic.
      line("const long long kiln_hi = {}.shape[{}] - gs0;", bp, sdim);
      line("const int rows_lo = gs0 >= 0 ? 0 : (gs0 < -{0} ? {0} : (int)-gs0);", t.rows);
      line("const int rows_hi = kiln_hi <= 0 ? 0 : (kiln_hi > {0} ? {0} : (int)kiln_hi);", t.rows);
      copy_rows(fmt::format("ok_c && i * {0} >= rows_lo && i * {0} < rows_hi", R));
    };
    if ((check_s || check_c) && t.loop() && plan_.deferred_dots.count(t.loop())) {
      // A matmul-style loop does nothing but copy and multiply, so its speed is the rate at which it issues
      // copies: a tile wholly inside the tensor (every one but the edges) gets copies with no checks at all.
      // Elsewhere (FA2's masked keys) the second copy of the code costs more registers than it saves.
      std::string inside = "true";
      for (int d : {sdim, cdim})
        if (d == sdim ? check_s : check_c)
          inside +=
              " && " + run_in_bounds(fmt::format("{}.off[{}]", bp, d), bp, d, d == sdim ? t.rows : t.cols);
      line("if ({}) {{", inside);
      open();
      copy_rows("true");
      close();
      line("}} else {{");
      open();
      copy_checked_rows();
      close();
      line("}}");
    } else {
      copy_checked_rows();
    }
    close();
    line("}} else {{");
  } else if (opt_.async_copy) {
    line("if (kiln_fast) {{");
    open();
    line("#pragma unroll");
    line("for (int i = 0; i < {}; ++i) {{", (chunks + threads_ - 1) / threads_);
    line("  const int c = threadIdx.x + i * {};", threads_);
    if (chunks % threads_)
      line("  if (c >= {}) break;", chunks);
    line("  const int row = c / {}, chunk = c % {};", cpr, cpr);
    line("  const long long gs = {}.off[{}] + row, gc = {}.off[{}] + chunk * {};", bp, sdim, bp, cdim,
         per_chunk);
    std::string ok = "true";
    if (check_s)
      ok += " && " + in_bounds("gs", bp, sdim);
    if (check_c)
      ok += " && " + in_bounds("gc", bp, cdim);
    line("  const bool ok = {};", ok);
    line("  const {}* src = ok ? {}.base + gs * {}.stride[{}] + gc : {}.base;", ty, bp, bp, sdim, bp);
    line("  kiln::cp_async_16(kiln::smem_u32(kiln_smem + {} + {}), src, ok);", base,
         stage_offset(t, "row", "chunk"));
    line("}}");
    close();
    line("}} else {{");
  } else {
    line("{{");
  }
  open();
  line("for (int e = threadIdx.x; e < {}; e += {}) {{", t.rows * t.cols, threads_);
  line("  const int row = e / {}, col = e % {};", t.cols, t.cols);
  line("  const long long gs = {}.off[{}] + row, gc = {}.off[{}] + col;", bp, sdim, bp, cdim);
  std::string ok = "true";
  if (check_s)
    ok += " && " + in_bounds("gs", bp, sdim);
  if (check_c)
    ok += " && " + in_bounds("gc", bp, cdim);
  std::string pad = literal(op.padding.value, k_.type(op.result()).elem);
  line("  const {} v = ({}) ? {}.base[gs * {}.stride[{}] + gc * {}.stride[{}]] : {};", ty, ok, bp, bp, sdim,
       bp, cdim, pad);
  line("  *reinterpret_cast<{}*>(kiln_smem + {} + {} + (col % {}) * {}) = v;", ty, base,
       stage_offset(t, "row", fmt::format("(col / {})", per_chunk)), per_chunk, t.elem_bytes);
  line("}}");
  close();
  line("}}");
  close();
  line("}}");
}

// ---------------------------------------------------------------------------------------------

} // namespace kiln::emit_detail
