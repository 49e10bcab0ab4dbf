// Tutorial 11: a matmul with its bias and GELU fused into the epilogue, from the kernel to `kiln run
// --check`, `emit` and `tune` (docs/tutorials/11_matmul_bias_gelu.md). The kernel, its tensor shapes and its
// double-precision reference are in examples/kernels/matmul_bias_gelu.cpp; this program is kiln's command
// line over it. With no arguments it checks the kernel on sizes that leave partial tiles on every side.
#include "examples/kernels/matmul_bias_gelu.h"
#include "examples/kernels/tutorial_main.h"

int main(int argc, char** argv) {
  return tutorial::tutorial_main(argc, argv, tutorial::matmul_bias_gelu_def(),
                                 {"--shape", "M=80,N=72,K=96", "--set", "BLOCK_M=32,BLOCK_N=32,BLOCK_K=32"});
}
