// kiln_bench --self-test: CPU-only checks of the harness's own pieces (the sampled attention reference
// against the full one, row gathering, random fills, case keys), so that a wrong figure can't come from
// the harness. Needs no GPU.
#pragma once

namespace kiln::bench {

// Prints one line per check to stderr; returns the number of failed checks.
int run_self_test();

} // namespace kiln::bench
