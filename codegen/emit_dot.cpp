// Emitter: dot products through FMA, mma.sync and wgmma, as LoweringPlan::dots says (see emitter.h).
#include "codegen/emitter.h"

namespace kiln::emit_detail {

// ---------------------------------------------------------------------------------------------

void Emitter::emit_dot(const Op& op) {
  ValueId r = op.result();
  const Layout& L = layout_of(r);
  const DotInstruction instruction = plan_.dots.at(&op).instruction;
  // wgmma onto a zero accumulator writes its first k step without reading it: no zeros to copy in.
  const Op* acc_def = k_.info(op.operands[2]).def;
  const bool zero_acc = instruction == DotInstruction::Wgmma && !ahead_.count(&op) && acc_def &&
                        acc_def->kind == OpKind::Constant && acc_def->f == 0;
  const std::string acc = zero_acc ? "" : regs(op.operands[2], L);
  std::string d = declare_regs(r, L, "acc");
  name_[r] = d;
  if (!zero_acc) {
    for_regs(L.num_regs());
    line("  {}[r] = {}[r];", d, acc);
    line("}}");
  }
  if (ahead_.count(&op))
    return emit_product_ahead(op, d);
  switch (instruction) {
  case DotInstruction::Wgmma:
    // A late loop's first product is waited for where the loop's emission says (emit_late_product.cpp), one left
    // in flight where its loop body first needs it (emit_product_wait).
    emit_dot_wgmma(op, d, /*wait=*/!plan_.late.of_first(op) && !plan_.products.stays_in_flight(op), "", false,
                   zero_acc);
    break;
  case DotInstruction::MmaSync:
    emit_dot_mma(op, d);
    break;
  case DotInstruction::Fma:
    emit_dot_fma(op, d);
    break;
  }
}

void Emitter::emit_product_wait(const ProductWait& w, const Op& before) {
  line("kiln::wgmma_wait<{}>(); // the product{} at {} done before {} {}{}", w.pending, w.retired.size() > 1 ? "s" : "",
       source_lines(w.retired), op_name(before.kind), before.loc.str(),
       w.pending ? fmt::format("; {} later stay{} in flight", w.pending, w.pending > 1 ? "" : "s") : "");
}

// Shared-memory fragment addressing. A fragment's row is lane_row + R (R a multiple of 8) and its
// 16-byte chunk lane_chunk + C (C even, lane_chunk 0 or 1), so with the XOR swizzle (whose phase
// depends on row % 8 only) its byte address is (T ^ 16C) + R * line_bytes (in a tile of panels of L-byte lines,
// c = L / 16 chunks a line, (T ^ 16 (C % c)) + (C / c) * panel_bytes + R * L), where the thread base T holds
// everything lane-dependent. T is computed once per dot; each fragment costs one XOR and one
// add, and nothing per fragment is kept live across the loop (which would cost a register each).
std::string Emitter::fragment_base(ValueId v, const std::string& lane_row, const std::string& lane_chunk) {
  const SharedTile& t = plan_.tiles[plan_.tile_of.at(v)];
  std::string n = fresh("frag_base");
  line("const kiln::u32 {} = kiln::smem_u32(kiln_smem) + {} + {};", n, tile_base(t),
       stage_offset(t, "(" + lane_row + ")", "(" + lane_chunk + ")"));
  return n;
}

std::string Emitter::fragment_addr(ValueId v, const std::string& base, const std::string& chunk,
                                   const std::string& row) {
  const SharedTile& t = plan_.tiles[plan_.tile_of.at(v)];
  const SharedTileGeometry g = geometry(t);
  if (!g.panelled())
    return fmt::format("(({} ^ (({}) * 16)) + ({}) * {})", base, chunk, row, g.line_bytes());
  const int64_t cpl = g.chunks_per_line();
  return fmt::format("(({} ^ ((({}) % {}) * 16)) + (({}) / {}) * {} + ({}) * {})", base, chunk, cpl, chunk, cpl,
                     g.panel_bytes(), row, g.line_bytes());
}

std::string Emitter::a_fragment_base(ValueId a) {
  return plan_.contiguous_dim(a) == 1 ? fragment_base(a, "kiln_wm + kiln_lane % 16", "kiln_lane / 16")
                                      : fragment_base(a, "kiln_lane % 8 + (kiln_lane / 16) * 8", "(kiln_lane / 8) % 2");
}

// K-major A: lane l reads row l % 16 of the block at 16-byte chunk l / 16 of the k step (two chunks a step: 16
// 16-bit elements, or mma.sync's 8 tf32); M-major A (16-bit only): the same matrices transposed, rows and chunks
// exchanged. `kt` and `mt` are names or constants.
std::string Emitter::a_fragment_load(ValueId a, const std::string& base, const std::string& kt, const std::string& mt,
                                     int64_t block_rows, const std::string& dst) {
  if (plan_.contiguous_dim(a) == 1)
    return fmt::format("kiln::ldmatrix_x4({}, {});",
                       fragment_addr(a, base, fmt::format("{} * 2", kt), fmt::format("{} * {}", mt, block_rows)),
                       dst);
  return fmt::format("kiln::ldmatrix_x4_trans({}, {});",
                     fragment_addr(a, base, fmt::format("(kiln_wm + {} * {}) / 8", mt, block_rows),
                                   fmt::format("{} * 16", kt)),
                     dst);
}

void Emitter::emit_register_operands(const Op& loop) {
  const std::vector<RegisterOperands::Operand>* operands = plan_.register_operands.before_loop(loop);
  if (!operands || in_producer_)
    return;
  for (const RegisterOperands::Operand& o : *operands) {
    const Shape& shape = k_.type(o.value).shape; // (M, K)
    const int64_t MT = shape[0] / (16 * o.split.warps_m), KT = shape[1] / 16;
    const std::string n = fresh("a_regs");
    line("// %{} ({} x {}, shared) is the same in every iteration: read into registers once, wgmma's register A for "
         "the products below",
         o.value, shape[0], shape[1]);
    line("kiln::u32 {}[{}];", n, o.registers);
    line("{{");
    open();
    line("const int kiln_wm = (kiln_warp % {}) * 16;", o.split.warps_m);
    const std::string base = a_fragment_base(o.value);
    line("#pragma unroll");
    line("for (int kt = 0; kt < {}; ++kt) {{", KT);
    line("  #pragma unroll");
    line("  for (int mt = 0; mt < {}; ++mt) {{", MT);
    line("    {}", a_fragment_load(o.value, base, "kt", "mt", 16 * o.split.warps_m,
                                   fmt::format("*reinterpret_cast<kiln::u32(*)[4]>(&{}[(kt * {} + mt) * 4])", n, MT)));
    line("  }}");
    line("}}");
    close();
    line("}}");
    register_operand_[o.value] = n;
  }
}

void Emitter::forget_register_operands(const Op& loop) {
  if (const std::vector<RegisterOperands::Operand>* operands = plan_.register_operands.before_loop(loop))
    for (const RegisterOperands::Operand& o : *operands)
      register_operand_.erase(o.value);
}

void Emitter::emit_dot_mma(const Op& op, const std::string& d) {
  ValueId a = op.operands[0], b = op.operands[1];
  const Shape& as = k_.type(a).shape;
  const Shape& bs = k_.type(b).shape;
  int64_t M = as[0], K = as[1], N = bs[1];
  DType in = k_.type(a).elem;
  bool tf32 = in == DType::f32;
  // The instruction's fragments say which registers of the operand and accumulator tiles each mma reads.
  const MmaShape& shape = mma_sync_shape(in);
  const int kinst = static_cast<int>(shape.k);
  const WarpSplit& split = plan_.warps_of(op);
  const int wm = split.warps_m, wn = split.warps_n;
  int64_t WM = M / wm, WN = N / wn, MT = WM / shape.m, NT = WN / shape.n, KT = K / kinst;
  const FragmentTiling a_tiles{shape.a.regs(), KT}, b_tiles{shape.b.regs(), KT}, c_tiles{shape.c.regs(), NT};
  const int a_words = shape.a.regs() / shape.elements_per_register; // 32-bit registers of one A fragment
  const int b_words = shape.b.regs() / shape.elements_per_register;
  line("// mma.m16n8k{}: ({}, {}) x ({}, {}) over {}x{} warps, {}x{} fragments per warp", kinst, M, K, K, N,
       wm, wn, MT, NT);
  bool a_smem = plan_.where(a) == Placement::Shared, b_smem = plan_.where(b) == Placement::Shared;
  // A register operand that is an f32 -> f16/bf16 cast of an mma result is packed straight from f32.
  const bool a_cast = plan_.fused_casts.count(a) > 0;
  std::string ar = a_smem ? "" : regs(dot_a_register_value(k_, plan_, op), dot_a_layout(k_, plan_, op));
  std::string br = b_smem ? "" : regs(b, dot_b_layout(k_, plan_, op));
  std::string mma_fn = tf32               ? "kiln::mma_m16n8k8_tf32"
                       : in == DType::f16 ? "kiln::mma_m16n8k16_f16"
                                          : "kiln::mma_m16n8k16_bf16";
  std::string pack2 = a_cast ? (in == DType::bf16 ? "kiln::pack_bf16x2" : "kiln::pack_f16x2") : "kiln::pack2";
  line("{{");
  open();
  // Warps interleave along M at 16-row granularity (layout.cpp): fragment mt of this warp is at
  // rows kiln_wm + mt * 16 * wm.
  line("const int kiln_wm = (kiln_warp % {}) * {};", wm, shape.m);
  line("const int kiln_wn = ((kiln_warp / {}) % {}) * {};", wm, wn, WN);
  // Thread bases of the shared operands and how each fragment's (chunk, row) follows from (mt|nt, kt).
  int kc = kinst * dtype_bytes(in) / 16; // 16-byte chunks per k step
  std::string a_base, b_base;
  bool a_ldm = a_smem && (plan_.contiguous_dim(a) == 1 || !tf32),
       b_ldm = b_smem && (plan_.contiguous_dim(b) == 0 || !tf32);
  if (a_smem && a_ldm)
    a_base = a_fragment_base(a);
  bool b_pairs = NT % 2 == 0;
  if (b_smem && b_ldm) {
    if (plan_.contiguous_dim(b) == 0)
      b_base = b_pairs
                   ? fragment_base(b, "kiln_wn + kiln_lane % 8 + (kiln_lane / 16) * 8", "(kiln_lane / 8) % 2")
                   : fragment_base(b, "kiln_wn + kiln_lane % 8", "(kiln_lane / 8) % 2");
    else
      b_base =
          fragment_base(b, "kiln_lane % 8 + ((kiln_lane / 8) % 2) * 8", b_pairs ? "kiln_lane / 16" : "0");
  }
  line("#pragma unroll");
  line("for (int kt = 0; kt < {}; ++kt) {{", KT);
  open();
  line("kiln::u32 fa[{}][{}];", MT, a_words);
  line("#pragma unroll");
  line("for (int mt = 0; mt < {}; ++mt) {{", MT);
  if (a_smem && a_ldm) {
    line("  {}", a_fragment_load(a, a_base, "kt", "mt", shape.m * wm, "fa[mt]"));
  } else if (a_smem) { // tf32 with M contiguous: plain shared loads of each register's element
    line("  const int g = kiln_lane / 4, q = kiln_lane % 4, m0 = kiln_wm + mt * {}, k0 = kt * {};", shape.m * wm,
         kinst);
    for (int i = 0; i < a_words; ++i) {
      const auto [row, col] = shape.a.reg_offset(shape.packed_registers(i)[0]);
      line("  fa[mt][{}] = kiln::to_tf32(*reinterpret_cast<const float*>(kiln_smem + {}));", i,
           tile_elem(a, fmt::format("m0 + g + {}", row), fmt::format("k0 + q + {}", col)));
    }
  } else {
    const std::string first = a_tiles.first_register("kt", "mt");
    for (int i = 0; i < a_words; ++i) {
      const std::vector<int> p = shape.packed_registers(i);
      if (tf32)
        line("  fa[mt][{}] = kiln::to_tf32({}[{} + {}]);", i, ar, first, p[0]);
      else
        line("  fa[mt][{}] = {}({}[{} + {}], {}[{} + {}]);", i, pack2, ar, first, p[0], ar, first, p[1]);
    }
  }
  line("}}");
  // B fragments, a pair of n-tiles at a time, each pair consumed by the mmas right away.
  int step = b_smem && b_ldm && b_pairs ? 2 : 1;
  line("#pragma unroll");
  line("for (int nt = 0; nt < {}; nt += {}) {{", NT, step);
  open();
  line("kiln::u32 fb[2][{}];", b_words);
  if (b_smem && b_ldm) {
    if (plan_.contiguous_dim(b) == 0 && b_pairs) {
      line("kiln::u32 q[4];");
      line("kiln::ldmatrix_x4({}, q);", fragment_addr(b, b_base, fmt::format("kt * {}", kc), "nt * 8"));
      line("fb[0][0] = q[0]; fb[0][1] = q[1]; fb[1][0] = q[2]; fb[1][1] = q[3];");
    } else if (plan_.contiguous_dim(b) == 0) {
      line("kiln::ldmatrix_x2({}, fb[0]);", fragment_addr(b, b_base, fmt::format("kt * {}", kc), "nt * 8"));
    } else if (b_pairs) {
      line("kiln::u32 q[4];");
      line("kiln::ldmatrix_x4_trans({}, q);", fragment_addr(b, b_base, "kiln_wn / 8 + nt", "kt * 16"));
      line("fb[0][0] = q[0]; fb[0][1] = q[1]; fb[1][0] = q[2]; fb[1][1] = q[3];");
    } else {
      line("kiln::ldmatrix_x2_trans({}, fb[0]);", fragment_addr(b, b_base, "kiln_wn / 8 + nt", "kt * 16"));
    }
  } else if (b_smem) { // tf32 with N contiguous: plain shared loads of each register's element
    line("const int g = kiln_lane / 4, q = kiln_lane % 4, n0 = kiln_wn + nt * {}, k0 = kt * {};", shape.n, kinst);
    for (int i = 0; i < b_words; ++i) {
      const auto [row, col] = shape.b.reg_offset(shape.packed_registers(i)[0]);
      line("fb[0][{}] = kiln::to_tf32(*reinterpret_cast<const float*>(kiln_smem + {}));", i,
           tile_elem(b, fmt::format("k0 + q + {}", row), col ? fmt::format("n0 + g + {}", col) : "n0 + g"));
    }
  } else {
    const std::string first = b_tiles.first_register("kt", "nt");
    for (int i = 0; i < b_words; ++i) {
      const std::vector<int> p = shape.packed_registers(i);
      if (tf32)
        line("fb[0][{}] = kiln::to_tf32({}[{} + {}]);", i, br, first, p[0]);
      else
        line("fb[0][{}] = kiln::pack2({}[{} + {}], {}[{} + {}]);", i, br, first, p[0], br, first, p[1]);
    }
  }
  line("#pragma unroll");
  line("for (int mt = 0; mt < {}; ++mt) {{", MT);
  line("  #pragma unroll");
  line("  for (int j = 0; j < {}; ++j) {{", step);
  line("    {}(*reinterpret_cast<float(*)[{}]>(&{}[{}]), fa[mt], fb[j]);", mma_fn, shape.c.regs(), d,
       c_tiles.first_register("nt + j", "mt"));
  line("  }}");
  line("}}");
  close();
  line("}}");
  close();
  line("}}");
  close();
  line("}}");
}

// Hopper warpgroup MMA. Each warpgroup (4 consecutive warps along M) issues, per 16-deep k step,
// one m64nWNk16 instruction per 64-row block it owns (rows 64 * g + 16 * wm * mt, the interleaved
// warp layout), reading B (and A unless A is in registers) from shared memory through descriptors.
// The product completes before the accumulator is used (wait 0): the softmax or epilogue that
// follows reads it straight away, and the next tile's loads are already in flight through cp.async.
// A matmul-style chain is the exception (deferred_wgmma_dot): it waits only for the previous product.
// A register A operand of a wgmma product as 32-bit words, in the order the product's instructions read them
// (k step kt, then 64-row block mt, then the instruction's words): word w of the product is words[w].
std::vector<std::string> Emitter::wgmma_register_a_words(const Op& op) {
  ValueId a = op.operands[0], b = op.operands[1];
  const int64_t M = k_.type(a).shape[0], K = k_.type(a).shape[1], N = k_.type(b).shape[1];
  const WarpSplit& split = plan_.warps_of(op);
  const MmaShape shape = wgmma_shape(N / split.warps_n);
  const int64_t MT = M / (shape.m / shape.warps * split.warps_m), KT = K / shape.k;
  const FragmentTiling a_tiles{shape.a.regs(), KT};
  const std::string ar = regs(dot_a_register_value(k_, plan_, op), dot_a_layout(k_, plan_, op));
  const std::string pack2 = plan_.fused_casts.count(a) > 0
                                ? (k_.type(a).elem == DType::bf16 ? "kiln::pack_bf16x2" : "kiln::pack_f16x2")
                                : "kiln::pack2";
  std::vector<std::string> words;
  for (int64_t kt = 0; kt < KT; ++kt)
    for (int64_t mt = 0; mt < MT; ++mt) {
      const int64_t base = a_tiles.first_register(kt, mt);
      for (int i = 0; i < shape.a.regs() / shape.elements_per_register; ++i) {
        const std::vector<int> p = shape.packed_registers(i);
        words.push_back(fmt::format("{}({}[{}], {}[{}])", pack2, ar, base + p[0], ar, base + p[1]));
      }
    }
  return words;
}

void Emitter::take_turn() {
  line("kiln::named_barrier_sync({} + kiln_warp / 4, 256); // ping-pong: this warpgroup's turn to issue",
       PingPong::kFirstBarrier);
}

void Emitter::pass_turn() {
  line("kiln::named_barrier_arrive({} + (kiln_warp / 4 + 1) % {}, 256); // ping-pong: the next warpgroup's turn",
       PingPong::kFirstBarrier, plan_.pingpong.warpgroups);
}

// The n f32 registers of `regs` are read only after the wgmma wait just emitted: an empty asm that writes them
// keeps the compiler from reading them earlier (volatile asm stays in order; no memory clobber, which would order
// every memory access).
void Emitter::read_after_wait(const std::string& regs, int n) {
  for_regs(n);
  line("  asm volatile(\"\" : \"+f\"({}[r]));", regs);
  line("}}");
}

// A register operand written to `tile` (the scratch) in the shared operand format: every thread stores the
// elements it holds at their swizzled place (replicas store the same values), then the generic-proxy writes are
// made visible to wgmma's reads and the warps meet. The scratch's next user starts with a barrier of its own;
// by then every warpgroup has waited for the product that reads it.
void Emitter::emit_staged_operand(ValueId a, const LayoutConversion& c, const SharedTile& tile) {
  use_scratch(c.scratch_bytes);
  const std::string ty = ctype(k_.type(a).elem);
  const std::string src = regs(a, c.from);
  const std::optional<StmatrixStore>& st = c.stmatrix;
  line("// stage %{} ({}) as a K-major shared operand tile{}", a, c.from.str(), st ? ": " + st->str() : "");
  line("{}", cta_barrier());
  forget_scratch_reads();
  if (st) {
    emit_stmatrix_stores(c.from, *st, src, tile);
  } else {
    const int per_chunk = 16 / tile.elem_bytes;
    for_regs(c.from.num_regs());
    const std::string row = coord(c.from, 0, "r"), col = coord(c.from, 1, "r");
    line("  *reinterpret_cast<{}*>(kiln_smem + {} + {} + (({}) % {}) * {}) = {}[r];", ty, tile.offset,
         stage_offset(tile, row, fmt::format("(({}) / {})", col, per_chunk)), col, per_chunk, tile.elem_bytes, src);
    line("}}");
  }
  line("kiln::fence_proxy_async(); // the stores are visible to wgmma's reads ...");
  line("{} // ... of every warp's part", cta_barrier());
}

// Register pairs of `src` (layout L, 16-bit) stored as 8x8 matrices of `tile` (stmatrix_store.h). Instruction j
// stores pairs j * matrices + m; lane l gives the address of row l % 8 of matrix (l / 8) % matrices: the pair's
// coordinates without the lane's part, which inside a matrix the instruction supplies, plus l % 8 rows (rows of a
// .trans matrix run along the fragment's columns, which lie along the tile's rows as well).
void Emitter::emit_stmatrix_stores(const Layout& L, const StmatrixStore& st, const std::string& src,
                                   const SharedTile& tile) {
  auto pair_coord = [&](int d) {
    return "0" + basis_terms(L.warp, d, "kiln_warp") + basis_terms(L.reg, d, "kiln_st_r", /*first=*/1);
  };
  line("#pragma unroll");
  line("for (int j = 0; j < {}; ++j) {{", st.instructions);
  line("  const int kiln_st_r = 2 * (j * {} + (kiln_lane >> 3) % {});", st.matrices, st.matrices);
  line("  const int kiln_st_row = {} + (kiln_lane & 7), kiln_st_col = {};", pair_coord(0), pair_coord(1));
  std::string values;
  for (int m = 0; m < st.matrices; ++m)
    values += fmt::format(", kiln::pack2({0}[2 * (j * {1} + {2})], {0}[2 * (j * {1} + {2}) + 1])", src, st.matrices, m);
  line("  kiln::stmatrix_x{}<{}>(kiln::smem_u32(kiln_smem) + {} + {}{});", st.matrices, st.trans ? "true" : "false",
       tile.offset, stage_offset(tile, "kiln_st_row", "(kiln_st_col / 8)"), values);
  line("}}");
}

void Emitter::emit_dot_wgmma(const Op& op, const std::string& d, bool wait, const std::string& packed_a,
                             bool turn_held, bool zero_acc) {
  ValueId a = op.operands[0], b = op.operands[1];
  int64_t M = k_.type(a).shape[0], K = k_.type(a).shape[1], N = k_.type(b).shape[1];
  DType in = k_.type(a).elem;
  const WarpSplit& split = plan_.warps_of(op);
  const int wm = split.warps_m, wn = split.warps_n;
  int64_t WN = N / wn;
  // One instruction per warpgroup covers m64 x WN; each warp holds 16 of its rows (mma_shape.h).
  const MmaShape shape = wgmma_shape(WN);
  const int64_t warp_rows = shape.m / shape.warps;
  const int64_t MT = M / (warp_rows * wm), KT = K / shape.k;
  const FragmentTiling c_tiles{shape.c.regs(), 1};
  // A is a shared tile, or a register tile the plan stages into a K-major operand tile in the scratch
  // (ConversionMethod::SharedOperand), or in registers in the A layout.
  // A shared A read into registers before the loop (plan_register_operands) is taken from them.
  const auto held = register_operand_.find(a);
  const std::string& a_words_given = held != register_operand_.end() && packed_a.empty() ? held->second : packed_a;
  const bool a_shared = plan_.where(a) == Placement::Shared && held == register_operand_.end();
  const LayoutConversion* staged = plan_.where(a) == Placement::Shared
                                       ? nullptr
                                       : planned_conversion(a, ConversionMethod::SharedOperand, nullptr, true);
  SharedTile staged_tile;
  if (staged) {
    staged_tile.rows = M;
    staged_tile.cols = K;
    staged_tile.elem_bytes = dtype_bytes(in);
    staged_tile.offset = plan_.tiles_bytes; // the scratch, 1024-byte aligned as every tile
    emit_staged_operand(a, *staged, staged_tile);
  }
  const SharedTile* a_tile = staged ? &staged_tile : a_shared ? &plan_.tiles[plan_.tile_of.at(a)] : nullptr;
  const bool a_smem = a_tile != nullptr;
  const SharedTile& bt = plan_.tiles[plan_.tile_of.at(b)];
  WgmmaOperand bo = *wgmma_operand(bt, plan_.contiguous_dim(b) == 0);
  std::optional<WgmmaOperand> ao;
  if (a_smem)
    ao = wgmma_operand(*a_tile, staged || plan_.contiguous_dim(a) == 1);
  KILN_INTERNAL_CHECK(!a_smem || ao, "wgmma: A's shared lines are not 32, 64 or 128 bytes");
  bool trans_a = a_smem && !ao->k_major, trans_b = !bo.k_major;
  std::string fn = wgmma_function_name(static_cast<int>(WN), in, !a_smem, trans_a, trans_b);
  need_helper(fn, wgmma_function_source(static_cast<int>(WN), in, !a_smem, trans_a, trans_b));
  std::string first_fn = fn; // the first k step's
  if (zero_acc) {
    first_fn = wgmma_function_name(static_cast<int>(WN), in, !a_smem, trans_a, trans_b, true);
    need_helper(first_fn, wgmma_function_source(static_cast<int>(WN), in, !a_smem, trans_a, trans_b, true));
  }
  line("// wgmma.m64n{}k16: ({}, {}) x ({}, {}) over {}x{} warps ({} warpgroup(s) along M), {} m64 block(s) "
       "per warpgroup, A {}, B {}-major",
       WN, M, K, K, N, wm, wn, wm / shape.warps, MT,
       a_smem ? (trans_a ? "M-major in shared" : "K-major in shared") : "in registers", trans_b ? "N" : "K");
  line("{{");
  open();
  if (a_smem)
    line("const int kiln_wg_m = ((kiln_warp % {}) / {}) * {};", wm, shape.warps, shape.m);
  line("const int kiln_wn = ((kiln_warp / {}) % {}) * {};", wm, wn, WN);
  auto descriptor = [&](const SharedTile& t, const WgmmaOperand& o, const std::string& mn) {
    std::string n = fresh("desc");
    line("const kiln::u64 {} = kiln::wgmma_desc(kiln::smem_u32(kiln_smem) + {} + ({}) * {}, {}, {}, {});", n,
         tile_base(t), mn, o.mn_stride(), o.lbo, o.sbo, static_cast<int>(o.swizzle_mode));
    return n;
  };
  std::string da = a_smem ? descriptor(*a_tile, *ao, "kiln_wg_m") : "";
  std::string db = descriptor(bt, bo, "kiln_wn");
  // A in registers: wgmma's register-A fragment is mma.sync's A fragment for each warp's 16 rows, so the
  // operand is in the mma.sync A layout (mma_a_layout); `packed_a`, where given, holds its words already.
  std::vector<std::string> a_words;
  if (!a_smem && a_words_given.empty())
    a_words = wgmma_register_a_words(op);
  const bool in_turn = plan_.pingpong.dots.count(&op) > 0;
  if (in_turn && !turn_held)
    take_turn();
  line("kiln::wgmma_fence();");
  for (int64_t kt = 0; kt < KT; ++kt)
    for (int64_t mt = 0; mt < MT; ++mt) {
      // Block mt's accumulator registers, then B's (and A's) descriptor start in 16-byte units.
      std::string acc = fmt::format("*reinterpret_cast<float(*)[{}]>(&{}[{}])", shape.c.regs(), d,
                                    c_tiles.first_register(int64_t{0}, mt));
      std::string bk = fmt::format("{} + {}", db, bo.k_offset(shape.k * kt) / 16);
      const std::string& call = kt == 0 ? first_fn : fn;
      if (a_smem) {
        int64_t off = ao->k_offset(shape.k * kt) + warp_rows * wm * mt * ao->mn_stride();
        line("{}({}, {} + {}, {});", call, acc, da, off / 16, bk);
      } else {
        const int per = shape.a.regs() / shape.elements_per_register;
        const int64_t first = (kt * MT + mt) * per;
        std::vector<std::string> words;
        for (int i = 0; i < per; ++i)
          words.push_back(a_words_given.empty() ? a_words[static_cast<size_t>(first + i)]
                                                : fmt::format("{}[{}]", a_words_given, first + i));
        line("{{ const kiln::u32 fa[{}] = {{{}}};", words.size(), fmt::join(words, ", "));
        line("  {}({}, fa, {}); }}", call, acc, bk);
      }
    }
  line("kiln::wgmma_commit();");
  if (in_turn && !plan_.late.of_first(op))
    pass_turn();
  else if (in_turn)
    line("// ping-pong: the turn is kept for the previous iteration's late product");
  if (!wait)
    line("// left in flight{}", plan_.products.stays_in_flight(op) ? ": waited for where it is needed" : "");
  else if (plan_.is_deferred_dot(op))
    line("kiln::wgmma_wait<1>(); // the previous iteration's product is done; this one stays in flight");
  else
    line("kiln::wgmma_wait<0>();");
  close();
  line("}}");
}

// Exact f32/f64 (and f16 without tensor cores): each thread accumulates its own elements from
// shared memory. Register operands are staged to shared memory first.
void Emitter::emit_dot_fma(const Op& op, const std::string& d) {
  ValueId r = op.result();
  const Layout& L = layout_of(r);
  ValueId a = op.operands[0], b = op.operands[1];
  int64_t K = k_.type(a).shape[1];
  DType in = k_.type(a).elem;
  std::string acc_t = ctype(k_.type(r).elem);
  auto reader = [&](ValueId v,
                    int which) -> std::function<std::string(const std::string&, const std::string&)> {
    if (plan_.where(v) == Placement::Shared) {
      return [this, v, in](const std::string& i, const std::string& j) {
        return fmt::format("kiln::cvt<float>(*reinterpret_cast<const {}*>(kiln_smem + {}))", ctype(in),
                           tile_elem(v, i, j));
      };
    }
    // Stage into scratch, row-major; `which` keeps A and B apart.
    const Type& t = k_.type(v);
    Layout have = which == 0 ? dot_a_layout(k_, plan_, op) : dot_b_layout(k_, plan_, op);
    std::string src = regs(v, have);
    int64_t offset = which == 0 ? 0 : k_.type(a).numel() * dtype_bytes(in);
    use_scratch(fma_staging_bytes(k_, op));
    line("{}", cta_barrier());
    for_regs(have.num_regs());
    line("  reinterpret_cast<{}*>({} + {})[{}] = {}[r];", ctype(in), scratch(), offset,
         linear(have, t.shape, "r"), src);
    line("}}");
    line("{}", cta_barrier());
    int64_t cols = t.shape[1];
    std::string base = fmt::format("reinterpret_cast<const {}*>({} + {})", ctype(in), scratch(), offset);
    return [base, cols](const std::string& i, const std::string& j) {
      return fmt::format("kiln::cvt<float>({}[({}) * {} + ({})])", base, i, cols, j);
    };
  };
  auto ra = reader(a, 0);
  auto rb = reader(b, 1);
  if (in == DType::f64) {
    ra = [ra](const std::string& i, const std::string& j) {
      std::string e = ra(i, j);
      return e.replace(0, std::string("kiln::cvt<float>(").size(), "kiln::cvt<double>(");
    };
    rb = [rb](const std::string& i, const std::string& j) {
      std::string e = rb(i, j);
      return e.replace(0, std::string("kiln::cvt<float>(").size(), "kiln::cvt<double>(");
    };
  }
  line("// dot by fused multiply-add ({} accumulation)", acc_t);
  for_regs(L.num_regs());
  line("  const int i = {}, j = {};", coord(L, 0, "r"), coord(L, 1, "r"));
  line("  {} s = {}[r];", acc_t, d);
  line("  #pragma unroll 8");
  line("  for (int kk = 0; kk < {}; ++kk) s = {}({}, {}, s);", K, in == DType::f64 ? "fma" : "fmaf",
       ra("i", "kk"), rb("kk", "j"));
  line("  {}[r] = s;", d);
  line("}}");
  if (plan_.where(a) != Placement::Shared || plan_.where(b) != Placement::Shared)
    line("{}", cta_barrier());
}

} // namespace kiln::emit_detail
