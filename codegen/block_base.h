// A block pointer's base as a tensor map can describe it (codegen/tma_plan.h): a pointer parameter plus a sum
// of per-program terms `coordinate * stride`, each stride known at launch. Kernels that serve many batches
// and heads write exactly this, as in Triton:
//
//   k_base = k + off_b * stride_kb + off_h * stride_kh;   // off_b, off_h from program ids
//   make_block_ptr(k_base, {N_K, D}, {stride_kn, 1}, ...)
//
// A tensor map's base address is fixed for the launch, so each term becomes one more dim of the map, of box
// 1, whose coordinate each copy passes: the 2-D block over one head becomes a 4-D map over the whole tensor,
// and the hardware still zero-fills the head's tail rows (they are not the next head's first rows, as they
// would be in a map over a flattened tensor).
//
// TMA takes 32-bit signed coordinates, so every coordinate must be bounded: `magnitude_bound` proves a bound
// from the program ids (CUDA's grid limits, which every launch checks), constants, and operations that do not
// grow a magnitude (integer division and remainder, widening casts, min/max) or grow it by a known amount
// (add, multiply); the min of two values >= 0 (nonneg_conditions, with no condition) is bounded by either.
// A coordinate it cannot bound that way may still be capped by an integer parameter, min(x, P): the map's dim
// is then P + 1 long, a size the launch knows (OuterDim::extent_param). Or, where it is a sum or a product with a
// factor known at launch, taken apart into terms of its own, each bounded by itself, at strides that are products
// the launch computes (LaunchScalar): `(b * H + h) * N`, a contiguous [B, H, N] tensor's row, is b
// at stride H * N and h at stride N. A kernel whose coordinate comes from a
// loop over a parameter's range (a GQA group's query heads, `head0 + g`, as in dK/dV) may write that cap, a
// no-op that puts the loop's copies on TMA; the refusal's reason says so.
// A coordinate it can neither bound nor see capped keeps the loop on cp.async, with the reason.
//
// A coordinate must also be >= 0: the hardware fills a negative one with zeros, where the pointer arithmetic
// the kernel wrote (and cp.async) reads the memory before the base, which a pointer into the middle of a
// buffer may legally do. `nonneg_conditions` proves it from program ids, constants and operations that keep
// a sign (add, multiply, division, remainder's dividend, min, max, widening casts) and for-loop induction
// variables that start >= 0 and step by a positive constant, up to the signs of integer parameters, which the
// launch checks (jit/tensor_map_args.h). A subtraction or a negation keeps cp.async. A bounded coordinate cannot
// wrap (its magnitude is proven within 2^31); the x of a capped one, min(x, P), is taken not to wrap either (a
// kernel whose head index wraps past 2^31 reads garbage on either path).
#pragma once

#include "codegen/tma_plan.h"
#include "dsl/ir.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

// `v` as an integer the launch knows: a parameter (or a widening cast of one) or a constant.
std::optional<LaunchScalar> launch_scalar(const Kernel& k, ValueId v);

struct BlockBase {
  int param = -1;              // the pointer parameter the base starts from
  std::vector<OuterDim> terms; // the per-program terms added to it, outermost last (the order they nest in
                               // memory is the strides', which the map does not need)
};

// `base` (a pointer scalar) as a pointer parameter plus bounded terms, or nullopt with `why` saying which
// part is not one.
std::optional<BlockBase> decompose_block_base(const Kernel& k, ValueId base, std::string& why);

// The largest |value| `v` can take in any program of any launch, when the IR proves one; nullopt otherwise.
std::optional<int64_t> magnitude_bound(const Kernel& k, ValueId v);

// The integer parameters (indices) whose values >= 0 make `v` >= 0 in every program, sorted, without repeats;
// nullopt when the IR proves no such thing (a subtraction, a negation, a narrowing cast, a loaded value).
std::optional<std::vector<int>> nonneg_conditions(const Kernel& k, ValueId v);

} // namespace kiln
