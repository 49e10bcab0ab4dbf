// The compile cache: compiled kernels kept in memory and on disk, content-addressed by a hash of the source,
// NVRTC options, arch, NVRTC version and kiln version. Disk entries are written to a unique temporary file
// and renamed into place, so concurrent processes never see half an entry; an entry that is not a regular
// file, or fails its size cap, magic, length or checksum test, is treated as a miss, recompiled and
// rewritten, never trusted.
#pragma once

#include "runtime/compiler.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

struct CacheStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;           // compiles
  uint64_t corrupt_entries = 0;  // disk entries rejected (and then rewritten)
  uint64_t write_failures = 0;   // entries that could not be written (the compile still succeeds)
};

struct CacheEntryInfo {
  std::string path;
  std::string key;
  std::string kernel_name;  // empty when the entry is corrupt
  std::string arch;
  uint64_t size_bytes = 0;
  double age_seconds = 0;
  bool valid = false;
  std::string problem;  // why the entry is not valid
};

class CompileCache {
public:
  // dir: the cache root (entries go under <dir>/compile); "" keeps the cache in memory only.
  explicit CompileCache(std::string dir);

  // KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln; "" when none of them is set.
  static std::string default_dir();

  // The compiled kernel for req: from memory, from disk, or compiled now (and stored in both).
  // With KILN_DUMP_DIR set, PTX is always produced and all artifacts are dumped.
  CompiledKernel get(const CompileRequest& req);

  std::string key_for(const CompileRequest& req) const;  // loads NVRTC (its version is part of the key)
  std::string entry_path(std::string_view key) const;    // "" for a memory-only cache
  const std::string& dir() const { return dir_; }

  void clear_memory();  // forget in-memory entries, as a new process would start
  // Every disk entry, valid or not (an entry that is not a regular file is listed, never opened). Both throw
  // a kiln::Error when the cache directory exists but cannot be listed (runtime/cache_dir.h).
  std::vector<CacheEntryInfo> list() const;
  size_t clear();  // removes every disk entry (and stale temporaries) and the in-memory map; returns files removed

  CacheStats stats() const;
  void reset_stats();

private:
  std::optional<CompiledKernel> read_disk(const std::string& key);
  void write_disk(const std::string& key, const CompiledKernel& kernel);

  std::string dir_;
  mutable std::mutex mutex_;
  std::map<std::string, CompiledKernel> memory_;
  CacheStats stats_;
  bool warned_write_failure_ = false;
};

// The entry file format, exposed for tests and `kiln cache`.
std::string serialize_cache_entry(std::string_view key, const CompiledKernel& kernel);
// nullopt (with *problem saying why) when bytes are not a valid entry for expected_key ("" accepts any key).
std::optional<CompiledKernel> parse_cache_entry(std::string_view bytes, std::string_view expected_key,
                                                std::string* problem = nullptr);

// The process-wide cache over CompileCache::default_dir(), created on first use.
CompileCache& default_compile_cache();

// What everyone else calls: default_compile_cache().get(req).
CompiledKernel compile_cached(const CompileRequest& req);

} // namespace kiln::rt
