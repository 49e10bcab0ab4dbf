// The device sources kiln's generated kernels are built from, embedded in the binary (CMake reads them
// from codegen/prelude/). None needs a CUDA header, so NVRTC compiles them with no include path.
// - the prelude, prepended to every generated kernel: kiln's small CUDA tile library (fragment types,
//   mma/ldmatrix/cp.async wrappers, conversions, warp shuffles, fast exp2);
// - the wgmma prelude, added to kernels that use Hopper's warpgroup MMA: fences, commit/wait, the
//   shared-memory matrix descriptor encoder. (The per-shape wgmma instructions are generated:
//   wgmma_function_source in codegen/wgmma.h.)
#pragma once

#include <string_view>

namespace kiln {

std::string_view prelude_source();       // the text of codegen/prelude/kiln_prelude.cuh
std::string_view wgmma_prelude_source(); // the text of codegen/prelude/kiln_wgmma.cuh

} // namespace kiln
