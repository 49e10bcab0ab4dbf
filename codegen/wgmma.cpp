#include "codegen/wgmma.h"

#include "codegen/prelude.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {

int64_t WgmmaOperand::k_offset(int64_t k) const {
  if (!k_major)
    return k * line_bytes; // K walks the tile's rows
  int64_t bytes = k * elem_bytes;
  return (bytes / line_bytes) * panel_bytes + bytes % line_bytes;
}

int64_t WgmmaOperand::mn_stride() const {
  if (k_major)
    return line_bytes; // M/N walks the rows
  // M/N walks the lines, one 128-byte panel (or the only line) per line_bytes / elem_bytes elements.
  return panel_bytes / (line_bytes / elem_bytes);
}

uint64_t WgmmaDescriptor::bits() const {
  return static_cast<uint64_t>((start_address & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>((leading_byte_offset >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((stride_byte_offset >> 4) & 0x3FFF) << 32) |
         (static_cast<uint64_t>(swizzle) << 62);
}

std::string WgmmaDescriptor::str() const {
  return fmt::format("LBO {} B, SBO {} B, {}", leading_byte_offset, stride_byte_offset,
                     swizzle_mode_name(swizzle));
}

std::optional<WgmmaOperand> wgmma_operand(const SharedTile& t, bool k_major) {
  WgmmaOperand o;
  o.k_major = k_major;
  o.elem_bytes = t.elem_bytes;
  const SharedTileGeometry g = t.geometry();
  o.line_bytes = g.line_bytes();
  if (o.line_bytes != 32 && o.line_bytes != 64 && o.line_bytes != 128)
    return std::nullopt;
  if (g.row_bytes() % o.line_bytes || t.rows % 8)
    return std::nullopt;
  o.swizzle_mode = g.swizzle_mode();
  // Panels hold all rows of one line width; a single-panel tile still gets its size as the stride
  // (never used by an instruction that stays within the panel, but well defined).
  o.panel_bytes = t.rows * o.line_bytes;
  // The 8-row swizzle atom is 8 lines; atoms follow each other along the rows.
  o.sbo = 8 * o.line_bytes;
  // K-major swizzled layouts ignore the leading offset (PTX: "assumed to be 1"); M/N-major ones
  // step from one panel (line width of M/N) to the next.
  o.lbo = k_major ? 16 : o.panel_bytes;
  return o;
}

bool wgmma_enabled(const Target& target, const CodegenOptions& options) {
  return target.sm == 90 && target.arch_specific && options.wgmma && options.tensor_cores && options.swizzle;
}

namespace {

bool fail(std::string* why, std::string reason) {
  if (why)
    *why = std::move(reason);
  return false;
}

} // namespace

bool dot_uses_wgmma(const Kernel& k, const Op& dot, const LoweringPlan& plan, const Target& target,
                    const CodegenOptions& options, std::string* why) {
  if (!wgmma_enabled(target, options))
    return fail(why, "wgmma needs sm_90a with tensor cores and swizzled tiles");
  ValueId a = dot.operands[0], b = dot.operands[1];
  DType in = k.type(a).elem;
  if (in != DType::f16 && in != DType::bf16)
    return fail(why, fmt::format("operands are {}, not f16/bf16", dtype_name(in)));
  auto layout = plan.layout.find(dot.result());
  if (layout == plan.layout.end() || layout->second.kind != LayoutKind::Mma || layout->second.collapsed)
    return fail(why, "the result is not in the mma accumulator layout");
  const WarpSplit& w = plan.warps_of(dot);
  if (w.warps_m % 4)
    return fail(why, fmt::format("{} warps along M do not form warpgroups of 4", w.warps_m));
  int64_t M = k.type(a).shape[0], K = k.type(a).shape[1], N = k.type(b).shape[1];
  int64_t WN = N / w.warps_n;
  if (M % (16 * w.warps_m) || K % 16 || WN % 8 || WN > 256)
    return fail(why, fmt::format("({}, {}) x ({}, {}) does not split into m64nNk16 over {}x{} warps", M, K, K,
                                 N, w.warps_m, w.warps_n));
  if (plan.where(b) != Placement::Shared)
    return fail(why, "B is not in shared memory");
  auto bo = wgmma_operand(plan.tiles[plan.tile_of.at(b)], plan.contiguous_dim(b) == 0);
  if (!bo)
    return fail(why, "B's shared lines are not 32, 64 or 128 bytes");
  if (WN % bo->mn_granule())
    return fail(why, fmt::format("a warpgroup's {} columns of N-major B are not whole {}-byte lines", WN,
                                 bo->line_bytes));
  Placement pa = plan.where(a);
  if (pa == Placement::Shared) {
    auto ao = wgmma_operand(plan.tiles[plan.tile_of.at(a)], plan.contiguous_dim(a) == 1);
    if (!ao)
      return fail(why, "A's shared lines are not 32, 64 or 128 bytes");
  } else if (pa != Placement::Registers) {
    return fail(why, "A is neither in shared memory nor in registers");
  }
  return true;
}

const Op* deferred_wgmma_dot(const Kernel& k, const Op& loop, const LoweringPlan& plan, const Target& target,
                             const CodegenOptions& options) {
  auto pit = plan.pipelined.find(&loop);
  if (loop.kind != OpKind::For || pit == plan.pipelined.end())
    return nullptr;
  if (plan.tiles[plan.tile_of.at(pit->second.front()->result())].stages < 3)
    return nullptr;
  const Region& body = loop.regions[0];
  const Op& yield = *body.ops.back();
  const Op* found = nullptr;
  int dots = 0;
  for (const auto& op : body.ops)
    if (op->kind == OpKind::Dot) {
      ++dots;
      found = op.get();
    }
  if (dots != 1 || !dot_uses_wgmma(k, *found, plan, target, options))
    return nullptr;
  // The accumulator must be a carried value that only this dot reads, and the dot's result only the
  // yield (into that same carried value).
  ValueId acc = found->operands[2], result = found->result();
  auto arg = std::find(body.args.begin() + 1, body.args.end(), acc);
  if (arg == body.args.end())
    return nullptr;
  size_t slot = static_cast<size_t>(arg - body.args.begin() - 1);
  if (yield.operands.size() <= slot || yield.operands[slot] != result)
    return nullptr;
  int acc_uses = 0, result_uses = 0;
  walk(body, [&](const Op& o) {
    for (ValueId v : o.operands) {
      acc_uses += v == acc;
      result_uses += v == result;
    }
  });
  return acc_uses == 1 && result_uses == 1 ? found : nullptr;
}

std::string wgmma_support_source() { return std::string(wgmma_prelude_source()); }

std::string wgmma_function_name(int n, DType in, bool a_in_registers, bool trans_a, bool trans_b, bool zero_acc) {
  return fmt::format("kiln_wgmma_m64n{}k16_{}_{}{}{}{}", n, dtype_name(in), a_in_registers ? "rs" : "ss",
                     a_in_registers ? ""
                     : trans_a      ? "_ta"
                                    : "",
                     trans_b ? "_tb" : "", zero_acc ? "_z" : "");
}

std::string wgmma_function_source(int n, DType in, bool a_in_registers, bool trans_a, bool trans_b,
                                  bool zero_acc) {
  const int acc = n / 2; // f32 accumulators per thread
  std::string ty = in == DType::bf16 ? "bf16" : "f16";
  std::string name = wgmma_function_name(n, in, a_in_registers, trans_a, trans_b, zero_acc);
  // scale-d: 1 accumulates onto D (read and written), 0 writes A B into it (written only).
  const char* scale_d = zero_acc ? "0" : "1";
  std::string d_list, constraints;
  for (int i = 0; i < acc; ++i) {
    d_list += fmt::format("{}%{}", i ? ", " : "", i);
    constraints += fmt::format("{}\"{}f\"(d[{}])", i ? ", " : "", zero_acc ? "=" : "+", i);
  }
  std::string s;
  if (a_in_registers) {
    s += fmt::format(
        "__device__ __forceinline__ void {}(float (&d)[{}], const kiln::u32 (&a)[4], kiln::u64 b) {{\n", name,
        acc);
    s += fmt::format("  asm volatile(\"{{\\n\\t.reg .pred p;\\n\\tsetp.ne.b32 p, %{}, 0;\\n\\t"
                     "wgmma.mma_async.sync.aligned.m64n{}k16.f32.{}.{} {{{}}}, {{%{}, %{}, %{}, %{}}}, %{}, "
                     "p, 1, 1, {};\\n}}\\n\"\n",
                     acc + 5, n, ty, ty, d_list, acc, acc + 1, acc + 2, acc + 3, acc + 4, trans_b ? 1 : 0);
    s += fmt::format(
        "      : {}\n      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(b), \"r\"({}));\n}}\n",
        constraints, scale_d);
  } else {
    s += fmt::format("__device__ __forceinline__ void {}(float (&d)[{}], kiln::u64 a, kiln::u64 b) {{\n",
                     name, acc);
    s += fmt::format(
        "  asm volatile(\"{{\\n\\t.reg .pred p;\\n\\tsetp.ne.b32 p, %{}, 0;\\n\\t"
        "wgmma.mma_async.sync.aligned.m64n{}k16.f32.{}.{} {{{}}}, %{}, %{}, p, 1, 1, {}, {};\\n}}\\n\"\n",
        acc + 2, n, ty, ty, d_list, acc, acc + 1, trans_a ? 1 : 0, trans_b ? 1 : 0);
    s += fmt::format("      : {}\n      : \"l\"(a), \"l\"(b), \"r\"({}));\n}}\n", constraints, scale_d);
  }
  return s;
}

} // namespace kiln
