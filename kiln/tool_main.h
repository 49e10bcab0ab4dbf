// The `kiln` command line as a library call, for a program that runs it over its own kernels (as LLVM's tools
// and MLIR's MlirOptMain are entry points a user's driver calls):
//
//   #include <kiln/tool_main.h>
//   kiln::KernelDef layernorm_def();                       // the user's kernel: build, params, grid, ...
//   int main(int argc, char** argv) {
//     kiln::KernelRegistry kernels;                         // or `= kiln::builtin_kernels();` to keep kiln's
//     kernels.add(layernorm_def());
//     return kiln::tool_main(argc, argv, kernels);
//   }
//
// linked with kiln::tool (CMake: find_package(kiln), target_link_libraries(my_kiln PRIVATE kiln::tool)).
// Then `my_kiln list`, `my_kiln emit layernorm --stage ir|lowered|cuda|ptx|sass`, `my_kiln model layernorm
// --shape ...`, `my_kiln tune layernorm --shape ...` and `my_kiln run layernorm --in x=x.npy ... --check` work on
// the user's kernels exactly as `kiln` does on kiln's: the shipped `kiln` is this call with kiln's own registry
// (tools/main.cpp). Messages start with the program's name (argv[0]'s file name), not `kiln`.
//
// The registry is an argument, not a process-wide singleton filled by static constructors, so there is one
// registry by construction: no second copy of kiln's static storage can hold kernels the tool does not see
// (docs/design.md, "A user's kernels on the command line", says why kiln has no `--load plugin.so`).
//
// What each command needs from a KernelDef: `list` and `emit` only `build` (and `params`, for --set);
// `model` also `grid` and `size_args`; `tune` also `config_space` (the default config alone when it is empty)
// and, for the tuning cache, `tuning_key`; `run` what `model` needs, plus `tensor_dims` for .npy files of the
// buffers' shapes (dsl/kernel_reference.h) and `reference` for `--check`. `attention`, `compare-loads` and `demo`
// run kiln's FlashAttention
// whatever the registry holds.
#pragma once

#include "dsl/registry.h"    // KernelDef, KernelRegistry
#include "kernels/builtin.h" // builtin_kernels(): kiln's own kernels, to copy and add to

namespace kiln {

// Parses argv as the `kiln` command line does (a subcommand, then its options) and runs it over `kernels`.
// Returns the process exit code: 0 on success, 1 after printing "<program>: error: <message>" to stderr for a
// kiln::Error, an option error or any other failure (program = argv[0]'s file name). Call it once per
// process: the options are llvm::cl globals.
int tool_main(int argc, char** argv, const KernelRegistry& kernels);

} // namespace kiln
