// A roofline performance model read off a kernel's IR and its launch: FLOPs, global bytes loaded and
// stored, operational intensity, and the roofline time against peak rates.
//
// Counting conventions (per program, then summed over the grid):
// - dot (M,K)x(K,N): 2·M·N·K FLOPs ("matrix FLOPs"; the accumulate is inside the 2).
// - elementwise float arithmetic (unary, binary incl. comparisons/min/max) counts 1 FLOP per result element,
//   a float reduction 1 per input element ("vector FLOPs"); casts, selects (where), integer index math and
//   shape ops count nothing. Only matrix FLOPs enter the roofline (against the tensor-core peak); vector
//   FLOPs are reported beside them.
// - global bytes: every load/store through a block pointer moves its tile, clipped to the tensor along the
//   boundary-checked dims (what a boundary-checked access really reads); loads/stores through pointer
//   tensors move every element of the tile (masks are runtime data: an upper bound); atomics load and store.
//   No cache is modelled: each access counts as DRAM traffic.
// - trip counts and branches are runtime values: the model evaluates the kernel's scalar ops (program ids,
//   scalar arguments, integer/float scalar arithmetic, block-pointer shapes and offsets) for every program,
//   so causal masks, tails and per-program loop bounds are exact. A loop bound or branch that depends on a
//   tensor or on an argument not given is a kiln::Error naming it. Grids above `max_programs` programs, or
//   whose evaluation would visit more than ~10^8 ops, are sampled at a uniform stride and the totals scaled.
#pragma once

#include "dsl/ir.h"
#include "dsl/registry.h"

#include <cstdint>
#include <map>
#include <string>

namespace kiln {

struct Cost {
  double matrix_flops = 0; // dot
  double vector_flops = 0; // elementwise and reductions
  double bytes_loaded = 0; // global memory
  double bytes_stored = 0;

  double flops() const { return matrix_flops + vector_flops; }
  double bytes() const { return bytes_loaded + bytes_stored; }
  Cost& operator+=(const Cost& o);
};

struct CostEstimate {
  Cost total;           // over the grid
  int64_t programs = 0; // grid size
  int64_t programs_evaluated = 0;
  Cost per_program() const; // total / programs
  double intensity() const; // matrix FLOPs per byte
};

// Scalar kernel arguments by parameter name (integers and floats); pointers are not needed.
using ScalarArgs = std::map<std::string, double>;

CostEstimate estimate_cost(const Kernel& k, const Grid& grid, const ScalarArgs& args,
                           int64_t max_programs = 65536);

struct Roofline {
  double peak_flops_per_s = 0;
  double peak_bytes_per_s = 0;
  double compute_s = 0; // matrix FLOPs / peak
  double memory_s = 0;  // bytes / bandwidth
  double time_s() const { return compute_s > memory_s ? compute_s : memory_s; }
  bool compute_bound() const { return compute_s >= memory_s; }
  double ridge_intensity() const { return peak_flops_per_s / peak_bytes_per_s; } // FLOP/byte
};

// peak_tflops in 10^12 FLOP/s, peak_gbps in 10^9 bytes/s; both must be positive (kiln::Error otherwise).
Roofline roofline(const CostEstimate& e, double peak_tflops, double peak_gbps);

} // namespace kiln
