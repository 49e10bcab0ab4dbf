// kiln_bench --self-test: CPU-only checks of the harness's own pieces (the sampled attention reference
// against the full one, row gathering, random fills, case keys, one (key, system) per case, option
// parsing, the ablation variants, the model's FLOP count, and the compile suite's child processes, which
// compile for sm_80 with NVRTC when it is there), so that a wrong figure can't come from the harness.
// Needs no GPU.
#pragma once

namespace kiln::bench {

// Prints one line per check to stderr; returns the number of failed checks.
int run_self_test();

} // namespace kiln::bench
