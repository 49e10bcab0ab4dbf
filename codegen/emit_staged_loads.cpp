// Emitter: block loads staged through their loop's ring (SharedTile::to_registers; see emitter.h): a streaming
// loop's 2-D tiles, read into registers where the program loads them, and a warp-specialised dot loop's row
// vectors, read from the slot at each use; and the consumers' copy of a vector into its slot.
#include "codegen/emitter.h"
#include "codegen/prelude.h"

namespace kiln::emit_detail {

// A block load staged through its loop's ring (SharedTile::to_registers). A streaming loop's 2-D tile: the loop's
// first such load waits for this iteration's slot, then each reads its tile from the slot into its register
// layout, 16 bytes at a time where the layout holds whole chunks (cp.async filled zeros outside the tensor, the
// load's padding). A dot loop's row vector: read from the slot at each use (kiln_read_at_use), so that it holds
// no registers between its uses; its slot was waited for by the loop's first tile, which comes before it.
void Emitter::emit_staged_block_load(const Op& op, const SharedTile& t) {
  const ValueId r = op.result();
  const Layout& L = layout_of(r);
  if (k_.type(r).rank() == 1) {
    KILN_INTERNAL_CHECK(!plan_.loop_waiting_at(&op), "the staged vector at {} waits for its loop's slot",
                        op.loc.str());
    need_helper("kiln_read_at_use", std::string(read_at_use_prelude_source()));
    const std::string n = fresh("at_use");
    name_[r] = n;
    const int per_chunk = 16 / t.elem_bytes;
    const std::string col = coord(L, t.contig_dim, "r");
    line("// {} from its ring slot, read where each register is used", op.loc.str());
    line("const auto {} = kiln_reads_at_use([&](int r) {{ return *reinterpret_cast<const {}*>(kiln_smem + {} + {} + "
         "(({}) % {}) * {}); }});",
         n, ctype(k_.type(r).elem), tile_base(t), stage_offset(t, "0", fmt::format("(({}) / {})", col, per_chunk)),
         col, per_chunk, t.elem_bytes);
    return;
  }
  if (const Op* loop = plan_.loop_waiting_at(&op)) {
    emit_stage_wait(*loop, t, stage_var_.at(&op));
    publish_shared_tiles();
  }
  const std::string n = declare_regs(r, L);
  name_[r] = n;
  const int cdim = t.contig_dim, sdim = 1 - cdim, per_chunk = 16 / t.elem_bytes;
  const std::string ty = ctype(k_.type(r).elem);
  line("// {} from its ring slot into registers", op.loc.str());
  auto addr = [&](const std::string& reg) {
    const std::string row = coord(L, sdim, reg), col = coord(L, cdim, reg);
    return fmt::format("kiln_smem + {} + {} + (({}) % {}) * {}", tile_base(t),
                       stage_offset(t, "(" + row + ")", fmt::format("(({}) / {})", col, per_chunk)), col, per_chunk,
                       t.elem_bytes);
  };
  if (register_run(L, cdim, per_chunk) == per_chunk) {
    line("#pragma unroll");
    line("for (int g = 0; g < {}; g += {}) {{", L.num_regs(), per_chunk);
    line("  alignas(16) {} kiln_v[{}];", ty, per_chunk);
    line("  kiln::u32* const kiln_w = reinterpret_cast<kiln::u32*>(kiln_v);");
    line("  asm volatile(\"ld.shared.v4.b32 {{%0, %1, %2, %3}}, [%4];\" : \"=r\"(kiln_w[0]), \"=r\"(kiln_w[1]), "
         "\"=r\"(kiln_w[2]), \"=r\"(kiln_w[3]) : \"r\"(kiln::smem_u32({})));",
         addr("g"));
    line("  #pragma unroll");
    line("  for (int i = 0; i < {}; ++i) {}[g + i] = kiln_v[i];", per_chunk, n);
    line("}}");
    return;
  }
  for_regs(L.num_regs());
  line("  {}[r] = *reinterpret_cast<const {}*>({});", n, ty, addr("r"));
  line("}}");
}

// A staged vector (a one-row tile): thread c copies 16-byte chunk c where the vector is contiguous, 16-byte
// aligned and cut into whole chunks by the tensor's end; element by element otherwise.
void Emitter::emit_vector_tile_issue(const SharedTile& t, const std::string& bp, const std::string& stage) {
  const Op& op = *t.load;
  const int per_chunk = 16 / t.elem_bytes;
  const int64_t chunks = t.cols / per_chunk;
  const bool check = op.checks_dim(0);
  const std::string base = fmt::format("({} + ({}) * {})", t.offset, stage, stage_stride(t));
  const std::string ty = ctype(k_.type(op.result()).elem);
  line("{{ // {} -> shared [{}] {}", op.loc.str(), t.cols, ty);
  open();
  if (opt_.async_copy) {
    line("if ({0}.stride[0] == 1 && reinterpret_cast<unsigned long long>({0}.base) % 16 == 0 && {0}.off[0] % {1} == "
         "0{2}) {{",
         bp, per_chunk, check ? fmt::format(" && {}.shape[0] % {} == 0", bp, per_chunk) : "");
    line("  for (int c = threadIdx.x; c < {}; c += {}) {{", chunks, threads_);
    line("    const long long gc = {}.off[0] + c * {};", bp, per_chunk);
    line("    const bool ok = {};", check ? in_bounds("gc", bp, 0) : "true");
    line("    kiln::cp_async_16(kiln::smem_u32(kiln_smem + {} + {}), ok ? {}.base + gc : {}.base, ok);", base,
         stage_offset(t, "0", "c"), bp, bp);
    line("  }}");
    line("}} else {{");
  } else {
    line("{{");
  }
  line("  for (int e = threadIdx.x; e < {}; e += {}) {{", t.cols, threads_);
  line("    const long long gc = {}.off[0] + e;", bp);
  line("    const {} v = ({}) ? {}.base[gc * {}.stride[0]] : {};", ty, check ? in_bounds("gc", bp, 0) : "true", bp, bp,
       literal(op.padding.value, k_.type(op.result()).elem));
  line("    *reinterpret_cast<{}*>(kiln_smem + {} + {} + (e % {}) * {}) = v;", ty, base,
       stage_offset(t, "0", fmt::format("(e / {})", per_chunk)), per_chunk, t.elem_bytes);
  line("  }}");
  line("}}");
  close();
  line("}}");
}

} // namespace kiln::emit_detail
