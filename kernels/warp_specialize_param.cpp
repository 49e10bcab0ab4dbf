#include "kernels/warp_specialize_param.h"

namespace kiln {

ParamDef warp_specialize_param(int64_t default_value) {
  return ParamDef::flag("WARP_SPECIALIZE", default_value,
                        "1: a producer warpgroup issues the main loop's TMA copies (sm_90a; see codegen.h)");
}

} // namespace kiln
