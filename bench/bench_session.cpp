#include "bench/bench_session.h"

#include "codegen/codegen.h"
#include "jit/compile_request.h"
#include "runtime/compile_cache.h"
#include "support/error.h"

#include <llvm/ADT/StringRef.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace kiln::bench {

const JitKernel& Session::kernel(const KernelDef& def, const Config& config, const CodegenOptions& codegen) {
  std::string id = def.name + " " + config.str() + " " + codegen.str();
  auto it = kernels_.find(id);
  if (it == kernels_.end())
    it = kernels_.emplace(id, JitKernel::compile(def.build(config), {}, codegen)).first;
  return *it->second;
}

void Session::precompile(const KernelDef& def, const Config& config, const CodegenOptions& codegen,
                         const std::string& arch) {
  GeneratedKernel g = generate_cuda(def.build(config), Target::parse(arch), codegen);
  const rt::CompileRequest req = compile_request(g, arch); // as the JIT compiles it
  (void)rt::compile_cached(req);
}

void Session::run_case(BenchCase& c) {
  CaseRecord& r = c.record;
  if (!c.run_self)
    r.config = c.config.str();
  const auto start = std::chrono::steady_clock::now();
  try {
    if (c.run_self) {
      c.run_self(*this, r);
    } else {
      const JitKernel& k = kernel(c.def, c.config, c.codegen);
      c.run(*this, k, r);
    }
    if (!r.check.ok && r.error.empty())
      r.error = "output does not match the reference; not timed";
  } catch (const Error& e) {
    r.error = e.what();
  } catch (const InternalError& e) {
    r.error = e.what();
  } catch (const std::exception& e) { // out of host memory, say: the other cases may still run
    r.error = e.what();
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Session::Launch Session::launch_for(const KernelDef& def, const Config& config, const JitKernel& k,
                                    const SizeArgs& sizes, const std::vector<LaunchArg>& args,
                                    const std::vector<OutputArg>& outputs, bool tunable, CaseRecord& r,
                                    const CodegenOptions& codegen) {
  Launch l;
  if (tunable && options_.tune) {
    TuneOptions t;
    t.mode = rt::AutotuneMode::On;
    t.flops = r.flops;
    t.bytes = r.bytes;
    t.codegen = codegen; // --switch-off applies to the tuned kernels too
    l.tuned = tuner_.select(def, config, sizes, args, outputs, t);
    l.kernel = l.tuned->kernel.get();
    l.grid = l.tuned->grid;
    r.config = l.tuned->config.str();
  } else {
    l.kernel = &k;
    l.grid = def.grid(config, sizes);
  }
  return l;
}

void Session::time(CaseRecord& r, const std::function<void(rt::Stream&)>& launch, bool flush_l2) {
  // One launch tells how many fit in the budget; slow kernels (FA1 at long sequences) get fewer reps.
  const double once = rt::time_kernel_ms(launch, rt::TimingOptions{0, 1, flush_l2});
  int reps = options_.reps;
  if (once > 0)
    reps =
        static_cast<int>(std::clamp(std::floor(options_.case_budget_ms / once), 3.0, double(options_.reps)));
  reps = std::min(reps, options_.reps);
  // A launch that alone takes a third of the budget is warm after one more.
  const int warmup = std::min(once > options_.case_budget_ms / 3 ? 1 : options_.warmup, reps);
  r.time_ms = rt::time_kernel_ms(launch, rt::TimingOptions{warmup, reps, flush_l2});
  r.reps = reps;
  r.warmup = warmup;
  r.l2_flushed = flush_l2;
}

std::map<std::string, int64_t> parse_overrides(const std::string& text, const std::string& option) {
  std::map<std::string, int64_t> out;
  llvm::SmallVector<llvm::StringRef, 8> items;
  llvm::StringRef(text).split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    auto [name, value] = item.trim().split('=');
    int64_t v = 0;
    if (name.empty() || value.trim().getAsInteger(10, v))
      fail("--{}: expected NAME=INTEGER items separated by commas, got '{}' in '{}'", option, item.str(),
           text);
    out[name.trim().str()] = v;
  }
  return out;
}

} // namespace kiln::bench
