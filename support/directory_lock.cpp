#include "support/directory_lock.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace kiln {

DirectoryLocks::DirectoryLocks(const std::vector<std::string>& dirs) {
  std::vector<std::string> real;
  for (const std::string& dir : dirs) {
    llvm::SmallString<256> r;
    real.push_back(llvm::sys::fs::real_path(dir, r) ? dir : r.str().str());
  }
  std::sort(real.begin(), real.end());
  real.erase(std::unique(real.begin(), real.end()), real.end());
  for (const std::string& dir : real) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      all_held_ = false;
      continue;
    }
    int r;
    do
      r = ::flock(fd, LOCK_EX);
    while (r != 0 && errno == EINTR);
    if (r != 0) {
      ::close(fd);
      all_held_ = false;
      continue;
    }
    fds_.push_back(fd);
  }
}

DirectoryLocks::~DirectoryLocks() {
  for (auto it = fds_.rbegin(); it != fds_.rend(); ++it)
    ::close(*it); // closing the only descriptor of the open file releases its flock
}

} // namespace kiln
