// Tutorial 12: a row-wise logsumexp that streams long rows in chunks with a running maximum (the online
// softmax's statistics), from the kernel to `kiln run --check`, `emit` and `tune`
// (docs/tutorials/12_online_logsumexp.md). The kernel, its tensor shapes and its double-precision reference
// are in examples/kernels/online_logsumexp.cpp. With no arguments it checks the kernel on rows of 3000
// columns in 256-column chunks (the last chunk partial).
#include "examples/kernels/online_logsumexp.h"
#include "examples/kernels/tutorial_main.h"

int main(int argc, char** argv) {
  return tutorial::tutorial_main(argc, argv, tutorial::online_logsumexp_def(),
                                 {"--shape", "n_rows=9,n_cols=3000", "--set", "BLOCK_N=256,ROWS=2"});
}
