// Writing kernel artifacts to KILN_DUMP_DIR.
#include "runtime/dump.h"

#include "support/error.h"
#include "support/hash.h"
#include "support/output_set.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

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
  OutputSet set; // a kernel's artifacts appear together or not at all
  for (const auto& [ext, content] : artifacts) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, stem + "." + ext);
    set.stage({"KILN_DUMP_DIR", path.str().str()}, content);
  }
  return set.commit();
}

std::vector<std::string> dump_artifacts(std::string_view kernel_name,
                                        const std::map<std::string, std::string>& artifacts) {
  std::string dir = dump_dir_from_env();
  if (dir.empty())
    return {};
  return dump_artifacts_to(dir, kernel_name, artifacts);
}

} // namespace kiln::rt
