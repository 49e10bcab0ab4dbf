#include "kernels/min_blocks_param.h"

namespace kiln {

ParamDef min_blocks_per_sm_param(int64_t default_value) {
  return {"MIN_BLOCKS_PER_SM", default_value, "CTAs that must fit on one SM (caps registers; see codegen.h)"};
}

} // namespace kiln
