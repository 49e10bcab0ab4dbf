#include "support/regular_file.h"

#include "support/error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {

std::string file_kind_name(unsigned mode) {
  switch (mode & S_IFMT) {
  case S_IFREG:
    return "a regular file";
  case S_IFDIR:
    return "a directory";
  case S_IFIFO:
    return "a FIFO";
  case S_IFCHR:
    return "a character device";
  case S_IFBLK:
    return "a block device";
  case S_IFSOCK:
    return "a socket";
  case S_IFLNK:
    return "a symbolic link";
  default:
    return "not a file kiln knows";
  }
}

namespace {

[[noreturn]] void not_regular(const std::string& path, unsigned mode) {
  fail("cannot read '{}': it is {}, not a regular file", path, file_kind_name(mode));
}

} // namespace

RegularFile::RegularFile(const std::string& path, Symlinks symlinks) : path_(path) {
  struct stat st {};
  // stat first: a FIFO must never be opened (open blocks until a writer comes), nor a device.
  const int r = symlinks == Symlinks::Follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  if (r != 0)
    fail("cannot read '{}': {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    not_regular(path, st.st_mode);
  const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (symlinks == Symlinks::Refuse ? O_NOFOLLOW : 0);
  do
    fd_ = ::open(path.c_str(), flags);
  while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0)
    fail("cannot read '{}': {}", path, std::strerror(errno));
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) { // replaced between the stat and the open
    ::close(fd_);
    not_regular(path, st.st_mode);
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string RegularFile::read(uint64_t offset, uint64_t length) const {
  std::string out(length, '\0');
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_, out.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      fail("cannot read '{}': {}", path_, std::strerror(errno));
    if (n == 0)
      fail("cannot read '{}': it ended at byte {} while {} bytes from byte {} were read (did it change while "
           "kiln read it?)",
           path_, offset + done, length, offset);
    done += static_cast<uint64_t>(n);
  }
  return out;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, Symlinks symlinks,
                              std::string_view what) {
  RegularFile file(path, symlinks);
  if (file.size() > max_bytes)
    fail("'{}' holds {} bytes, more than the {} bytes kiln reads from {}", path, file.size(), max_bytes,
         what);
  return file.read(0, file.size());
}

} // namespace kiln
