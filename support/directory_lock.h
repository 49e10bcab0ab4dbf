// Advisory locks on directories, so that kiln processes committing files into the same directories do so
// one at a time: an exclusive flock(2) on each directory itself (no lock file is created, so none is left
// behind or raced over when removed). Other kiln processes honour it; other programs are not stopped by it.
// A reader that wants a consistent set of kiln's outputs can take the same lock while it reads.
#pragma once

#include <string>
#include <vector>

namespace kiln {

class DirectoryLocks {
public:
  // Waits for and takes an exclusive lock on every directory in `dirs` (each once, in sorted order of its
  // real path, so that processes locking overlapping sets cannot deadlock). A directory that cannot be
  // locked (one kiln cannot open, a file system without flock) is left unlocked: see all_held().
  explicit DirectoryLocks(const std::vector<std::string>& dirs);
  ~DirectoryLocks(); // releases every lock
  DirectoryLocks(const DirectoryLocks&) = delete;
  DirectoryLocks& operator=(const DirectoryLocks&) = delete;

  bool all_held() const { return all_held_; }

private:
  std::vector<int> fds_;
  bool all_held_ = true;
};

} // namespace kiln
