// Emitter: atomic_add through a block pointer (OpKind::AtomicAddBlock), from registers (`red`, in the plan's f32
// pieces by `red.v2`/`.v4` on sm_90) or, as plan_bulk_reductions decided, through a shared-memory stage (one of two
// in turn, where two fit) and either TMA tensor reductions, one a 128-byte panel of the stage in kiln's shared
// format, or one bulk reduction for the block where its rows are contiguous in the tensor and it lies inside, else
// one a row.
#include "codegen/emitter.h"

namespace kiln::emit_detail {

// The block's registers `x` (layout L) to the stage, as plan_stage_writes decided: in 8-byte pairs where they are
// the next column's, and where a lane's registers are rotated, register j ^ kiln_rot in store j: the registers are
// permuted first by one select a register for each bit of the masks (w[j] = x[j ^ kiln_rot]), and each store's
// place is register j ^ kiln_rot's.
void Emitter::emit_stage_writes(const BulkReduction& b, const Layout& L, const std::string& x) {
  const StageWrites& w = b.writes;
  const int n = L.num_regs();
  std::string src = x, at = "r";
  if (w.rotated()) {
    std::string rot;
    int bits = 0;
    for (size_t lb = 0; lb < w.lane_masks.size(); ++lb) {
      if (w.lane_masks[lb] == 0)
        continue;
      rot += fmt::format("{}(((kiln_lane >> {}) & 1) * {})", rot.empty() ? "" : " ^ ", lb, w.lane_masks[lb]);
      bits |= w.lane_masks[lb];
    }
    line("const int kiln_rot = {}; // this lane's order: its rows share banks with other lanes' (stage_write_banks.h)",
         rot);
    for (int bit = 0; (1 << bit) <= bits; ++bit) {
      if (!((bits >> bit) & 1))
        continue;
      const std::string next = fmt::format("kiln_rot{}", bit);
      line("float {}[{}];", next, n);
      for_regs(n);
      line("  {0}[r] = (kiln_rot >> {1}) & 1 ? {2}[r ^ {3}] : {2}[r];", next, bit, src, 1 << bit);
      line("}}");
      src = next;
    }
    at = "(r ^ kiln_rot)";
  }
  if (w.by_register_bits()) { // the lane's offset once, each store's chunk XOR and add constants of r
    const std::string row0 = coord(L, b.row_dim, "0"), col0 = coord(L, b.col_dim, "0");
    line("const unsigned kiln_lane_at = {} + ({}) % 4 * 4; // register 0's byte in the stage",
         b.stage_format().chunk_offset_expr(row0, fmt::format("({}) / 4", col0)), col0);
    std::string x = "0", a = "0";
    for (size_t bit = 0; bit < w.chunk_xor.size(); ++bit) {
      if (w.chunk_xor[bit])
        x += fmt::format(" ^ ((r >> {}) & 1) * {}", bit, w.chunk_xor[bit]);
      if (w.byte_add[bit] && !(w.vector == 2 && bit == 0))
        a += fmt::format(" + ((r >> {}) & 1) * {}", bit, w.byte_add[bit]);
    }
    const std::string addr = fmt::format("kiln::smem_u32(kiln_stage) + ((kiln_lane_at ^ ({})) + ({}))", x, a);
    line("#pragma unroll");
    line("for (int r = 0; r < {}; r += {}) {{", n, w.vector);
    if (w.vector == 2)
      line("  kiln::st_shared_f32x2({}, {}[r], {}[r + 1]);", addr, src, src);
    else
      line("  kiln::st_shared_f32({}, {}[r]);", addr, src);
    line("}}");
    return;
  }
  const std::string row = b.row_dim >= 0 ? coord(L, b.row_dim, at) : "0";
  const std::string col = coord(L, b.col_dim, at);
  // By TMA the stage is a tile of the shared format (f32: four to a 16-byte chunk), else its rows lie back to back.
  const std::string place =
      b.by_tma()
          ? fmt::format("({}) / 4 + ({}) % 4", b.stage_format().chunk_offset_expr(row, fmt::format("({}) / 4", col)),
                        col)
          : fmt::format("{} * {} + {}", row, b.cols, col);
  if (w.vector == 2) {
    line("#pragma unroll");
    line("for (int r = 0; r < {}; r += 2) {{", n);
    line("  *reinterpret_cast<float2*>(&kiln_stage[{0}]) = make_float2({1}[r], {1}[r + 1]);", place, src);
  } else {
    for_regs(n);
    line("  kiln_stage[{}] = {}[r];", place, src);
  }
  line("}}");
}

void Emitter::emit_block_atomic_add(const Op& op) {
  const std::string bp = scalar(op.operands[0]);
  const Type& bt = k_.type(op.operands[0]);
  const Layout L = access_layout(k_, plan_, op);
  const std::string x = regs(op.operands[1], L);
  const auto bulk = plan_.bulk.ops.find(&op);
  note_global_store(op); // nothing to order where plan_unordered_reductions left it unordered (every staged add)
  if (bulk == plan_.bulk.ops.end()) { // from registers, nothing back: f32 pieces by vector reductions on sm_90
    const auto pieces = plan_.block_accesses.find(&op);
    const int run = pieces == plan_.block_accesses.end() ? 0 : pieces->second.piece;
    if (run == 0) {
      emit_block_elements(op, bp, bt, L, x, /*add=*/true);
      return;
    }
    emit_block_pieces(op, bp, bt, L, x, run, [&] {
      if (run == 2)
        line("    kiln::red_add_v2(kiln_p, {0}[g], {0}[g + 1]);", x);
      else
        line("    kiln::red_add_v4(kiln_p, {0}[g], {0}[g + 1], {0}[g + 2], {0}[g + 3]);", x);
    });
    return;
  }
  const BulkReduction& b = bulk->second;
  const int rd = b.row_dim, cd = b.col_dim;
  const bool check_rows = rd >= 0 && op.checks_dim(rd), check_cols = op.checks_dim(cd);
  const bool two_stages = plan_.bulk.stages == 2;
  line("{{ // to {}, then {} ({} x {} f32)", two_stages ? "this use's stage" : "the stage",
       b.by_tma() ? "TMA reductions" : "bulk reductions", b.rows, b.cols);
  open();
  if (two_stages) { // its last reductions were waited for before the previous use's barrier
    line("float* const kiln_stage = reinterpret_cast<float*>(kiln_smem + {}) + kiln_bulk_stage * {};",
         plan_.bulk.stage_offset, plan_.bulk.stage_bytes / 4);
  } else {
    line("float* const kiln_stage = reinterpret_cast<float*>(kiln_smem + {});", plan_.bulk.stage_offset);
    line("kiln::bulk_wait_read<0>(); // this thread's earlier reductions have read the stage ...");
    line("{} // ... and every thread's have", cta_barrier());
    set_scratch_reads(ScratchReads::None);
  }
  line("if ({}) {{", owner_predicate(L));
  open();
  emit_stage_writes(b, L, x);
  close();
  line("}}");
  if (two_stages)
    line("kiln::bulk_wait_read<0>(); // the previous use's reductions have read the other stage ...");
  line("kiln::fence_proxy_async(); // the stage is visible to the TMA unit ...");
  line("{} // ... once every thread has written its part{}", cta_barrier(),
       two_stages ? " (and the next use may write the other stage)" : "");
  if (two_stages)
    set_scratch_reads(ScratchReads::None);
  if (b.by_tma()) { // the map drops what lies past the tensor: no bound to check, no row to single out
    const TensorMapParam& m = plan_.tma.maps[static_cast<size_t>(b.map)];
    const std::string outer = tma_outer_coordinates(m, bp);
    const size_t rank = m.order.size() + m.outer.size();
    line("if (threadIdx.x == 0) {{ // one TMA reduction a {}-byte panel, through kiln_map{}",
         b.panel_elems() * 4, b.map);
    for (int p = 0; p < b.panels(); ++p)
      line("  kiln::tma_reduce_add_{}d(&kiln_map{}, (int){}.off[{}] + {}{}, kiln::smem_u32(kiln_stage) + "
           "{}u);",
           rank, b.map, bp, m.order[0], p * b.panel_elems(), outer, p * b.stage_format().panel_bytes());
    line("}}");
  } else {
    if (rd >= 0) { // rows back to back in the stage and the tensor, all inside: one reduction
      const std::string start =
          fmt::format("{0}.base + {0}.off[{1}] * {2} + {0}.off[{3}]", bp, rd, b.cols, cd);
      line("if ({0}.stride[{1}] == 1 && {0}.stride[{2}] == {3} && {4} && {5} && "
           "reinterpret_cast<unsigned long long>({6}) % 16 == 0) {{",
           bp, cd, rd, b.cols, run_in_bounds(fmt::format("{}.off[{}]", bp, rd), bp, rd, b.rows),
           run_in_bounds(fmt::format("{}.off[{}]", bp, cd), bp, cd, b.cols), start);
      line("  if (threadIdx.x == 0)");
      line("    kiln::bulk_reduce_add({}, kiln::smem_u32(kiln_stage), {}u);", start, b.rows * b.cols * 4);
      line("}} else");
    }
    line("for (int kiln_row = threadIdx.x; kiln_row < {}; kiln_row += {}) {{", b.rows, threads_);
    open();
    const std::string c_row = rd >= 0 ? fmt::format("{}.off[{}] + kiln_row", bp, rd) : "0";
    line("const long long kiln_r = {};", c_row);
    line("const long long kiln_c = {}.off[{}];", bp, cd);
    std::string addr = fmt::format("kiln_c * {}.stride[{}]", bp, cd);
    if (rd >= 0)
      addr += fmt::format(" + kiln_r * {}.stride[{}]", bp, rd);
    line("float* const kiln_p = {}.base + ({});", bp, addr);
    line("const float* const kiln_src = kiln_stage + kiln_row * {};", b.cols);
    // The elements of the row inside the tensor: all of them, or those a checked dim leaves.
    line("const long long kiln_n = {};",
         check_cols ? fmt::format(
                          "kiln_c < 0 ? -1 : ({0}.shape[{1}] - kiln_c < {2} ? {0}.shape[{1}] - kiln_c : {2})",
                          bp, cd, b.cols)
                    : std::to_string(b.cols));
    line("if ({}) {{", check_rows ? in_bounds("kiln_r", bp, rd) : "true");
    line("  if (kiln_n > 0 && kiln_n % 4 == 0 && {}.stride[{}] == 1 && reinterpret_cast<unsigned long "
         "long>(kiln_p) % "
         "16 == 0)",
         bp, cd);
    line("    kiln::bulk_reduce_add(kiln_p, kiln::smem_u32(kiln_src), static_cast<unsigned>(kiln_n * 4));");
    line("  else // misaligned, strided or cut by the boundary: element by element");
    line("    for (int i = 0; i < {}; ++i)", b.cols);
    line("      if ({}) kiln::red_add(kiln_p + i * {}.stride[{}], kiln_src[i]);",
         check_cols ? in_bounds("kiln_c + i", bp, cd) : "true", bp, cd);
    line("}}");
    close();
    line("}}");
  }
  line("kiln::bulk_commit();");
  if (two_stages)
    line("kiln_bulk_stage ^= 1;");
  close();
  line("}}");
}

} // namespace kiln::emit_detail
