#include "runtime/cache_dir.h"

#include "support/error.h"
#include "support/regular_file.h"

#include <llvm/Support/Path.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::rt {

namespace {

constexpr const char* kChooseAnother = "set KILN_CACHE_DIR to a directory kiln can read and write";

// `dir` cannot be reached because a path above it is not a directory: name that one.
[[noreturn]] void blocked_by_a_file(const std::string& dir) {
  std::string p = dir;
  struct stat st {};
  while (!p.empty() && ::stat(p.c_str(), &st) != 0)
    p = llvm::sys::path::parent_path(p).str();
  fail("cannot list the cache directory '{}': '{}' is {}, not a directory; {}", dir, p.empty() ? dir : p,
       p.empty() ? "missing" : file_kind_name(st.st_mode), kChooseAnother);
}

} // namespace

std::vector<CacheFile> list_cache_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return {};
    if (errno == ENOTDIR)
      blocked_by_a_file(dir);
    fail("cannot list the cache directory '{}': {}; {}", dir, std::strerror(errno), kChooseAnother);
  }
  if (!S_ISDIR(st.st_mode))
    fail("cannot list the cache directory '{}': it is {}, not a directory; {}", dir,
         file_kind_name(st.st_mode), kChooseAnother);
  std::vector<CacheFile> out;
  const auto now = std::chrono::system_clock::now();
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec, /*follow_symlinks=*/false), end; it != end && !ec;
       it.increment(ec)) {
    CacheFile f;
    f.path = it->path();
    llvm::sys::fs::file_status status;
    if (!llvm::sys::fs::status(f.path, status, /*Follow=*/false)) {
      f.type = status.type();
      f.size_bytes = status.getSize();
      f.age_seconds = std::chrono::duration<double>(now - status.getLastModificationTime()).count();
    }
    out.push_back(std::move(f));
  }
  if (ec)
    fail("cannot list the cache directory '{}': {}; {}", dir, ec.message(), kChooseAnother);
  return out;
}

std::optional<std::string> read_cache_file(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT)
    return std::nullopt;
  return read_regular_file(path, max_bytes, Symlinks::Refuse, "a cache entry");
}

bool remove_cache_file(const std::string& path) { return ::unlink(path.c_str()) == 0; }

} // namespace kiln::rt
