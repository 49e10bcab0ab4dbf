#include "codegen/choose_warp_splits.h"

#include "codegen/choose_dot_lowering.h"
#include "codegen/wgmma.h"
#include "dsl/verifier.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

namespace kiln {

namespace {

// The best split of the warps over `dots` (their result shapes), or nullopt where none divides them all.
std::optional<WarpSplit> best_split(const Kernel& k, bool wgmma_target, int w,
                                    const std::vector<const Op*>& dots, bool row_reductions) {
  int64_t M = 0, N = 0;
  // Every dot's tile must split over the same warps (FA2's S = Q Kᵀ is BLOCK_M x BLOCK_N, its P V BLOCK_M x
  // HEAD_DIM): the largest warp counts along M and N that divide all of them.
  int64_t m_parts = 0, n_parts = 0; // gcd over the dots of M / 16 and N / 8
  DType dot_in = DType::f32;
  for (const Op* op : dots) {
    const Shape& c = k.type(op->result()).shape;
    m_parts = std::gcd(m_parts, std::max<int64_t>(1, c[0] / 16));
    n_parts = std::gcd(n_parts, std::max<int64_t>(1, c[1] / 8));
    if (M == 0) {
      M = c[0];
      N = c[1];
      dot_in = k.type(op->operands[0]).elem;
    }
  }
  WarpSplit split{1, 1, w};
  if (M == 0)
    return split;
  auto divides_every_dot = [&](int wm, int wn) { return m_parts % wm == 0 && n_parts % wn == 0; };
  // Warps beyond what the tiles can split among (16-row, 8-column instructions) hold replicas.
  if (row_reductions) { // rows stay within a warp, so row statistics need no shared memory
    while (2 * split.warps_m <= w && divides_every_dot(2 * split.warps_m, 1))
      split.warps_m *= 2;
    while (2 * split.warps_m * split.warps_n <= w && divides_every_dot(split.warps_m, 2 * split.warps_n))
      split.warps_n *= 2;
    return split;
  }
  // On sm_90a, warpgroup MMA wants warps_m a multiple of 4 (a warpgroup's warps hold 64
  // consecutive rows) and reads each operand once per instruction, so larger N per warpgroup is
  // cheaper; mma.sync loads each warp's fragments itself.
  bool wgmma = wgmma_target && is_half(dot_in);
  for (bool need_warpgroups : {wgmma, false}) {
    int64_t best = -1;
    for (int wm = 1; wm <= w; wm *= 2)
      for (int wn = 1; wm * wn <= w; wn *= 2) {
        if (M % (16 * wm) || N % (8 * wn) || !divides_every_dot(wm, wn) || (need_warpgroups && wm % 4))
          continue;
        int64_t replicas = w / (wm * wn);
        // Operand rows read per k step: per warp for mma.sync, per warpgroup instruction for wgmma.
        int64_t cost =
            need_warpgroups ? (M / (16 * wm)) * (64 + N / wn) * replicas : (M / wm + N / wn) * replicas;
        if (best < 0 || cost < best) {
          best = cost;
          split.warps_m = wm;
          split.warps_n = wn;
        }
      }
    if (best >= 0)
      return split;
  }
  return std::nullopt;
}

} // namespace

WarpSplits choose_warp_splits(const Kernel& k, const Target& target, const CodegenOptions& options, int w) {
  const bool wgmma = wgmma_enabled(target, options);
  bool row_reductions = false;
  std::vector<const Op*> dots;
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::Reduce && k.type(op.operands[0]).rank() == 2 && op.axis == 1)
      row_reductions = true;
    if (op.kind == OpKind::Dot && !dot_below_mma_tile(k, op)) // a dot on FMA takes any warp split
      dots.push_back(&op);
  });
  WarpSplits out;
  out.kernel = best_split(k, wgmma, w, dots, row_reductions).value_or(WarpSplit{1, 1, w});
  if (row_reductions || dots.empty())
    return out;
  // Dots with fewer rows than the others (dK/dV's atomic dQ, BLOCK_M x HEAD_DIM beside the BLOCK_N-row key
  // products) would hold every dot to their few warps along M: with 8 warps and 64 rows, each of the key
  // products would spread its columns over two warpgroups. Where leaving them out lets the tallest dots
  // spread their rows further, those take the kernel's split and each shorter dot one of its own over the
  // same warps (its operands and result converted where the layouts differ).
  int64_t tallest = 0;
  for (const Op* d : dots)
    tallest = std::max(tallest, k.type(d->result()).shape[0]);
  std::vector<const Op*> tall, short_dots;
  for (const Op* d : dots)
    (k.type(d->result()).shape[0] == tallest ? tall : short_dots).push_back(d);
  if (short_dots.empty())
    return out;
  std::optional<WarpSplit> main = best_split(k, wgmma, w, tall, false);
  if (!main || main->warps_m <= out.kernel.warps_m)
    return out;
  std::unordered_map<const Op*, WarpSplit> own;
  for (const Op* d : short_dots) {
    std::optional<WarpSplit> s = best_split(k, wgmma, w, {d}, false);
    if (!s || s->warps_m * s->warps_n != main->warps_m * main->warps_n)
      return out; // a short dot that would hold replicas: keep one split for all
    own[d] = *s;
  }
  out.kernel = *main;
  out.dots = std::move(own);
  return out;
}

} // namespace kiln
