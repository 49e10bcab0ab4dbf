// How a CTA's warps share the kernel's mma tiles (assign_layouts' first step).
//
// One split serves every dot: FA2's S = Q Kᵀ and its P V must agree along M for P to stay in registers. It is
// the largest warp counts along M and N that divide every dot's tile (16-row, 8-column instructions): with row
// reductions as far along M as the dots allow, so that a row's statistics stay within a warp; otherwise the
// cheapest in operand rows read a k step (on sm_90a, with warpgroups of four warps along M for wgmma).
//
// A dot with fewer rows than the others (the fused backward's dQ = dS K, BLOCK_M rows beside BLOCK_N-row key
// products) would hold every dot to its few warps along M. Where leaving such dots out lets the tallest put more
// warps along M, the tallest take the kernel's split and each shorter dot one of its own over the same warps,
// without replicas (else one split for all). Kernels with row reductions keep one split.
#pragma once

#include "codegen/codegen.h"
#include "codegen/layout.h"
#include "codegen/target.h"

#include <unordered_map>

namespace kiln {

struct WarpSplits {
  WarpSplit kernel;
  std::unordered_map<const Op*, WarpSplit> dots; // the dots with a split of their own
};

WarpSplits choose_warp_splits(const Kernel& k, const Target& target, const CodegenOptions& options, int num_warps);

} // namespace kiln
