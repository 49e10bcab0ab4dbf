// Measurements that need a fresh process (a cold compile, a warm start from the disk cache, a tuning run
// or a cached start with nothing in memory) run kiln_bench itself as a child: `kiln_bench --probe=NAME
// --probe-dir=DIR --probe-out=FILE ...` does one thing, timed from inside, and writes one JSON object to
// FILE. This file owns both ends: starting the child (with its environment) and reading its answer, and the
// probe side's options and output. Scratch directories for the children's caches live here too.
#pragma once

#include "support/median.h"

#include <llvm/Support/JSON.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::bench {

// What a probe process was asked (kiln_bench's --probe* options).
struct ProbeArgs {
  std::string name; // --probe
  std::string dir;  // --probe-dir: the cache root to use
  std::string out;  // --probe-out: where to write the result
  std::string mode; // --probe-mode: the autotune mode of a tune probe ("force", "cached")
  std::string arch; // --arch: compile for this target without a GPU ("" = the device's, loaded)
  uint64_t seed = 0;
};

// The probe side: runs `body` and writes what it returns to a.out (atomically), or {"error": why} when it
// throws; returns the process's exit status (0, or 1 after an error).
int answer_probe(const ProbeArgs& a, const std::function<llvm::json::Object()>& body);

// The path of this executable, from argv[0] (set once in main).
void set_self_executable(const char* argv0);
const std::string& self_executable();

struct ProbeRequest {
  std::string name;              // "compile", "tune"
  std::string dir;               // the cache root the child uses (KILN_CACHE_DIR too)
  std::vector<std::string> args; // further options, e.g. "--probe-mode=cached"
  unsigned timeout_s = 300;
};

// Runs the probe in a child process with KILN_CACHE_DIR=dir, CUDA_CACHE_DISABLE=1 (the driver's own JIT
// cache must not serve NVRTC's compiles, or a "cold" compile is not cold) and KILN_DUMP_DIR unset (dumps
// would be timed too). Returns the child's JSON object; a kiln::Error naming the probe, the exit status
// and the child's error when it fails, times out, or writes no valid JSON.
llvm::json::Object run_probe(const ProbeRequest& request);

// Milliseconds since `start` on the steady clock.
double ms_since(std::chrono::steady_clock::time_point start);

// A fresh directory under the system's temporary directory, removed with everything in it when the
// object dies.
class ScratchDir {
public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

// Reading a child's JSON: a number (a kiln::Error naming the field and the probe when it is absent).
double json_number(const llvm::json::Object& o, const std::string& field, const std::string& probe);
std::string json_string(const llvm::json::Object& o, const std::string& field, const std::string& probe);

using kiln::median;

} // namespace kiln::bench
