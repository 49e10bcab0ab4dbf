// Autotune results in memory and as JSON files under <dir>/tune.
#include "runtime/tuning_cache.h"

#include "runtime/cache_dir.h"
#include "support/atomic_file.h"
#include "support/error.h"
#include "support/hash.h"
#include "support/version.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace kiln::rt {

namespace {
constexpr const char* kFormat = "kiln-tune-1";
constexpr uint64_t kMaxFileBytes = uint64_t{16} << 20; // a result table of thousands of configs is ~1 MB

const CandidateStatus kAllStatuses[] = {CandidateStatus::Ok, CandidateStatus::Pruned,
                                        CandidateStatus::CompileFailed, CandidateStatus::LaunchFailed,
                                        CandidateStatus::NotRun};

// JSON has no infinity: a time that is not finite is written as null.
llvm::json::Value time_value(double ms) {
  return std::isfinite(ms) ? llvm::json::Value(ms) : llvm::json::Value(nullptr);
}

llvm::json::Object result_object(const CandidateResult& r) {
  return llvm::json::Object{{"config", r.id},           {"status", candidate_status_name(r.status)},
                            {"ms", time_value(r.ms)},   {"tflops", r.tflops},
                            {"registers", r.registers}, {"shared_bytes", r.shared_bytes},
                            {"gbps", r.gbps},           {"reason", r.reason},
                            {"samples", r.samples}};
}

std::optional<CandidateResult> parse_result(const llvm::json::Value& v, std::string* problem) {
  const llvm::json::Object* o = v.getAsObject();
  if (!o) {
    *problem = "a result is not an object";
    return std::nullopt;
  }
  CandidateResult r;
  auto id = o->getString("config");
  auto status = o->getString("status");
  auto reason = o->getString("reason");
  auto regs = o->getInteger("registers");
  auto smem = o->getInteger("shared_bytes");
  auto tflops = o->getNumber("tflops");
  if (!id || !status || !reason || !regs || !smem || !tflops) {
    *problem = "a result lacks one of config, status, reason, registers, shared_bytes, tflops";
    return std::nullopt;
  }
  r.id = id->str();
  r.reason = reason->str();
  r.registers = static_cast<int>(*regs);
  r.shared_bytes = *smem;
  r.tflops = *tflops;
  // Absent from files written before GB/s was recorded; those rows simply report none.
  if (const llvm::json::Value* gbps = o->get("gbps")) {
    if (!gbps->getAsNumber()) {
      *problem = "a result's gbps is not a number";
      return std::nullopt;
    }
    r.gbps = *gbps->getAsNumber();
  }
  // Absent from files written before the samples were recorded: an Ok row there counts as timed once.
  if (const llvm::json::Value* samples = o->get("samples")) {
    if (!samples->getAsInteger()) {
      *problem = "a result's samples is not an integer";
      return std::nullopt;
    }
    r.samples = static_cast<int>(*samples->getAsInteger());
  }
  bool known = false;
  for (CandidateStatus s : kAllStatuses)
    if (*status == candidate_status_name(s)) {
      r.status = s;
      known = true;
    }
  if (!known) {
    *problem = "unknown status '" + status->str() + "'";
    return std::nullopt;
  }
  if (!o->get("samples") && r.status == CandidateStatus::Ok)
    r.samples = 1;
  // Not Object::getNull: LLVM 14's library (built by clang) returns its Optional<nullptr_t> through memory,
  // while GCC reads that type from registers, so callers saw a garbage flag (UBSan: an invalid bool load).
  // Value::kind() and getAsNumber() are inline, compiled on kiln's side of the boundary.
  const llvm::json::Value* ms = o->get("ms");
  if (ms && ms->getAsNumber())
    r.ms = *ms->getAsNumber();
  else if (!ms || ms->kind() != llvm::json::Value::Null) {
    *problem = "a result's ms is neither a number nor null";
    return std::nullopt;
  }
  return r;
}

std::string tune_dir(const std::string& root) { return root + "/tune"; }

} // namespace

const char* candidate_status_name(CandidateStatus s) {
  switch (s) {
  case CandidateStatus::Ok:
    return "ok";
  case CandidateStatus::Pruned:
    return "pruned";
  case CandidateStatus::CompileFailed:
    return "compile-failed";
  case CandidateStatus::LaunchFailed:
    return "launch-failed";
  case CandidateStatus::NotRun:
    return "not-run";
  }
  return "unknown";
}

std::string TuningKey::hash() const {
  return HashBuilder()
      .add("kiln-tune")
      .add(kernel)
      .add(key)
      .add(arch)
      .add(device)
      .add(version())
      .add(code_generator_hash())
      .add(space_hash)
      .hex();
}

std::string TuningKey::str() const { return fmt::format("{} [{}] on {} ({})", kernel, key, arch, device); }

std::string config_space_hash(const std::vector<std::string>& ids) {
  std::vector<std::string> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  HashBuilder h;
  h.add(static_cast<int64_t>(sorted.size()));
  for (const std::string& id : sorted)
    h.add(id);
  return h.hex();
}

std::string serialize_tuning_record(const TuningKey& key, const TuningRecord& record) {
  llvm::json::Array results;
  for (const CandidateResult& r : record.table)
    results.push_back(result_object(r));
  llvm::json::Object o{{"format", kFormat},
                       {"kernel", key.kernel},
                       {"key", key.key},
                       {"arch", key.arch},
                       {"device", key.device},
                       {"kiln_version", version()},
                       {"code_generator", code_generator_hash()},
                       {"space_hash", key.space_hash},
                       {"best", record.best_id},
                       {"best_ms", time_value(record.best_ms)},
                       {"results", std::move(results)}};
  return llvm::formatv("{0:2}", llvm::json::Value(std::move(o))).str() + "\n";
}

std::optional<TuningRecord> parse_tuning_record(std::string_view text, const TuningKey& expected,
                                                std::string* problem) {
  std::string scratch;
  std::string& why = problem ? *problem : scratch;
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(llvm::StringRef(text.data(), text.size()));
  if (!parsed) {
    why = "not JSON: " + llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  const llvm::json::Object* o = parsed->getAsObject();
  if (!o) {
    why = "not a JSON object";
    return std::nullopt;
  }
  // Every key field must match: a file for another key (a hash collision, a copied file) is not trusted.
  const std::pair<const char*, std::string> fields[] = {{"format", kFormat},
                                                        {"kernel", expected.kernel},
                                                        {"key", expected.key},
                                                        {"arch", expected.arch},
                                                        {"device", expected.device},
                                                        {"kiln_version", version()},
                                                        {"space_hash", expected.space_hash}};
  for (const auto& [name, want] : fields) {
    auto got = o->getString(name);
    if (!got) {
      why = fmt::format("field '{}' is missing", name);
      return std::nullopt;
    }
    if (*got != want) {
      why = fmt::format("field '{}' is '{}', expected '{}'", name, got->str(), want);
      return std::nullopt;
    }
  }
  TuningRecord record;
  auto best = o->getString("best");
  auto best_ms = o->getNumber("best_ms");
  const llvm::json::Array* results = o->getArray("results");
  if (!best || !best_ms || !results) {
    why = "fields 'best', 'best_ms' or 'results' are missing";
    return std::nullopt;
  }
  record.best_id = best->str();
  record.best_ms = *best_ms;
  bool best_listed = false;
  for (const llvm::json::Value& v : *results) {
    std::optional<CandidateResult> r = parse_result(v, &why);
    if (!r)
      return std::nullopt;
    best_listed |= r->id == record.best_id && r->status == CandidateStatus::Ok;
    record.table.push_back(std::move(*r));
  }
  if (!best_listed) {
    why = "the best config '" + record.best_id + "' is not a timed row of the results";
    return std::nullopt;
  }
  return record;
}

TuningCache::TuningCache(std::string dir) : dir_(std::move(dir)) {}

std::string TuningCache::file_path(const TuningKey& key) const {
  return dir_.empty() ? std::string() : tune_dir(dir_) + "/" + key.hash() + ".json";
}

std::optional<TuningRecord> TuningCache::find(const TuningKey& key) {
  const std::string hash = key.hash();
  {
    std::lock_guard lock(mutex_);
    if (auto it = memory_.find(hash); it != memory_.end()) {
      ++stats_.memory_hits;
      return it->second;
    }
  }
  std::optional<TuningRecord> record;
  if (!dir_.empty()) {
    const std::string path = file_path(key);
    std::string problem;
    try {
      if (std::optional<std::string> text = read_cache_file(path, kMaxFileBytes))
        record = parse_tuning_record(*text, key, &problem);
      else
        problem.clear();       // no file: a plain miss
    } catch (const Error& e) { // not a regular file, or too large
      problem = e.what();
    }
    if (!record && !problem.empty()) {
      std::fprintf(stderr,
                   "kiln: warning: ignoring autotune file %s (%s); it will be rewritten after tuning\n",
                   path.c_str(), problem.c_str());
      std::lock_guard lock(mutex_);
      ++stats_.corrupt_files;
    }
  }
  std::lock_guard lock(mutex_);
  if (!record) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.disk_hits;
  memory_[hash] = *record;
  return record;
}

void TuningCache::store(const TuningKey& key, const TuningRecord& record) {
  {
    std::lock_guard lock(mutex_);
    memory_[key.hash()] = record;
  }
  if (dir_.empty())
    return;
  std::string problem =
      write_file_atomically(tune_dir(dir_), file_path(key), serialize_tuning_record(key, record),
                            file_path(key) + ".tmp-%%%%%%%%%%%%");
  std::lock_guard lock(mutex_);
  if (problem.empty()) {
    ++stats_.writes;
    return;
  }
  ++stats_.write_failures;
  if (!warned_write_failure_) {
    // An unwritable cache costs a re-tune in the next process, not correctness; say so once and go on.
    std::fprintf(
        stderr, "kiln: warning: autotune result not saved (set KILN_CACHE_DIR to a writable directory): %s\n",
        problem.c_str());
    warned_write_failure_ = true;
  }
}

std::vector<TuningFileInfo> TuningCache::list() const {
  std::vector<TuningFileInfo> out;
  if (dir_.empty())
    return out;
  for (const CacheFile& file : list_cache_dir(tune_dir(dir_))) {
    if (llvm::sys::path::extension(file.path) != ".json")
      continue;
    TuningFileInfo info{file.path, "", file.size_bytes, file.age_seconds, ""};
    try {
      if (std::optional<std::string> text = read_cache_file(file.path, kMaxFileBytes)) {
        llvm::Expected<llvm::json::Value> v = llvm::json::parse(*text);
        if (!v)
          info.problem = llvm::toString(v.takeError());
        else if (const llvm::json::Object* o = v->getAsObject(); o && o->getString("kernel")) {
          info.kernel = o->getString("kernel")->str();
          info.this_build = o->getString("kiln_version") == llvm::StringRef(version()) &&
                            o->getString("code_generator") == llvm::StringRef(code_generator_hash());
        } else
          info.problem = "no \"kernel\" in the file";
      }
    } catch (const Error& e) {
      info.problem = e.what();
    }
    out.push_back(std::move(info));
  }
  return out;
}

size_t TuningCache::clear() {
  clear_memory();
  size_t removed = 0;
  for (const TuningFileInfo& file : list())
    if (remove_cache_file(file.path))
      ++removed;
  return removed;
}

size_t TuningCache::prune() {
  size_t removed = 0;
  for (const TuningFileInfo& file : list())
    if (!file.this_build && remove_cache_file(file.path))
      ++removed;
  return removed;
}

void TuningCache::clear_memory() {
  std::lock_guard lock(mutex_);
  memory_.clear();
}

TuningCacheStats TuningCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

} // namespace kiln::rt
