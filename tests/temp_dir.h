// A temporary directory for a test, removed with everything in it when the test ends.
#pragma once

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>

#include <stdexcept>
#include <string>

namespace kiln::testing_support {

class TempDir {
public:
  explicit TempDir(const char* prefix = "kiln-test") {
    llvm::SmallString<128> p;
    if (llvm::sys::fs::createUniqueDirectory(prefix, p))
      throw std::runtime_error("cannot create a temporary directory");
    path_ = p.str().str();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

} // namespace kiln::testing_support
