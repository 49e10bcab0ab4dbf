// kiln::tool_main (kiln/tool_main.h), the `kiln` command line over a registry of kernels: picks the
// subcommand, parses options with llvm::cl, checks kiln's environment variables, runs the subcommand over the
// registry, and turns every kiln::Error (and every option error) into "<program>: error: <message>" with exit
// code 1 (program: argv[0]'s file name, `kiln` for the shipped tool).
#include "kiln/tool_main.h"

#include "dsl/interpreter.h"
#include "runtime/autotuner.h"
#include "runtime/device.h"
#include "support/env.h"
#include "support/error.h"
#include "support/version.h"
#include "tools/cli.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <exception>
#include <new>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using kiln::cli::Command;

std::vector<Command> all_commands() {
  namespace c = kiln::cli;
  return {c::info_command(),   c::list_command(),          c::emit_command(),  c::attention_command(),
          c::decode_command(), c::compare_loads_command(), c::cache_command(), c::model_command(),
          c::demo_command(),   c::tune_command(),          c::run_command()};
}

std::string command_names(const std::vector<Command>& cmds) {
  std::string s;
  for (const Command& c : cmds)
    s += (s.empty() ? "" : ", ") + c.sub->getName().str();
  return s;
}

// The program's name in its messages, as llvm::cl names it: argv[0]'s file name ("kiln" for the shipped
// tool, and where argv[0] names nothing).
std::string program_name(int argc, char** argv) {
  const std::string name = argc > 0 && argv[0] ? llvm::sys::path::filename(argv[0]).str() : std::string();
  return name.empty() ? "kiln" : name;
}

int print_error(const std::string& program, const std::string& message) {
  llvm::outs().flush();
  llvm::errs() << program << ": error: " << message << "\n";
  return 1;
}

// llvm::cl reports "<program>[ <sub>]: <message>" lines; restate each as a kiln error.
int report_option_errors(const std::string& program, const std::string& text) {
  llvm::SmallVector<llvm::StringRef, 4> lines;
  llvm::StringRef(text).split(lines, '\n', -1, false);
  llvm::outs().flush();
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.startswith(program)) {
      size_t colon = line.find(": ");
      if (colon != llvm::StringRef::npos)
        line = line.drop_front(colon + 2);
    }
    llvm::errs() << program << ": error: " << line << "\n";
  }
  return 1;
}

// Redirects file descriptor 2 to a temporary file until finish() (or destruction) and returns what was
// written. Where no temporary file can be made, stderr is left alone.
class StderrCapture {
public:
  StderrCapture() {
    if (llvm::sys::fs::createTemporaryFile("kiln-stderr", "txt", fd_, path_))
      return;
    llvm::errs().flush();
    saved_ = ::dup(2);
    if (saved_ < 0 || ::dup2(fd_, 2) < 0) {
      restore();
      llvm::sys::fs::remove(path_);
    }
  }
  ~StderrCapture() { finish(); }
  std::string finish() {
    if (fd_ < 0)
      return "";
    llvm::errs().flush();
    restore();
    std::string text;
    if (auto buf = llvm::MemoryBuffer::getFile(path_))
      text = (*buf)->getBuffer().str();
    llvm::sys::fs::remove(path_);
    return text;
  }

private:
  void restore() {
    if (saved_ >= 0) {
      ::dup2(saved_, 2);
      ::close(saved_);
      saved_ = -1;
    }
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  int fd_ = -1, saved_ = -1;
  llvm::SmallString<128> path_;
};

// KILN_INTERPRET, KILN_AUTOTUNE, KILN_DEVICE and KILN_LOG, read as their owners read them (a kiln::Error for a
// value they do not accept), before any command runs: a bad value is refused by every command, not only by
// the ones that read it (`KILN_AUTOTUNE=sometimes kiln attention --interpret` ran, ignoring it).
void check_environment() {
  (void)kiln::interpret_requested();
  (void)kiln::rt::autotune_mode_from_env();
  (void)kiln::rt::selected_device_ordinal();
  (void)kiln::env_choice("KILN_LOG", {"passes"}); // as codegen/codegen.cpp's log_passes reads it
}

int run(const std::string& program, int argc, char** argv, const kiln::KernelRegistry& kernels) {
  std::vector<Command> cmds = all_commands();
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream& os) { os << "kiln " << kiln::version() << "\n"; });
  llvm::cl::HideUnrelatedOptions(kiln::cli::kiln_category());
  for (const Command& c : cmds)
    llvm::cl::HideUnrelatedOptions(kiln::cli::kiln_category(), *c.sub);

  const std::string see_help = " (see '" + program + " --help')";
  if (argc < 2)
    return print_error(program, "no subcommand given; expected one of: " + command_names(cmds) + see_help);
  llvm::StringRef first = argv[1];
  if (!first.startswith("-")) {
    bool known = false;
    for (const Command& c : cmds)
      known |= c.sub->getName() == first;
    if (!known)
      return print_error(program, "unknown subcommand '" + first.str() +
                                      "'; expected one of: " + command_names(cmds) + see_help);
  }

  std::string option_errors;
  bool parsed = false;
  {
    // llvm::cl writes some diagnostics (bad values, repeated options) straight to stderr rather than to
    // the stream it is given; capture fd 2 while parsing so that every one becomes a kiln error line.
    // --help and --version exit inside the parser: leave stderr alone for them (no temporary file left).
    bool exits = false;
    for (int i = 1; i < argc; ++i)
      exits |= llvm::StringRef(argv[i]).startswith("--help") ||
               llvm::StringRef(argv[i]).startswith("-help") || llvm::StringRef(argv[i]) == "--version" ||
               llvm::StringRef(argv[i]) == "-version";
    llvm::Optional<StderrCapture> capture;
    if (!exits)
      capture.emplace();
    llvm::raw_string_ostream errs(option_errors);
    const std::string overview = program + ": " +
                                 (program == "kiln" ? "a tile language for GPU kernels, embedded in C++"
                                                    : "kiln's command line over this program's kernels") +
                                 "\n\n  " + program + " <subcommand> --help   describes each subcommand\n";
    parsed = llvm::cl::ParseCommandLineOptions(argc, argv, overview, &errs);
    errs.flush();
    option_errors = (capture ? capture->finish() : std::string()) + option_errors;
  }
  if (!parsed)
    return report_option_errors(program, option_errors);
  if (!option_errors.empty()) // warnings of a successful parse
    llvm::errs() << option_errors;
  check_environment();
  for (const Command& c : cmds)
    if (*c.sub)
      return c.run(kernels);
  return print_error(program, "no subcommand given; expected one of: " + command_names(cmds) + see_help);
}

} // namespace

int kiln::tool_main(int argc, char** argv, const KernelRegistry& kernels) {
  const std::string program = program_name(argc, argv);
  cli::set_program_name(program);
  try {
    return run(program, argc, argv, kernels);
  } catch (const kiln::Error& e) {
    return print_error(program, e.what());
  } catch (const kiln::InternalError& e) {
    return print_error(program, std::string(e.what()) + " (please report this bug)");
  } catch (const std::bad_alloc&) {
    return print_error(program, "out of host memory");
  } catch (const std::exception& e) {
    return print_error(program, e.what());
  }
}
