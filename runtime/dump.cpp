// Writing kernel artifacts to KILN_DUMP_DIR.
#include "runtime/dump.h"

#include "support/error.h"
#include "support/hash.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <cctype>
#include <cstdlib>

namespace kiln::rt {

std::string dump_dir_from_env() {
  const char* dir = std::getenv("KILN_DUMP_DIR");
  return dir ? dir : "";
}

std::string dump_stem(std::string_view kernel_name, const std::map<std::string, std::string>& artifacts) {
  std::string hash;
  if (auto cu = artifacts.find("cu"); cu != artifacts.end()) {
    hash = sha256_hex(cu->second);
  } else {
    HashBuilder h;
    for (const auto& [ext, content] : artifacts)
      h.add(ext).add(content);
    hash = h.hex();
  }
  std::string stem;
  for (char c : kernel_name)
    stem.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '_');
  if (stem.empty())
    stem = "kernel";
  return stem + "-" + hash.substr(0, 8);
}

std::vector<std::string> dump_artifacts_to(const std::string& dir, std::string_view kernel_name,
                                           const std::map<std::string, std::string>& artifacts) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    fail("cannot create dump directory '{}' (KILN_DUMP_DIR): {}", dir, ec.message());
  std::string stem = dump_stem(kernel_name, artifacts);
  std::vector<std::string> written;
  for (const auto& [ext, content] : artifacts) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, stem + "." + ext);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
    if (ec)
      fail("cannot write dump file '{}': {}", path.str().str(), ec.message());
    os << content;
    os.close();
    if (os.has_error()) {
      std::string why = os.error().message();
      os.clear_error();  // an uncleared stream error aborts in raw_fd_ostream's destructor
      fail("cannot write dump file '{}': {}", path.str().str(), why);
    }
    written.push_back(path.str().str());
  }
  return written;
}

std::vector<std::string> dump_artifacts(std::string_view kernel_name,
                                        const std::map<std::string, std::string>& artifacts) {
  std::string dir = dump_dir_from_env();
  if (dir.empty())
    return {};
  return dump_artifacts_to(dir, kernel_name, artifacts);
}

} // namespace kiln::rt
