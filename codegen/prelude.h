// The device prelude: kiln's small CUDA tile library (fragment types, mma/ldmatrix/cp.async
// wrappers, conversions, warp shuffles, fast exp2), embedded in the binary and prepended to every
// generated kernel. It needs no CUDA header, so NVRTC compiles it with no include path.
#pragma once

#include <string_view>

namespace kiln {

std::string_view prelude_source(); // the text of codegen/prelude/kiln_prelude.cuh

} // namespace kiln
