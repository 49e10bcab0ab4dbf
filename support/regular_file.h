// Reading files that kiln did not write (.npy inputs, cache entries) only when they are regular files: a FIFO
// would block forever, /dev/zero never ends, a directory is no data. Such paths are refused after a stat,
// before they are opened, and the opened file is checked again (it may have been swapped in between). Every
// read is bounded: by a cap given by the caller, or by a size the caller derived from the file's header.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

// How a path that is a symbolic link is read: through to its target (user inputs, as cp reads them), or
// refused (entries of kiln's own caches, which kiln never writes as links).
enum class Symlinks { Follow, Refuse };

// What a stat mode is, for messages: "a regular file", "a directory", "a FIFO", "a character device", ...
std::string file_kind_name(unsigned mode);

// A regular file open for reading. Every failure is a kiln::Error naming the path.
class RegularFile {
public:
  // Refuses a missing path, one that is not a regular file (naming what it is) and, with Symlinks::Refuse,
  // a symbolic link.
  RegularFile(const std::string& path, Symlinks symlinks);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; } // when it was opened

  // Exactly `length` bytes from `offset`; a kiln::Error when the file ends sooner (it shrank while open).
  std::string read(uint64_t offset, uint64_t length) const;

private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of `path` when it is a regular file of at most `max_bytes`; otherwise a kiln::Error naming the
// path, its size and the cap, which `what` describes ("a compile cache entry").
std::string read_regular_file(const std::string& path, uint64_t max_bytes, Symlinks symlinks,
                              std::string_view what);

} // namespace kiln
