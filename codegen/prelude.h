// The device sources kiln's generated kernels are built from, embedded in the binary (CMake reads them
// from codegen/prelude/). None needs a CUDA header, so NVRTC compiles them with no include path.
// - the prelude, prepended to every generated kernel: kiln's small CUDA tile library (fragment types,
//   mma/ldmatrix/cp.async wrappers, conversions, warp shuffles, fast exp2);
// - the wgmma prelude, added to kernels that use Hopper's warpgroup MMA: the wgmma fence, commit/wait, the
//   shared-memory matrix descriptor encoder. (The per-shape wgmma instructions are generated:
//   wgmma_function_source in codegen/wgmma.h.)
// - the TMA prelude (sm_90+): the tensor-map parameter type, mbarrier init / arrive.expect_tx /
//   try_wait.parity, TMA tile loads and stores (their bulk-group commit and waits and the async-proxy fence
//   are the main prelude's, beside the bulk reduction of atomic_add through a block pointer), added to kernels
//   with TMA-copied loops; tests/gpu/tma_gpu_test.cpp also runs it against runtime/tensor_map.h's maps;
// - the warp-specialisation prelude (sm_90a), added to warp-specialised kernels: setmaxnreg and the
//   consumers' named barrier;
// - the ping-pong prelude, added to kernels whose consumer warpgroups take turns: the named barrier's arrive;
// - the Philox prelude, added to kernels that call rand/randn: the counter-based generator, which the
//   interpreter compiles as host code from the same file;
// - the erf prelude, added to kernels that call erf on f32, f16 or bf16: a branch-free erf (CUDA's erff
//   branches, which serialises a tile's elements), which tests/unit/erf_prelude_test.cpp compiles as host code;
// - the ex2-on-FMA prelude, added to kernels with EXP2_ON_FMA (codegen/plan_exp2_on_fma.h): 2^x by a polynomial
//   on the FMA pipe, which tests/unit/ex2_fma_prelude_test.cpp compiles as host code;
// - the tile-scheduler prelude, added to kernels on a dynamic persistent grid (PERSISTENT=2): the draw of a CTA's
//   next program id from the launch's counter;
// - the warp-uniform prelude (sm_90a): a scalar loaded from memory made known to ptxas as warp-uniform;
// - the read-at-use prelude, added to kernels with a staged row vector: a register tile read where it is used.
#pragma once

#include <string_view>

namespace kiln {

std::string_view prelude_source();       // the text of codegen/prelude/kiln_prelude.cuh
std::string_view wgmma_prelude_source(); // the text of codegen/prelude/kiln_wgmma.cuh
std::string_view tma_prelude_source();   // the text of codegen/prelude/kiln_tma.cuh
std::string_view warp_specialize_prelude_source(); // the text of codegen/prelude/kiln_warp_specialize.cuh
std::string_view pingpong_prelude_source();        // the text of codegen/prelude/kiln_pingpong.cuh
std::string_view philox_prelude_source();          // the text of codegen/prelude/kiln_philox.cuh
std::string_view erf_prelude_source();             // the text of codegen/prelude/kiln_erf.cuh
std::string_view ex2_fma_prelude_source();         // the text of codegen/prelude/kiln_ex2_fma.cuh
std::string_view warp_uniform_prelude_source();    // the text of codegen/prelude/kiln_warp_uniform.cuh
std::string_view tile_scheduler_prelude_source();  // the text of codegen/prelude/kiln_tile_scheduler.cuh
std::string_view read_at_use_prelude_source();     // the text of codegen/prelude/kiln_read_at_use.cuh

} // namespace kiln
