// A fake config space for the autotuner's unit tests: injected prune, compile and time hooks stand in for the
// code generator, NVRTC and events, with counters of how often each ran.
#pragma once

#include "runtime/autotuner.h"

#include <atomic>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::testing_support {

using kiln::rt::AutotuneMode;
using kiln::rt::AutotunerOptions;
using kiln::rt::CandidateResult;
using kiln::rt::CompileOutcome;
using kiln::rt::TimeOutcome;
using kiln::rt::TuneHooks;
using kiln::rt::TuneRequest;
using kiln::rt::TuneResult;
using kiln::rt::TuningKey;

// A fake config space: each id has a time, or fails to compile, or fails to launch, or is pruned.
struct FakeKernel {
  std::map<std::string, double> ms;
  std::map<std::string, std::string> prune_reason, compile_error, launch_error;
  std::vector<std::string> ids;
  std::atomic<int> compiles{0}, prunes{0}, timed{0};
  std::atomic<bool> compile_started{false}, pruned_after_compile{false};

  FakeKernel& add(const std::string& id, double t) {
    ids.push_back(id);
    ms[id] = t;
    return *this;
  }
  TuneHooks hooks() {
    TuneHooks h;
    h.prune = [this](size_t i) {
      ++prunes;
      if (compile_started)
        pruned_after_compile = true;
      auto it = prune_reason.find(ids[i]);
      return it == prune_reason.end() ? std::string() : it->second;
    };
    h.compile = [this](size_t i) {
      compile_started = true;
      ++compiles;
      auto it = compile_error.find(ids[i]);
      if (it != compile_error.end())
        return CompileOutcome{it->second, -1, -1};
      return CompileOutcome{"", 40 + static_cast<int>(i), 1024 * static_cast<int64_t>(i)};
    };
    h.time = [this](size_t i) {
      ++timed;
      auto it = launch_error.find(ids[i]);
      if (it != launch_error.end())
        return TimeOutcome{0, it->second};
      return TimeOutcome{ms.at(ids[i]), ""};
    };
    return h;
  }
  TuneRequest request(const std::string& key = "N=1024",
                      std::optional<AutotuneMode> mode = AutotuneMode::On) const {
    TuneRequest r;
    r.key = TuningKey{"fake", key, "sm_90a", "Fake GPU", ""};
    r.ids = ids;
    r.mode = mode;
    return r;
  }
};

inline FakeKernel& three_configs(FakeKernel& k) { return k.add("BM=64", 0.5).add("BM=128", 0.2).add("BM=256", 0.3); }

inline AutotunerOptions quiet() {
  AutotunerOptions o;
  o.progress_after_s = -1;
  return o;
}

inline const CandidateResult& row(const TuneResult& r, const std::string& id) {
  for (const CandidateResult& c : r.table)
    if (c.id == id)
      return c;
  throw std::runtime_error("no row " + id);
}

} // namespace kiln::testing_support
