// Helpers the kiln subcommands share (see cli.h).
#include "tools/cli.h"

#include "dsl/interpreter.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "support/error.h"
#include "support/output_set.h"

#include <llvm/ADT/StringRef.h>

namespace kiln::cli {

llvm::cl::OptionCategory& kiln_category() {
  static llvm::cl::OptionCategory category("kiln options");
  return category;
}

namespace {
std::string& program_name_storage() {
  static std::string name = "kiln";
  return name;
}
} // namespace

const std::string& program_name() { return program_name_storage(); }
void set_program_name(const std::string& name) { program_name_storage() = name; }

void write_output(const OutputPath& output, const std::string& text) {
  if (output.path.empty()) {
    llvm::outs() << text;
    llvm::outs().flush();
    return;
  }
  write_output_file(output, text);
}

std::map<std::string, int64_t> parse_assignments(const std::vector<std::string>& items, const char* flag) {
  std::map<std::string, int64_t> out;
  for (const std::string& item : items) {
    llvm::SmallVector<llvm::StringRef, 8> parts;
    llvm::StringRef(item).split(parts, ',', -1, /*KeepEmpty=*/false);
    if (parts.empty())
      fail("{} expects NAME=VALUE, got an empty value", flag);
    for (llvm::StringRef part : parts) {
      auto [name, value] = part.trim().split('=');
      long long v = 0;
      if (name.empty() || !part.contains('=') || value.trim().getAsInteger(10, v))
        fail("{} expects NAME=VALUE with a base-10 integer VALUE (e.g. {} BLOCK_M=64), got '{}'", flag, flag,
             part.str());
      out[name.trim().str()] = static_cast<int64_t>(v);
    }
  }
  return out;
}

void require_gpu(const std::string& what) {
  std::string why;
  if (!rt::driver_available(&why)) {
    if (!llvm::StringRef(why).startswith("no CUDA driver found"))
      why = "no CUDA driver found: " + why;
    fail("{}; {}", why, what);
  }
  if (rt::device_count() == 0)
    fail("no CUDA driver found: the driver loaded but reports no CUDA device; {}", what);
}

Executor choose_executor(bool interpret_flag) {
  if (interpret_requested() || interpret_flag) // KILN_INTERPRET is checked even when the flag is given
    return Executor::Interpreter;
  require_gpu("running on the GPU needs one; add --interpret (or set KILN_INTERPRET=1) to run in the CPU "
              "interpreter instead");
  return Executor::Gpu;
}

std::string default_arch() {
  if (rt::driver_available() && rt::device_count() > 0)
    return rt::current_device().arch;
  return "sm_90a";
}

std::string human_bytes(double b) {
  if (b >= 1e9)
    return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6)
    return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3)
    return fmt::format("{:.2f} KB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

std::string human_seconds(double s) {
  if (s >= 1)
    return fmt::format("{:.3f} s", s);
  if (s >= 1e-3)
    return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.2f} us", s * 1e6);
}

} // namespace kiln::cli
