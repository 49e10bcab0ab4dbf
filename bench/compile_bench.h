// The "compile" suite: how long kiln takes to get FA2 forward (its default config, f16, D = 64) from
// nothing to a loaded function, in a fresh process each time (kiln_bench as a child, see child_probe.h):
//   cold: an empty compile cache (a new KILN_CACHE_DIR) and the driver's JIT cache off: build the IR,
//         generate CUDA, compile with NVRTC, write the cache entry, load the module (target < 1.5 s);
//   warm: the entry on disk, nothing in memory: build the IR, generate CUDA (the cache key is a hash of
//         it), read the entry, load the module (target < 20 ms).
// Each is the median of a few processes, with every phase reported. Creating the CUDA context and
// dlopen-ing NVRTC happen once per process whatever kiln does; they are measured and reported beside the
// latency, not inside it.
#pragma once

#include "bench/bench_session.h"
#include "bench/child_probe.h"

#include <vector>

namespace kiln::bench {

std::vector<BenchCase> compile_cases(const BenchOptions& options);

// The child's side (--probe=compile): one timed compile or cache load into a.dir.
int run_compile_probe(const ProbeArgs& a);

} // namespace kiln::bench
