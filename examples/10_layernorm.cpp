// Tutorial 10: a LayerNorm forward of your own, from the kernel to `kiln run --check`, `emit` and `tune`
// (docs/tutorials/10_layernorm.md). The kernel, its tensor shapes and its double-precision reference are in
// examples/kernels/layernorm_fwd.cpp; this program is kiln's command line over it. With no arguments it
// checks the kernel on a ragged problem (1000 columns in a 1024 tile, 37 rows over 2-row programs).
#include "examples/kernels/layernorm_fwd.h"
#include "examples/kernels/tutorial_main.h"

int main(int argc, char** argv) {
  return tutorial::tutorial_main(
      argc, argv, tutorial::layernorm_fwd_def(),
      {"--shape", "n_rows=37,n_cols=1000", "--set", "ROWS=2", "--scalar", "eps=1e-5"});
}
