// The tensor maps a kernel's TMA copies read (codegen/tma_plan.h), built for one launch from its
// arguments. Whether a map is legal depends on the arguments (a base or stride not 16-byte aligned, a
// dim beyond 2^32, a parameter whose sign makes a per-program coordinate negative), so the choice between TMA and the kernel's cp.async path is made here, per launch:
// when every map encodes, `use_tma` is 1; otherwise the maps are left zero, `use_tma` is 0 and `why_not`
// says which rule which map broke (JitKernel::launch then runs a warp-specialised kernel's unspecialised rendering,
// GeneratedKernel::illegal_maps_fallback, which has the cp.async path).
#pragma once

#include "codegen/tma_plan.h"
#include "dsl/ir.h"
#include "jit/launch_arg.h"
#include "runtime/tensor_map.h"

#include <string>
#include <vector>

namespace kiln {

struct TensorMapArgs {
  std::vector<rt::CUtensorMap> maps; // one per TensorMapParam, in order (the kiln_map<i> parameters)
  int32_t use_tma = 0;               // the kiln_tma parameter
  std::string why_not;               // when use_tma is 0
};

// The spec of map `m` for these arguments (which follow `params`); its legality is not checked here.
rt::TensorMapSpec tensor_map_spec(const TensorMapParam& m, const std::vector<Param>& params,
                                  const std::vector<LaunchArg>& args);

// Every map's spec, checked; encoded through the process-wide cache when all are legal and the driver has
// tensor maps. Arguments must already have passed the launch's argument check.
TensorMapArgs tensor_map_args(const std::vector<TensorMapParam>& maps, const std::vector<Param>& params,
                              const std::vector<LaunchArg>& args);

} // namespace kiln
