#include "tools/cuda_tools.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>

#include <cstdlib>

namespace kiln::cli {

std::string find_cuda_tool(const std::string& name) {
  if (auto p = llvm::sys::findProgramByName(name))
    return *p;
  llvm::SmallVector<llvm::StringRef, 2> extra;
  const char* home = std::getenv("CUDA_HOME");
  std::string cuda_home = home ? std::string(home) + "/bin" : "";
  if (!cuda_home.empty())
    extra.push_back(cuda_home);
  extra.push_back("/usr/local/cuda/bin");
  if (auto p = llvm::sys::findProgramByName(name, extra))
    return *p;
  return "";
}

ToolOutput run_cuda_tool(const std::string& tool, const std::vector<std::string>& args, unsigned timeout_s) {
  ToolOutput out;
  llvm::SmallString<128> log;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("kiln-tool", "log", log)) {
    out.error = "cannot create a temporary file: " + ec.message();
    return out;
  }
  std::vector<llvm::StringRef> argv = {tool};
  for (const std::string& a : args)
    argv.push_back(a);
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(log), llvm::StringRef(log)};
  out.rc = llvm::sys::ExecuteAndWait(tool, argv, llvm::None, redirects, timeout_s, 0, &out.error);
  if (auto text = llvm::MemoryBuffer::getFile(log))
    out.output = (*text)->getBuffer().str();
  llvm::sys::fs::remove(log);
  return out;
}

} // namespace kiln::cli
