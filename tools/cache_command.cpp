// `kiln cache path|list|prune|clear`: where the compile cache and the autotune results live, what they hold
// (kernel, arch, size, age; which autotune results another build wrote), removing the autotune results this build
// cannot read, and clearing both.
#include "runtime/compile_cache.h"
#include "runtime/tuning_cache.h"
#include "support/error.h"
#include "tools/cli.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/Path.h>

namespace kiln::cli {
namespace {

namespace cl = llvm::cl;

cl::SubCommand cache_sub("cache", "Show (path, list), prune (another build's autotune results) or clear the compile and "
                                  "autotune caches");
cl::opt<std::string> action(cl::Positional, cl::Required, cl::desc("<path|list|prune|clear>"), cl::sub(cache_sub),
                            cl::cat(kiln_category()));
cl::opt<bool> json("json", cl::desc("Machine-readable output"), cl::sub(cache_sub), cl::cat(kiln_category()));

std::string tune_dir(const std::string& root) {
  llvm::SmallString<256> p(root);
  llvm::sys::path::append(p, "tune");
  return p.str().str();
}

std::string compile_dir(const std::string& root) {
  llvm::SmallString<256> p(root);
  llvm::sys::path::append(p, "compile");
  return p.str().str();
}

std::string age_text(double s) {
  if (s < 120)
    return fmt::format("{:.0f} s", s);
  if (s < 7200)
    return fmt::format("{:.0f} min", s / 60);
  if (s < 172800)
    return fmt::format("{:.0f} h", s / 3600);
  return fmt::format("{:.0f} days", s / 86400);
}

int run_cache(const KernelRegistry& /*kernels*/) {
  const std::string root = rt::CompileCache::default_dir();
  const std::string act = action;
  if (act != "path" && act != "list" && act != "prune" && act != "clear")
    fail("kiln cache expects path, list, prune or clear; got '{}'", act);
  if (root.empty())
    fail("no cache directory: set KILN_CACHE_DIR (or XDG_CACHE_HOME or HOME) to choose one");

  if (act == "path") {
    if (json)
      llvm::outs() << llvm::formatv("{0:2}",
                                    llvm::json::Value(llvm::json::Object{{"root", root},
                                                                         {"compile", compile_dir(root)},
                                                                         {"tune", tune_dir(root)}}))
                   << "\n";
    else
      llvm::outs() << fmt::format("cache:   {}\ncompile: {}\ntune:    {}\n", root, compile_dir(root),
                                  tune_dir(root));
    return 0;
  }

  rt::CompileCache cache(root);
  rt::TuningCache tuning(root);
  if (act == "clear") {
    const size_t compiled = cache.clear();
    const size_t tuned = tuning.clear();
    llvm::outs() << fmt::format(
        "removed {} compile cache file(s) from {} and {} autotune result(s) from {}\n", compiled,
        compile_dir(root), tuned, tune_dir(root));
    return 0;
  }

  if (act == "prune") { // compiled kernels are keyed by their source: any build that makes the same code reads them
    const size_t pruned = tuning.prune();
    llvm::outs() << fmt::format("removed {} autotune result(s) from {} that this build cannot read (another kiln "
                                "version or code generator, or unreadable); compiled kernels kept\n",
                                pruned, tune_dir(root));
    return 0;
  }

  const std::vector<rt::CacheEntryInfo> entries = cache.list();
  const std::vector<rt::TuningFileInfo> tuned = tuning.list();
  if (json) {
    llvm::json::Array c, t;
    for (const rt::CacheEntryInfo& e : entries)
      c.push_back(llvm::json::Object{{"path", e.path},
                                     {"kernel", e.kernel_name},
                                     {"arch", e.arch},
                                     {"size_bytes", static_cast<int64_t>(e.size_bytes)},
                                     {"age_seconds", e.age_seconds},
                                     {"valid", e.valid},
                                     {"problem", e.problem}});
    for (const rt::TuningFileInfo& e : tuned)
      t.push_back(llvm::json::Object{{"path", e.path},
                                     {"kernel", e.kernel},
                                     {"size_bytes", static_cast<int64_t>(e.size_bytes)},
                                     {"age_seconds", e.age_seconds},
                                     {"this_build", e.this_build},
                                     {"problem", e.problem}});
    llvm::outs() << llvm::formatv("{0:2}",
                                  llvm::json::Value(llvm::json::Object{
                                      {"root", root}, {"compile", std::move(c)}, {"tune", std::move(t)}}))
                 << "\n";
    return 0;
  }
  uint64_t total = 0;
  llvm::outs() << fmt::format("compile cache {}: {} entr{}\n", compile_dir(root), entries.size(),
                              entries.size() == 1 ? "y" : "ies");
  for (const rt::CacheEntryInfo& e : entries) {
    total += e.size_bytes;
    llvm::outs() << fmt::format("  {:<24} {:<8} {:>10} {:>9} old  {}\n",
                                e.valid ? e.kernel_name : "(corrupt)", e.arch,
                                human_bytes(static_cast<double>(e.size_bytes)), age_text(e.age_seconds),
                                e.valid ? llvm::sys::path::filename(e.path).str() : e.problem);
  }
  llvm::outs() << fmt::format("  total {}\n", human_bytes(static_cast<double>(total)));
  llvm::outs() << fmt::format("autotune results {}: {} file(s)\n", tune_dir(root), tuned.size());
  for (const rt::TuningFileInfo& e : tuned)
    llvm::outs() << fmt::format("  {:<24} {:>10} {:>9} old  {}{}\n",
                                e.kernel.empty() ? "(unreadable)" : e.kernel,
                                human_bytes(static_cast<double>(e.size_bytes)), age_text(e.age_seconds),
                                e.problem.empty() ? llvm::sys::path::filename(e.path).str() : e.problem,
                                e.kernel.empty() || e.this_build ? "" : "  (another build: `kiln cache prune`)");
  return 0;
}

} // namespace

Command cache_command() { return {&cache_sub, run_cache}; }

} // namespace kiln::cli
