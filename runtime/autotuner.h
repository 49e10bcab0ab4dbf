// The autotuner: picks the fastest of a list of candidate configs and remembers the pick. Generic: a
// candidate is an opaque string id, and the work is injected as three hooks (prune, compile, time), so that
// the same machinery tunes any kernel and unit tests run it without a GPU.
//
// One tuning run: prune every candidate (in parallel, before any compile; an Error listing every candidate
// and its reason when none is left) -> compile the survivors in parallel on an llvm::ThreadPool (one thread
// per hardware thread) -> time them one by one on the calling thread -> time the few within 10 % of the best
// again in three rounds of differing order, each scoring the median of its four times (a GPU's speed drifts
// during a run, warming up or throttling at its power limit, and a kernel timed right after a heavier one can run
// slow for a while: one pass favours one end of the list or one neighbour) -> the least time wins and is stored
// in the TuningCache. Compile and launch failures score +infinity with their reason kept in the table.
// KILN_AUTOTUNE (off | cached | on | force) says whether to tune at all. Once a run has taken a second, each
// timed candidate gets a line on stderr: "tuning fa2_fwd [7/24] BM=128 BN=64 w=8 s=3  0.41 ms" (k of the
// candidates left after pruning; a failure shows its status and reason instead of the time).
#pragma once

#include "runtime/tuning_cache.h"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

enum class AutotuneMode : uint8_t {
  Off,    // the kernel's default config; the cache is not read
  Cached, // a remembered result, else the default config; never tunes
  On,     // a remembered result, else tune now (the default)
  Force,  // tune now even when a result is remembered, and replace it
};
// "off", "cached", "on", "force"; anything else is a kiln::Error listing those.
AutotuneMode parse_autotune_mode(std::string_view text);
const char* autotune_mode_name(AutotuneMode mode);
// KILN_AUTOTUNE, parsed; On when unset or empty.
AutotuneMode autotune_mode_from_env();

// What compiling one candidate produced: an error (the candidate scores +inf), or its resource usage.
struct CompileOutcome {
  std::string error; // "" on success
  int registers = -1;
  int64_t shared_bytes = -1;
};

// What timing one candidate produced: a median time, or why it could not run (it scores +inf).
struct TimeOutcome {
  double ms = 0;
  std::string failure; // "" on success
};

// The work of a tuning run, by candidate index. Exceptions from prune/compile are caught and recorded as that
// candidate's compile failure; exceptions from time propagate (a broken device is not a slow candidate), so
// the time hook reports recoverable launch failures through TimeOutcome::failure.
struct TuneHooks {
  // Why candidate i cannot or need not run, or "". Runs on pool threads, concurrently: must be thread-safe.
  std::function<std::string(size_t)> prune;
  // Compiles candidate i. Runs on pool threads, concurrently: must be thread-safe.
  std::function<CompileOutcome(size_t)> compile;
  // Times compiled candidate i (warm-up, then a median of repeated runs). Runs on the calling thread.
  std::function<TimeOutcome(size_t)> time;
};

struct TuneRequest {
  TuningKey key;                    // key.space_hash is filled in from `ids`
  std::vector<std::string> ids;     // each candidate's stable text; their set is the config space
  std::vector<std::string> labels;  // short text for progress lines ("BM=128 BN=64 w=8 s=3"); empty: ids
  double flops = 0;                 // per launch, for TFLOP/s in the table; 0: not reported
  double bytes = 0;                 // per launch, for GB/s in the table; 0: not reported
  std::optional<AutotuneMode> mode; // nullopt: autotune_mode_from_env()
};

enum class TuneSource : uint8_t {
  Default, // no result: the caller uses its default config (mode off, or cached with nothing remembered)
  Memory,  // remembered in this process
  Disk,    // remembered in a file
  Tuned,   // tuned by this call
};
const char* tune_source_name(TuneSource source);

struct TuneResult {
  std::optional<size_t> best; // index into TuneRequest::ids; nullopt with TuneSource::Default
  double best_ms = 0;
  TuneSource source = TuneSource::Default;
  std::vector<CandidateResult> table; // every candidate (from the run that tuned them); empty for Default
  TuningKey key;                      // with space_hash filled in
};

// A human-readable table: config, time, TFLOP/s, GB/s ("-" where not reported), registers, shared bytes,
// status/reason; the best marked.
std::string format_tune_table(const std::vector<CandidateResult>& table, const std::string& best_id = {});

struct AutotunerOptions {
  unsigned threads = 0;          // compile threads; 0: one per hardware thread
  double progress_after_s = 1.0; // progress lines start once a run has taken this long; < 0: never
  // Where progress lines go; empty: stderr.
  std::function<void(const std::string&)> progress;
  // After the first pass, the candidates within finalist_margin of the best (at most `finalists`) are timed
  // again in `finalist_rounds` rounds, each scoring the median of its times (the first pass's included);
  // finalists 0 or 1, or no rounds: each candidate is timed once. Six finalists, not three: FA2's space holds many
  // tiles within a few % of each other, and a first pass timed the warp-specialised ones 4 % slower than their
  // second (worklog §78), so the fourth to sixth were never timed again. Three rounds, not one: a single reverse
  // pass timed a tile 4 % slow right after a heavier one and the mean of two times kept it (worklog §98).
  int finalists = 6;
  double finalist_margin = 0.10;
  int finalist_rounds = 3;
};

class Autotuner {
public:
  // cache_dir: the cache root (results under <cache_dir>/tune); "" remembers in memory only.
  explicit Autotuner(std::string cache_dir, AutotunerOptions options = {});

  // The best candidate of `request`, remembered or tuned as the mode says. Throws kiln::Error when the
  // request is malformed (no ids, duplicate ids, labels of the wrong count), when pruning leaves nothing
  // (listing every candidate and its reason), or when every survivor failed (listing the failures).
  TuneResult tune(const TuneRequest& request, const TuneHooks& hooks);

  TuningCache& cache() { return cache_; }

private:
  TuneResult run(const TuneRequest& request, const TuningKey& key, const TuneHooks& hooks);

  TuningCache cache_;
  AutotunerOptions options_;
};

} // namespace kiln::rt
