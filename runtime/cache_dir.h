// The files of kiln's on-disk caches (<root>/compile, <root>/tune), read without trusting them: entries are
// listed without following symbolic links and read only when they are regular files of bounded size, so
// that a FIFO cannot hang kiln nor a link to /dev/zero exhaust its memory. A cache directory that exists but
// cannot be listed (a regular file, no permission) is a kiln::Error naming it and KILN_CACHE_DIR.
#pragma once

#include <llvm/Support/FileSystem.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rt {

struct CacheFile {
  std::string path;
  llvm::sys::fs::file_type type =
      llvm::sys::fs::file_type::status_error; // of the entry itself, not a link's target
  uint64_t size_bytes = 0;
  double age_seconds = 0;
};

// Every entry of `dir`; {} when it does not exist (nothing was cached yet).
std::vector<CacheFile> list_cache_dir(const std::string& dir);

// The bytes of the cache file at `path`; nullopt when there is none. A kiln::Error naming it when it is not
// a regular file (a link, a FIFO, a device: never opened) or holds more than `max_bytes`.
std::optional<std::string> read_cache_file(const std::string& path, uint64_t max_bytes);

// Removes the cache file at `path`, whatever it is (a FIFO too; llvm::sys::fs::remove refuses those), without
// following a link. True when it was removed.
bool remove_cache_file(const std::string& path);

} // namespace kiln::rt
