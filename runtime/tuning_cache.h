// Autotune results remembered in memory and on disk: one JSON file per tuning key under <dir>/tune, beside
// the compile cache. A key is the kernel, its tuning key text (bucketed sizes, dtypes, flags), the arch, the
// device name, kiln's version, the hash of the build's code generator (kiln::code_generator_hash: a changed code
// generator makes other code, whose best tile may differ) and a hash of the config space, so that a changed space
// re-tunes. Files are
// written to a unique temporary name and renamed into place (concurrent processes never see half a file); a
// file that is not a regular file, is too large, does not parse, or parses to another key, is ignored with a
// warning on stderr and rewritten by the next store. Knows nothing of kernels or codegen: configs are opaque
// string ids.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

enum class CandidateStatus : uint8_t {
  Ok,            // timed
  Pruned,        // rejected before compiling (reason says why)
  CompileFailed, // code generation or NVRTC failed
  LaunchFailed,  // loading or launching failed, e.g. out of resources
  NotRun,        // never reached
};
const char* candidate_status_name(CandidateStatus s); // "ok", "pruned", "compile-failed", ...

// One row of a tuning run's result table.
struct CandidateResult {
  std::string id; // the config's stable text (Config::str() for kiln kernels)
  CandidateStatus status = CandidateStatus::NotRun;
  std::string reason;                                  // why it was pruned or failed; "" when Ok
  double ms = std::numeric_limits<double>::infinity(); // median time; +inf unless Ok
  double tflops = 0;                                   // 0 when the caller gave no FLOP count
  int registers = -1;                                  // per thread; -1 when unknown
  int64_t shared_bytes = -1;                           // per block; -1 when unknown
  double gbps = 0;                                     // 0 when the caller gave no byte count
  // The timings behind ms: 1, the first pass alone; more for a finalist timed again, whose ms is their median, so
  // that a candidate timed once may show a lower ms than the winner's median. 0 unless Ok.
  int samples = 0;
};

// What one tuning result is remembered under.
struct TuningKey {
  std::string kernel; // "fa2_fwd"
  std::string key;    // bucketed sizes + problem-fixed params, e.g. "N_Q=1024 N_K=1024 | CAUSAL=0 DTYPE=0"
  std::string arch;   // "sm_90a"
  std::string device; // the device's name
  std::string space_hash; // config_space_hash() of the candidate ids

  // SHA-256 of every field above plus kiln's version and code_generator_hash(): the file name and the in-memory
  // map key. (A record's file also holds both, the version checked on reading, the code generator's hash for
  // reading only: the file name already differs.)
  std::string hash() const;
  std::string str() const; // "fa2_fwd [N_Q=1024 ...] on sm_90a (NVIDIA H100)"
};

// A hash of a config space that ignores the candidates' order.
std::string config_space_hash(const std::vector<std::string>& ids);

// A remembered tuning run: the winner and the full table.
struct TuningRecord {
  std::string best_id;
  double best_ms = 0;
  std::vector<CandidateResult> table;
};

struct TuningCacheStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;
  uint64_t corrupt_files = 0;  // files ignored (they are rewritten by the next store)
  uint64_t writes = 0;         // files written
  uint64_t write_failures = 0; // files that could not be written (the result is still kept in memory)
};

// An autotune result file, as `kiln cache list` shows it.
struct TuningFileInfo {
  std::string path;
  std::string kernel; // the kernel it names; "" when it cannot be read
  uint64_t size_bytes = 0;
  double age_seconds = 0;
  std::string problem; // why it cannot be read
  // Written by this build (kiln's version and code_generator_hash() as the file records them): only such files
  // can be found, since a key's file name holds both. Others are another build's, readable by it alone.
  bool this_build = false;
};

class TuningCache {
public:
  // dir: the cache root (files go under <dir>/tune); "" keeps results in memory only.
  explicit TuningCache(std::string dir);

  // The remembered record for key: from memory, else from its file; nullopt on a miss or a corrupt file.
  std::optional<TuningRecord> find(const TuningKey& key);
  // Remembers record in memory and (atomically) on disk.
  void store(const TuningKey& key, const TuningRecord& record);

  std::string file_path(const TuningKey& key) const; // "" for a memory-only cache
  const std::string& dir() const { return dir_; }
  void clear_memory(); // forget in-memory records, as a new process would start
  // Every result file on disk (one that is not a regular file is listed, never opened), and removing them
  // (with the in-memory records; returns files removed). Both throw a kiln::Error when the directory exists
  // but cannot be listed (runtime/cache_dir.h).
  std::vector<TuningFileInfo> list() const;
  size_t clear();
  // Removes the files this build cannot read (another build's, unreadable ones); returns how many.
  size_t prune();
  TuningCacheStats stats() const;

private:
  std::string dir_;
  mutable std::mutex mutex_;
  std::map<std::string, TuningRecord> memory_;
  TuningCacheStats stats_;
  bool warned_write_failure_ = false;
};

// The file format, exposed for tests.
std::string serialize_tuning_record(const TuningKey& key, const TuningRecord& record);
// nullopt (with *problem saying why) when text is not a valid record for `expected`.
std::optional<TuningRecord> parse_tuning_record(std::string_view text, const TuningKey& expected,
                                                std::string* problem = nullptr);

} // namespace kiln::rt
