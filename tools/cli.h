// What the `kiln` subcommands share: the option category, the table of subcommands, output to a file or
// stdout, NAME=VALUE lists, the interpreter/GPU choice, and the "no CUDA driver" error.
// Each subcommand lives in its own <name>_command.cpp with its llvm::cl options and a run function.
#pragma once

#include "dsl/registry.h"
#include "kernels/executor.h"
#include "support/output_set.h"

#include <llvm/Support/CommandLine.h>
#include <llvm/Support/raw_ostream.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::cli {

// The category every kiln option belongs to; LLVM's own options are hidden from --help.
llvm::cl::OptionCategory& kiln_category();

// The program's name in its messages ("kiln", or a user's tool's file name: kiln/tool_main.h), as tool_main
// set it before running a command.
const std::string& program_name();
void set_program_name(const std::string& name);

struct Command {
  llvm::cl::SubCommand* sub;
  // The exit code; throws kiln::Error on a user mistake. `kernels` is the registry tool_main was given
  // (kiln/tool_main.h): the commands that take a kernel by name look it up there.
  int (*run)(const KernelRegistry& kernels);
};

// Each subcommand's registration (defined in its file).
Command info_command();
Command list_command();
Command emit_command();
Command attention_command();
Command decode_command();
Command compare_loads_command();
Command cache_command();
Command model_command();
Command demo_command();
Command tune_command();
Command run_command();

// Writes `text` to the output's path (support/output_set.h), or to stdout when it is empty.
void write_output(const OutputPath& output, const std::string& text);

// "A=1,B=2" items (each --set may hold one or several) into a map; a malformed item is a kiln::Error
// naming `flag`.
std::map<std::string, int64_t> parse_assignments(const std::vector<std::string>& items, const char* flag);

// The interpreter when asked (--interpret or KILN_INTERPRET=1); else the GPU, which must have a driver:
// otherwise the "no CUDA driver found" kiln::Error, suggesting --interpret.
Executor choose_executor(bool interpret_flag);

// Throws "no CUDA driver found: <why>; <what> needs a GPU" when the driver cannot be loaded.
void require_gpu(const std::string& what);

// The arch kiln generates for by default: the current device's, else sm_90a.
std::string default_arch();

// "1.23 ms" / "456 us", short human numbers.
std::string human_bytes(double bytes);
std::string human_seconds(double s);

} // namespace kiln::cli
