#include "support/atomic_file.h"

#include <fmt/format.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace kiln {

std::string write_unique_temporary(const std::string& temp_model, std::string_view bytes,
                                   std::string* temp_path) {
  llvm::SmallString<256> temp;
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(temp_model, fd, temp))
    return fmt::format("cannot create a temporary file like {}: {}", temp_model, ec.message());
  std::string problem;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      problem = fmt::format("cannot write {}: {}", temp.str().str(), std::strerror(errno));
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && problem.empty())
    problem = fmt::format("cannot close {}: {}", temp.str().str(), std::strerror(errno));
  if (!problem.empty()) {
    llvm::sys::fs::remove(temp);
    return problem;
  }
  *temp_path = temp.str().str();
  return "";
}

std::string write_file_atomically(const std::string& dir, const std::string& path, std::string_view bytes,
                                  const std::string& temp_model) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return fmt::format("cannot create {}: {}", dir, ec.message());
  std::string temp;
  if (std::string problem = write_unique_temporary(temp_model, bytes, &temp); !problem.empty())
    return problem;
  if (std::error_code ec = llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return fmt::format("cannot rename {} to {}: {}", temp, path, ec.message());
  }
  return "";
}

} // namespace kiln
