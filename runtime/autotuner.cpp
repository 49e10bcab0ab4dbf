// The autotuner: mode handling, parallel pruning and compiling, serial timing, the pick and its memory.
#include "runtime/autotuner.h"

#include "support/env.h"
#include "support/error.h"
#include "support/median.h"

#include <llvm/Support/ThreadPool.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

namespace kiln::rt {

namespace {

constexpr AutotuneMode kAllModes[] = {AutotuneMode::Off, AutotuneMode::Cached, AutotuneMode::On,
                                      AutotuneMode::Force};

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// "0.41 ms", "0.0123 ms", "12.3 ms", "250 ms": three significant digits.
std::string progress_ms(double ms) {
  return ms >= 100 ? fmt::format("{:.0f} ms", ms) : fmt::format("{:.3g} ms", ms);
}

// Runs work(i) for every i in [0, n) on a pool; work must not throw.
void parallel_for(size_t n, unsigned threads, const std::function<void(size_t)>& work) {
  if (n == 0)
    return;
  llvm::ThreadPool pool(llvm::hardware_concurrency(threads));
  for (size_t i = 0; i < n; ++i)
    pool.async([&work, i] { work(i); });
  pool.wait();
}

// The finalists' order in round `round` of their timing again, given their first pass's order a b c d e f: round
// 0 runs it backwards (f e d c b a, so the last timed goes first), odd rounds deal its two halves in turn
// (a d b e c f) and even ones run that backwards (f c e b d a). With three finalists or more, over the first pass
// and three rounds each follows three or four different kernels (itself, where a round turns), so a kernel timed
// slow right after a heavier one (worklog §98; likely the clocks the heavier kernel's power left, not recovered
// within a few warm-up launches) is one sample of four, not half of its score.
std::vector<size_t> finalist_round_order(const std::vector<size_t>& first_pass, int round) {
  std::vector<size_t> order;
  if (round == 0) {
    order.assign(first_pass.rbegin(), first_pass.rend());
    return order;
  }
  const size_t half = (first_pass.size() + 1) / 2;
  for (size_t k = 0; k < half; ++k) {
    order.push_back(first_pass[k]);
    if (half + k < first_pass.size())
      order.push_back(first_pass[half + k]);
  }
  if (round % 2 == 0)
    std::reverse(order.begin(), order.end());
  return order;
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// Prints progress lines once a run has taken longer than a threshold; before that, lines wait, so that a
// quick run stays silent and a slow one still shows every candidate.
class Progress {
public:
  explicit Progress(const AutotunerOptions& o) : options_(o), start_(std::chrono::steady_clock::now()) {}
  void line(std::string text) {
    pending_.push_back(std::move(text));
    if (options_.progress_after_s < 0)
      return;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < options_.progress_after_s)
      return;
    for (const std::string& l : pending_) {
      if (options_.progress)
        options_.progress(l);
      else
        std::fprintf(stderr, "%s\n", l.c_str());
    }
    pending_.clear();
  }

private:
  const AutotunerOptions& options_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::string> pending_;
};

void check_request(const TuneRequest& r, const TuneHooks& hooks) {
  if (r.ids.empty())
    fail("autotune {}: the config space is empty", r.key.kernel);
  std::set<std::string> seen;
  for (const std::string& id : r.ids)
    if (!seen.insert(id).second)
      fail("autotune {}: config '{}' appears twice in the config space", r.key.kernel, id);
  if (!r.labels.empty() && r.labels.size() != r.ids.size())
    fail("autotune {}: {} labels for {} configs", r.key.kernel, r.labels.size(), r.ids.size());
  if (!hooks.compile || !hooks.time)
    throw InternalError("autotune " + r.key.kernel + ": compile and time hooks are required");
}

} // namespace

AutotuneMode parse_autotune_mode(std::string_view text) {
  for (AutotuneMode m : kAllModes)
    if (text == autotune_mode_name(m))
      return m;
  fail("KILN_AUTOTUNE='{}' is not a mode; expected one of: off, cached, on, force", text);
}

const char* autotune_mode_name(AutotuneMode mode) {
  switch (mode) {
  case AutotuneMode::Off:
    return "off";
  case AutotuneMode::Cached:
    return "cached";
  case AutotuneMode::On:
    return "on";
  case AutotuneMode::Force:
    return "force";
  }
  return "unknown";
}

AutotuneMode autotune_mode_from_env() {
  const std::optional<std::string> v = env_choice("KILN_AUTOTUNE", {"off", "cached", "on", "force"});
  return v ? parse_autotune_mode(*v) : AutotuneMode::On;
}

const char* tune_source_name(TuneSource source) {
  switch (source) {
  case TuneSource::Default:
    return "default";
  case TuneSource::Memory:
    return "memory";
  case TuneSource::Disk:
    return "disk";
  case TuneSource::Tuned:
    return "tuned";
  }
  return "unknown";
}

std::string format_tune_table(const std::vector<CandidateResult>& table, const std::string& best_id) {
  // The config column is as wide as the longest config (at least 60), so that the columns after it line up.
  size_t width = 60;
  for (const CandidateResult& r : table)
    width = std::max(width, r.id.size());
  std::string out = fmt::format("  {:<{}} {:>10} {:>8} {:>8} {:>5} {:>8}  {}\n", "config", width, "ms", "TFLOP/s",
                                "GB/s", "regs", "smem", "status");
  for (const CandidateResult& r : table) {
    std::string ms = std::isfinite(r.ms) ? fmt::format("{:.4f}", r.ms) : "inf";
    std::string tflops = r.tflops > 0 ? fmt::format("{:.1f}", r.tflops) : "-";
    std::string gbps = r.gbps > 0 ? fmt::format("{:.0f}", r.gbps) : "-";
    std::string status = candidate_status_name(r.status);
    if (!r.reason.empty())
      status += ": " + first_line(r.reason);
    out += fmt::format("{} {:<{}} {:>10} {:>8} {:>8} {:>5} {:>8}  {}\n", r.id == best_id ? "*" : " ", r.id, width,
                       ms, tflops, gbps, r.registers, r.shared_bytes, status);
  }
  return out;
}

Autotuner::Autotuner(std::string cache_dir, AutotunerOptions options)
    : cache_(std::move(cache_dir)), options_(std::move(options)) {}

TuneResult Autotuner::tune(const TuneRequest& request, const TuneHooks& hooks) {
  check_request(request, hooks);
  const AutotuneMode mode = request.mode ? *request.mode : autotune_mode_from_env();
  TuningKey key = request.key;
  key.space_hash = config_space_hash(request.ids);

  TuneResult result;
  result.key = key;
  if (mode == AutotuneMode::Off)
    return result;
  if (mode != AutotuneMode::Force) {
    const TuningCacheStats before = cache_.stats();
    if (std::optional<TuningRecord> record = cache_.find(key)) {
      for (size_t i = 0; i < request.ids.size(); ++i)
        if (request.ids[i] == record->best_id) {
          result.best = i;
          result.best_ms = record->best_ms;
          result.table = std::move(record->table);
          result.source =
              cache_.stats().memory_hits > before.memory_hits ? TuneSource::Memory : TuneSource::Disk;
          return result;
        }
      // The space hash matched, so the winner is in the space; reaching here means a hash collision.
    }
    if (mode == AutotuneMode::Cached)
      return result;
  }
  return run(request, key, hooks);
}

TuneResult Autotuner::run(const TuneRequest& request, const TuningKey& key, const TuneHooks& hooks) {
  const size_t n = request.ids.size();
  auto label = [&](size_t i) { return request.labels.empty() ? request.ids[i] : request.labels[i]; };
  Progress progress(options_);

  std::vector<CandidateResult> table(n);
  for (size_t i = 0; i < n; ++i)
    table[i].id = request.ids[i];

  // 1. Prune, before any compile. A prune hook that throws leaves the candidate to fail at compile time.
  if (hooks.prune) {
    parallel_for(n, options_.threads, [&](size_t i) {
      try {
        std::string reason = hooks.prune(i);
        if (!reason.empty()) {
          table[i].status = CandidateStatus::Pruned;
          table[i].reason = std::move(reason);
        }
      } catch (...) {
      }
    });
  }
  std::vector<size_t> alive;
  for (size_t i = 0; i < n; ++i)
    if (table[i].status != CandidateStatus::Pruned)
      alive.push_back(i);
  if (alive.empty()) {
    std::string list;
    for (const CandidateResult& r : table)
      list += fmt::format("\n  {}: {}", r.id, r.reason);
    fail("autotune {}: every config was pruned, none is left to run; the configs and why each fell:{}",
         key.str(), list);
  }

  // 2. Compile the survivors in parallel.
  std::vector<char> compiled(n, 0);
  parallel_for(alive.size(), options_.threads, [&](size_t k) {
    const size_t i = alive[k];
    CandidateResult& r = table[i];
    try {
      CompileOutcome c = hooks.compile(i);
      r.registers = c.registers;
      r.shared_bytes = c.shared_bytes;
      if (c.error.empty()) {
        compiled[i] = 1;
        return;
      }
      r.reason = std::move(c.error);
    } catch (...) {
      r.reason = what_of(std::current_exception());
    }
    r.status = CandidateStatus::CompileFailed;
  });

  // 3. Time one at a time: concurrent kernels would disturb each other's timings.
  auto record_time = [&](CandidateResult& r, double ms, int samples) {
    r.status = CandidateStatus::Ok;
    r.ms = ms;
    r.samples = samples;
    r.tflops = request.flops > 0 && ms > 0 ? request.flops / (ms * 1e-3) / 1e12 : 0;
    r.gbps = request.bytes > 0 && ms > 0 ? request.bytes / (ms * 1e-3) / 1e9 : 0;
  };
  std::optional<size_t> best;
  for (size_t k = 0; k < alive.size(); ++k) {
    const size_t i = alive[k];
    CandidateResult& r = table[i];
    if (compiled[i]) {
      TimeOutcome t = hooks.time(i);
      if (t.failure.empty() && std::isfinite(t.ms) && t.ms >= 0) {
        record_time(r, t.ms, 1);
        if (!best || r.ms < table[*best].ms)
          best = i;
      } else {
        r.status = CandidateStatus::LaunchFailed;
        r.reason = t.failure.empty() ? fmt::format("the timer returned {} ms", t.ms) : t.failure;
      }
    }
    std::string outcome = r.status == CandidateStatus::Ok
                              ? progress_ms(r.ms)
                              : fmt::format("{}: {}", candidate_status_name(r.status), first_line(r.reason));
    progress.line(
        fmt::format("tuning {} [{}/{}] {}  {}", key.kernel, k + 1, alive.size(), label(i), outcome));
  }
  if (!best)
    fail("autotune {}: no config ran; every one was pruned or failed:\n{}", key.str(),
         format_tune_table(table));

  // 4. The finalists again, in `finalist_rounds` rounds whose orders differ (finalist_round_order); each scores the
  // median of its times, the first pass's included. A drift of the GPU's speed over the run reaches every finalist
  // alike, and one slow sample (a kernel timed right after a heavier one) does not decide a median.
  std::vector<size_t> finalists;
  for (size_t i : alive)
    if (table[i].status == CandidateStatus::Ok && table[i].ms <= table[*best].ms * (1 + options_.finalist_margin))
      finalists.push_back(i);
  std::stable_sort(finalists.begin(), finalists.end(), [&](size_t a, size_t b) { return table[a].ms < table[b].ms; });
  if (finalists.size() > static_cast<size_t>(std::max(options_.finalists, 0)))
    finalists.resize(static_cast<size_t>(std::max(options_.finalists, 0)));
  if (finalists.size() >= 2 && options_.finalist_rounds >= 1) {
    std::sort(finalists.begin(), finalists.end()); // alive is in index order: the first pass's order
    std::map<size_t, std::vector<double>> times;
    for (size_t i : finalists)
      times[i].push_back(table[i].ms);
    const size_t m = finalists.size();
    const int rounds = options_.finalist_rounds;
    for (int round = 0; round < rounds; ++round) {
      const std::vector<size_t> order = finalist_round_order(finalists, round);
      for (size_t k = 0; k < m; ++k) {
        const size_t i = order[k];
        TimeOutcome t = hooks.time(i);
        if (t.failure.empty() && std::isfinite(t.ms) && t.ms >= 0) // else this round adds no time for it
          times[i].push_back(t.ms);
        progress.line(fmt::format("tuning {} again [{}/{}] {}  {}", key.kernel, round * m + k + 1, rounds * m,
                                  label(i), t.failure.empty() ? progress_ms(t.ms) : "failed: " + first_line(t.failure)));
      }
    }
    best = finalists.front();
    for (size_t i : finalists) {
      record_time(table[i], median(times[i]), static_cast<int>(times[i].size()));
      if (table[i].ms < table[*best].ms) // ties keep the earlier config of the space
        best = i;
    }
  }

  TuneResult result;
  result.best = best;
  result.best_ms = table[*best].ms;
  result.source = TuneSource::Tuned;
  result.key = key;
  result.table = table;
  cache_.store(key, TuningRecord{table[*best].id, table[*best].ms, std::move(table)});
  return result;
}

} // namespace kiln::rt
