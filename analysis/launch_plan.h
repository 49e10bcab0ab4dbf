// A launch plan: what it takes to run any kernel on synthetic data, read off its IR, so that the tools can
// tune, time and model every registered kernel without a host harness written for it.
//
// For each parameter the plan says:
// - a scalar: its value, from `given` (by parameter name); an integer the caller did not give may be a
//   stride of a block pointer, derived as the stride of a densely packed tensor of the pointer's shape in
//   the pointer's order (order[0] has stride 1, the next dim the size of the first, ...). Any other integer
//   without a value is a kiln::Error naming every such parameter. Floats default to 1.0.
// - a pointer: the element range [lo, hi) around the address passed that the kernel may reach, and whether
//   it reads and/or writes it. Ranges come from an interval analysis of the address computations over the
//   whole grid (analysis/address_analysis.h: program ids, aranges, loop induction variables and loop-carried
//   offsets, scalars); masks are ignored, so a range may be larger than what a launch touches but never
//   smaller. A block pointer reaches the tensor it declares: base + sum over dims of (shape - 1) * stride. An
//   address that depends on loaded data or on a value the analysis cannot bound is a kiln::Error naming the
//   parameter and the op.
#pragma once

#include "dsl/host_buffer.h"
#include "dsl/ir.h"
#include "dsl/registry.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

// Scalar argument values by parameter name.
using ArgValues = std::map<std::string, double>;

struct PlannedArg {
  enum class Kind : uint8_t { Buffer, Int, Float };
  Kind kind = Kind::Int;
  std::string name;
  DType dtype = DType::i32; // the pointee's (Buffer) or the scalar's
  // Int / Float: the value, and where it came from ("given", "contiguous stride of ...", "default").
  double value = 0;
  std::string origin;
  // Buffer: element offsets from the passed address the kernel may reach, [lo, hi); lo <= 0 < hi.
  int64_t lo = 0, hi = 1;
  bool read = false, written = false;

  bool is_buffer() const { return kind == Kind::Buffer; }
  int64_t elements() const { return hi - lo; }
  int64_t bytes() const { return elements() * dtype_bytes(dtype); }
};

struct LaunchPlan {
  std::string kernel;
  std::vector<PlannedArg> args; // in the kernel's parameter order

  const PlannedArg& arg(const std::string& name) const; // InternalError when absent
  // Bytes of the buffers the kernel reads / writes, each counted once (a buffer read and written counts in
  // both): the traffic of a launch that touches every reachable element once.
  int64_t bytes_read() const;
  int64_t bytes_written() const;
};

// The plan for launching `k` over `grid` with the scalar values in `given`. A name in `given` that is not a
// scalar parameter of `k`, or a non-integral value for an integer parameter, is a kiln::Error.
LaunchPlan plan_launch(const Kernel& k, const Grid& grid, const ArgValues& given);

// The union of plans of one kernel under several configs (the candidates of a tuning run): per buffer the
// widest range, read/written if any plan says so. Scalars must agree (InternalError otherwise).
LaunchPlan merge_plans(const std::vector<LaunchPlan>& plans);

// A buffer for a planned pointer argument: `a.elements()` elements, uniformly random in [-1, 1] for floats
// (rounded to the dtype), in [0, 16) for integers (0 or 1 for i1). The address to pass is element -a.lo.
HostBuffer random_buffer(const PlannedArg& a, uint64_t seed);

} // namespace kiln
