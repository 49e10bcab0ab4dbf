// The autotuner without a GPU: an injected compiler and timer stand in for NVRTC and events, so these tests
// check the tuner's decisions (winner, pruning, failures; the finalists' rounds are autotuner_finalists_test.cpp's), its memory in-process and on
// disk (fresh objects stand in for new processes; fork gives real ones), and the KILN_AUTOTUNE modes. The keys
// and candidates of a real kernel are tuning_key_test.cpp's.
#include "runtime/autotuner.h"
#include "scoped_env.h"
#include "support/error.h"
#include "support/hash.h"
#include "support/version.h"
#include "temp_dir.h"
#include "unit/fake_tuning.h"

#include <gtest/gtest.h>

#include <sstream>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sys/wait.h>
#include <unistd.h>

using namespace kiln;
using namespace kiln::rt;
using namespace kiln::testing_support;
using kiln::testing_support::ScopedEnv;

namespace {

using kiln::testing_support::TempDir;

TEST(Autotuner, FastestWinsAndFailuresScoreInfinityWithReasons) {
  FakeKernel k;
  three_configs(k).add("BM=512", 0.01).add("BM=1024", 0.02).add("BM=32", 0.05);
  k.compile_error["BM=512"] = "ptxas: too many registers";
  k.launch_error["BM=1024"] = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
  k.prune_reason["BM=32"] = "tile narrower than an MMA";
  Autotuner tuner("", quiet());
  TuneRequest req = k.request();
  req.flops = 2e9;
  req.bytes = 4e8;
  TuneResult r = tuner.tune(req, k.hooks());
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(k.ids[*r.best], "BM=128");
  EXPECT_EQ(r.source, TuneSource::Tuned);
  EXPECT_DOUBLE_EQ(r.best_ms, 0.2);
  ASSERT_EQ(r.table.size(), 6u);
  EXPECT_EQ(row(r, "BM=512").status, CandidateStatus::CompileFailed);
  EXPECT_EQ(row(r, "BM=512").reason, "ptxas: too many registers");
  EXPECT_TRUE(std::isinf(row(r, "BM=512").ms));
  EXPECT_EQ(row(r, "BM=1024").status, CandidateStatus::LaunchFailed);
  EXPECT_NE(row(r, "BM=1024").reason.find("OUT_OF_RESOURCES"), std::string::npos);
  EXPECT_TRUE(std::isinf(row(r, "BM=1024").ms));
  EXPECT_EQ(row(r, "BM=32").status, CandidateStatus::Pruned);
  EXPECT_EQ(row(r, "BM=32").reason, "tile narrower than an MMA");
  // TFLOP/s = 2e9 FLOP / 0.2 ms; resources come through from the compile hook.
  EXPECT_NEAR(row(r, "BM=128").tflops, 10.0, 1e-9);
  EXPECT_NEAR(row(r, "BM=128").gbps, 2000.0, 1e-9); // 4e8 bytes / 0.2 ms
  EXPECT_EQ(row(r, "BM=512").gbps, 0) << "no rate for a config that did not run";
  EXPECT_EQ(row(r, "BM=128").registers, 41);
  EXPECT_EQ(row(r, "BM=128").shared_bytes, 1024);
  EXPECT_EQ(k.compiles, 5); // all but the pruned one
  EXPECT_EQ(k.timed, 4);    // all that compiled
  std::string table = format_tune_table(r.table, "BM=128");
  EXPECT_NE(table.find("* BM=128"), std::string::npos) << table;
  EXPECT_NE(table.find("pruned: tile narrower than an MMA"), std::string::npos) << table;
  EXPECT_NE(table.find("GB/s"), std::string::npos) << table;
  EXPECT_NE(table.find(" 2000 "), std::string::npos) << table;
}

// Config ids longer than the 60-column minimum widen the config column instead of pushing their row's
// figures out of line with the header.
TEST(Autotuner, TableColumnsLineUpPastLongConfigs) {
  std::vector<CandidateResult> table(2);
  table[0].id = "short";
  table[0].ms = 1.5;
  table[0].status = CandidateStatus::Ok;
  table[1].id = std::string(75, 'x');
  table[1].ms = 2.25;
  table[1].status = CandidateStatus::Ok;
  std::istringstream lines(format_tune_table(table, "short"));
  std::string header, first, second;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  const size_t ms_end = header.find("ms") + 2;
  ASSERT_GT(ms_end, 75u + 2) << header;
  EXPECT_EQ(first.substr(ms_end - 6, 6), "1.5000") << header << "\n" << first;
  EXPECT_EQ(second.substr(ms_end - 6, 6), "2.2500") << header << "\n" << second;
}

TEST(Autotuner, EveryCandidateIsPrunedBeforeAnyCompile) {
  FakeKernel k;
  for (int i = 0; i < 40; ++i)
    k.add("c" + std::to_string(i), 1.0 + i);
  Autotuner tuner("", quiet());
  TuneResult r = tuner.tune(k.request(), k.hooks());
  EXPECT_EQ(k.prunes, 40);
  EXPECT_FALSE(k.pruned_after_compile);
  EXPECT_EQ(k.ids[*r.best], "c0");
}

TEST(Autotuner, NothingLeftAfterPruningListsEveryConfigAndWhy) {
  FakeKernel k;
  three_configs(k);
  k.prune_reason = {{"BM=64", "needs 300000 bytes of shared memory"},
                    {"BM=128", "BLOCK_M=128 is wider than the 64 query rows"},
                    {"BM=256", "BLOCK_M=256 is wider than the 64 query rows"}};
  Autotuner tuner("", quiet());
  try {
    tuner.tune(k.request(), k.hooks());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("every config was pruned"), std::string::npos) << msg;
    for (const auto& [id, why] : k.prune_reason)
      EXPECT_NE(msg.find(id + ": " + why), std::string::npos) << msg;
  }
  EXPECT_EQ(k.compiles, 0);
}

TEST(Autotuner, EveryCandidateFailingIsAnErrorWithTheTable) {
  FakeKernel k;
  k.add("a", 1).add("b", 2);
  k.compile_error["a"] = "syntax error";
  k.launch_error["b"] = "out of resources";
  Autotuner tuner("", quiet());
  try {
    tuner.tune(k.request(), k.hooks());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("compile-failed: syntax error"), std::string::npos) << msg;
    EXPECT_NE(msg.find("launch-failed: out of resources"), std::string::npos) << msg;
  }
}

TEST(Autotuner, MalformedRequestsAreErrors) {
  FakeKernel k;
  k.add("a", 1).add("a", 2);
  Autotuner tuner("", quiet());
  EXPECT_THROW(tuner.tune(k.request(), k.hooks()), Error);
  FakeKernel empty;
  EXPECT_THROW(tuner.tune(empty.request(), empty.hooks()), Error);
}

TEST(Autotuner, SameKeyIsRememberedWithZeroCompilesAndANewKeyTunes) {
  TempDir dir{"kiln-autotuner-test"};
  FakeKernel k;
  three_configs(k);
  Autotuner tuner(dir.path(), quiet());
  TuneResult first = tuner.tune(k.request("N=1024"), k.hooks());
  EXPECT_EQ(first.source, TuneSource::Tuned);
  EXPECT_EQ(k.compiles, 3);
  TuneResult again = tuner.tune(k.request("N=1024"), k.hooks());
  EXPECT_EQ(again.source, TuneSource::Memory);
  EXPECT_EQ(again.best, first.best);
  EXPECT_EQ(again.table.size(), 3u);
  EXPECT_EQ(k.compiles, 3);
  EXPECT_EQ(k.prunes, 3);
  TuneResult other = tuner.tune(k.request("N=2048"), k.hooks());
  EXPECT_EQ(other.source, TuneSource::Tuned);
  EXPECT_EQ(k.compiles, 6);
}

TEST(Autotuner, ResultSurvivesIntoAFreshTunerThroughTheFile) {
  TempDir dir{"kiln-autotuner-test"};
  FakeKernel k;
  three_configs(k);
  TuneRequest req = k.request();
  req.flops = 1e9;
  std::string path;
  {
    Autotuner tuner(dir.path(), quiet());
    tuner.tune(req, k.hooks());
    path = tuner.cache().file_path(
        TuningKey{req.key.kernel, req.key.key, req.key.arch, req.key.device, config_space_hash(req.ids)});
  }
  EXPECT_TRUE(llvm::sys::fs::exists(path)) << path;
  EXPECT_NE(path.find(dir.path() + "/tune/"), std::string::npos);
  FakeKernel fresh;
  three_configs(fresh);
  Autotuner tuner(dir.path(), quiet()); // a new process, in effect: empty memory
  TuneResult r = tuner.tune(req, fresh.hooks());
  EXPECT_EQ(r.source, TuneSource::Disk);
  EXPECT_EQ(fresh.ids[*r.best], "BM=128");
  EXPECT_EQ(fresh.compiles, 0);
  EXPECT_EQ(fresh.prunes, 0);
  // The table comes back whole, infinities and all.
  ASSERT_EQ(r.table.size(), 3u);
  EXPECT_NEAR(row(r, "BM=128").tflops, 5.0, 1e-9);
  EXPECT_DOUBLE_EQ(row(r, "BM=64").ms, 0.5);
  EXPECT_EQ(tuner.cache().stats().disk_hits, 1u);
}

TEST(Autotuner, InfiniteTimesRoundTripThroughJson) {
  TuningKey key{"k", "N=1", "sm_80", "dev", "h"};
  TuningRecord rec;
  rec.best_id = "a";
  rec.best_ms = 0.25;
  rec.table = {
      CandidateResult{"a", CandidateStatus::Ok, "", 0.25, 3.5, 96, 4096, 812.5},
      CandidateResult{"b \"quoted\"", CandidateStatus::CompileFailed, "line 1\nline 2", INFINITY, 0, -1, -1}};
  std::string text = serialize_tuning_record(key, rec);
  std::string problem;
  auto back = parse_tuning_record(text, key, &problem);
  ASSERT_TRUE(back) << problem << "\n" << text;
  ASSERT_EQ(back->table.size(), 2u);
  EXPECT_EQ(back->table[1].id, "b \"quoted\"");
  EXPECT_EQ(back->table[1].reason, "line 1\nline 2");
  EXPECT_TRUE(std::isinf(back->table[1].ms));
  EXPECT_EQ(back->table[0].registers, 96);
  EXPECT_EQ(back->table[0].gbps, 812.5);
  // Files written before rows carried GB/s still parse, with none reported.
  std::string without_gbps = text;
  for (size_t at; (at = without_gbps.find("\"gbps\":")) != std::string::npos;)
    without_gbps.erase(at, without_gbps.find('\n', at) - at + 1);
  auto old_file = parse_tuning_record(without_gbps, key, &problem);
  ASSERT_TRUE(old_file) << problem << "\n" << without_gbps;
  EXPECT_EQ(old_file->table[0].gbps, 0);
  // The same text under another key is not trusted.
  TuningKey other = key;
  other.device = "another GPU";
  EXPECT_FALSE(parse_tuning_record(text, other, &problem));
  EXPECT_NE(problem.find("device"), std::string::npos) << problem;
  EXPECT_FALSE(parse_tuning_record(text.substr(0, text.size() / 2), key, &problem));
}

// Tuning results are kept under the build's code generator: its hash is 16 hex digits, part of the key's hash
// (the file name) and written into the record for a reader. That the hash follows the sources is checked by
// unit.CodeGeneratorHashFollowsTheSources (tests/cmake/code_generator_hash_test.cmake).
TEST(Autotuner, RecordsAreKeptUnderTheCodeGeneratorsHash) {
  const std::string hash = code_generator_hash();
  ASSERT_EQ(hash.size(), 16u);
  EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), std::string::npos) << hash;
  const TuningKey key{"k", "N=1", "sm_80", "dev", "h"};
  TuningRecord rec;
  rec.best_id = "a";
  rec.best_ms = 0.25;
  rec.table = {CandidateResult{"a", CandidateStatus::Ok, "", 0.25, 3.5, 96, 4096}};
  const std::string text = serialize_tuning_record(key, rec);
  EXPECT_NE(text.find("\"code_generator\": \"" + hash + "\""), std::string::npos) << text;
  // The key's hash is SHA-256 over its fields, the version and the code generator's hash, in that order.
  const std::string expected =
      HashBuilder().add("kiln-tune").add("k").add("N=1").add("sm_80").add("dev").add(version()).add(hash).add("h").hex();
  EXPECT_EQ(key.hash(), expected);
}

// A row's "ms" is a number, or null for +inf; anything else (a bool, a string, nothing) makes the file
// untrusted. This path once called llvm::json::Object::getNull, whose Optional<nullptr_t> result LLVM 14's
// library (built by clang) returns through memory while GCC reads it from registers: UBSan saw an invalid
// bool load (the Optional's flag) there. It now reads the Value's kind, compiled on kiln's side.
TEST(Autotuner, RowTimesMustBeANumberOrNull) {
  TuningKey key{"k", "N=1", "sm_80", "dev", "h"};
  TuningRecord rec;
  rec.best_id = "a";
  rec.best_ms = 0.25;
  rec.table = {CandidateResult{"a", CandidateStatus::Ok, "", 0.25, 3.5, 96, 4096},
               CandidateResult{"b", CandidateStatus::LaunchFailed, "out of resources", INFINITY, 0, 255, 0}};
  const std::string text = serialize_tuning_record(key, rec);
  const std::string null_ms = "\"ms\": null";
  const size_t at = text.find(null_ms);
  ASSERT_NE(at, std::string::npos) << text;
  std::string problem;
  auto parsed = parse_tuning_record(text, key, &problem);
  ASSERT_TRUE(parsed) << problem;
  EXPECT_TRUE(std::isinf(parsed->table[1].ms));
  EXPECT_GT(parsed->table[1].ms, 0);
  EXPECT_EQ(parsed->table[0].ms, 0.25);
  for (const char* bad :
       {"\"ms\": true", "\"ms\": false", "\"ms\": \"inf\"", "\"ms\": [1]", "\"unused\": 1"}) {
    std::string edited = text;
    edited.replace(at, null_ms.size(), bad);
    problem.clear();
    EXPECT_FALSE(parse_tuning_record(edited, key, &problem)) << bad;
    EXPECT_NE(problem.find("ms is neither a number nor null"), std::string::npos) << bad << ": " << problem;
  }
}

TEST(Autotuner, CorruptFileIsIgnoredAndRewritten) {
  TempDir dir{"kiln-autotuner-test"};
  FakeKernel k;
  three_configs(k);
  TuneRequest req = k.request();
  TuningKey key = req.key;
  key.space_hash = config_space_hash(req.ids);
  std::string path;
  {
    Autotuner tuner(dir.path(), quiet());
    tuner.tune(req, k.hooks());
    path = tuner.cache().file_path(key);
  }
  for (const char* garbage : {"{\"format\": \"kiln-tune-1\", \"kernel\": ", "not json at all", ""}) {
    {
      std::ofstream f(path, std::ios::trunc);
      f << garbage;
    }
    const int compiles_before = k.compiles;
    Autotuner tuner(dir.path(), quiet());
    ::testing::internal::CaptureStderr();
    TuneResult r = tuner.tune(req, k.hooks());
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(r.source, TuneSource::Tuned) << garbage;
    EXPECT_EQ(k.compiles, compiles_before + 3);
    EXPECT_EQ(tuner.cache().stats().corrupt_files, 1u);
    EXPECT_NE(err.find("warning: ignoring autotune file"), std::string::npos) << err;
    EXPECT_NE(err.find(path), std::string::npos) << err;
    auto text = llvm::MemoryBuffer::getFile(path);
    ASSERT_TRUE(text);
    EXPECT_TRUE(parse_tuning_record((*text)->getBuffer().str(), key)) << "the file was not rewritten";
  }
}

TEST(Autotuner, ConcurrentProcessesWritingOneFileLeaveAValidOne) {
  TempDir dir{"kiln-autotuner-test"};
  FakeKernel k;
  three_configs(k);
  const TuneRequest req = k.request();
  constexpr int kProcesses = 6;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        // Each process gets its own timings, so the processes disagree about the winner.
        FakeKernel mine;
        mine.add("BM=64", 0.1 + 0.01 * ((p + 0) % 3)).add("BM=128", 0.1 + 0.01 * ((p + 1) % 3));
        mine.add("BM=256", 0.1 + 0.01 * ((p + 2) % 3));
        Autotuner tuner(dir.path(), quiet());
        for (int round = 0; round < 20; ++round)
          tuner.tune(mine.request("N=1024", AutotuneMode::Force), mine.hooks());
      } catch (...) {
        status = 1;
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  Autotuner tuner(dir.path(), quiet());
  TuneResult r = tuner.tune(k.request("N=1024", AutotuneMode::Cached), k.hooks());
  EXPECT_EQ(r.source, TuneSource::Disk);
  EXPECT_TRUE(r.best.has_value());
  EXPECT_EQ(tuner.cache().stats().corrupt_files, 0u);
  EXPECT_EQ(k.compiles, 0);
  // No temporary file is left behind: one result file in tune/.
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(dir.path() + "/tune", ec), end; it != end && !ec;
       it.increment(ec))
    ++files;
  EXPECT_EQ(files, 1);
}

TEST(Autotuner, ChangingTheConfigSpaceRetunesButReorderingDoesNot) {
  TempDir dir{"kiln-autotuner-test"};
  FakeKernel k;
  three_configs(k);
  Autotuner tuner(dir.path(), quiet());
  tuner.tune(k.request(), k.hooks());
  EXPECT_EQ(k.compiles, 3);

  FakeKernel reordered;
  reordered.add("BM=256", 0.3).add("BM=64", 0.5).add("BM=128", 0.2);
  Autotuner fresh(dir.path(), quiet());
  TuneResult same = fresh.tune(reordered.request(), reordered.hooks());
  EXPECT_EQ(same.source, TuneSource::Disk);
  EXPECT_EQ(reordered.ids[*same.best], "BM=128");
  EXPECT_EQ(reordered.compiles, 0);

  FakeKernel grown;
  three_configs(grown).add("BM=32", 0.1);
  TuneResult r = fresh.tune(grown.request(), grown.hooks());
  EXPECT_EQ(r.source, TuneSource::Tuned);
  EXPECT_EQ(grown.compiles, 4);
  EXPECT_EQ(grown.ids[*r.best], "BM=32");
}

TEST(Autotuner, ModesOffCachedOnForce) {
  TempDir dir{"kiln-autotuner-test"};
  FakeKernel k;
  three_configs(k);
  Autotuner tuner(dir.path(), quiet());

  TuneResult off = tuner.tune(k.request("N=1", AutotuneMode::Off), k.hooks());
  EXPECT_EQ(off.source, TuneSource::Default);
  EXPECT_FALSE(off.best);
  TuneResult cached_miss = tuner.tune(k.request("N=1", AutotuneMode::Cached), k.hooks());
  EXPECT_EQ(cached_miss.source, TuneSource::Default);
  EXPECT_EQ(k.compiles, 0);
  EXPECT_EQ(k.prunes, 0);

  TuneResult on = tuner.tune(k.request("N=1", AutotuneMode::On), k.hooks());
  EXPECT_EQ(on.source, TuneSource::Tuned);
  EXPECT_EQ(k.compiles, 3);
  TuneResult cached_hit = tuner.tune(k.request("N=1", AutotuneMode::Cached), k.hooks());
  EXPECT_EQ(cached_hit.source, TuneSource::Memory);
  EXPECT_EQ(cached_hit.best, on.best);
  TuneResult off_after = tuner.tune(k.request("N=1", AutotuneMode::Off), k.hooks());
  EXPECT_FALSE(off_after.best) << "off ignores remembered results";

  // force re-tunes and replaces the remembered pick.
  k.ms["BM=64"] = 0.01;
  TuneResult forced = tuner.tune(k.request("N=1", AutotuneMode::Force), k.hooks());
  EXPECT_EQ(forced.source, TuneSource::Tuned);
  EXPECT_EQ(k.compiles, 6);
  EXPECT_EQ(k.ids[*forced.best], "BM=64");
  Autotuner fresh(dir.path(), quiet());
  TuneResult after = fresh.tune(k.request("N=1", AutotuneMode::Cached), k.hooks());
  EXPECT_EQ(after.source, TuneSource::Disk);
  EXPECT_EQ(k.ids[*after.best], "BM=64");
}

TEST(Autotuner, ModeComesFromTheEnvironment) {
  {
    ScopedEnv env("KILN_AUTOTUNE", nullptr);
    EXPECT_EQ(autotune_mode_from_env(), AutotuneMode::On);
  }
  for (auto [text, mode] : {std::pair{"off", AutotuneMode::Off},
                            {"cached", AutotuneMode::Cached},
                            {"on", AutotuneMode::On},
                            {"force", AutotuneMode::Force}}) {
    ScopedEnv env("KILN_AUTOTUNE", text);
    EXPECT_EQ(autotune_mode_from_env(), mode) << text;
  }
  {
    ScopedEnv env("KILN_AUTOTUNE", "off");
    FakeKernel k;
    three_configs(k);
    Autotuner tuner("", quiet());
    EXPECT_EQ(tuner.tune(k.request("N=1", std::nullopt), k.hooks()).source, TuneSource::Default);
    EXPECT_EQ(k.compiles, 0);
  }
  ScopedEnv env("KILN_AUTOTUNE", "sometimes");
  try {
    autotune_mode_from_env();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'sometimes'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("off, cached, on, force"), std::string::npos) << msg;
  }
}

TEST(Autotuner, ProgressLinesNameTheCandidateAndItsTime) {
  FakeKernel k;
  three_configs(k);
  k.compile_error["BM=256"] = "ptxas error\nmore detail";
  std::vector<std::string> lines;
  AutotunerOptions o;
  o.progress_after_s = 0;
  o.progress = [&](const std::string& l) { lines.push_back(l); };
  Autotuner tuner("", o);
  TuneRequest req = k.request();
  req.labels = {"BM=64 w=4 s=2", "BM=128 w=8 s=3", "BM=256 w=8 s=3"};
  tuner.tune(req, k.hooks());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "tuning fake [1/3] BM=64 w=4 s=2  0.5 ms");
  EXPECT_EQ(lines[1], "tuning fake [2/3] BM=128 w=8 s=3  0.2 ms");
  EXPECT_EQ(lines[2], "tuning fake [3/3] BM=256 w=8 s=3  compile-failed: ptxas error");

  // Times keep three significant digits without an exponent at kernel time scales.
  k.ms = {{"BM=64", 0.41}, {"BM=128", 0.0123456}, {"BM=256", 1234.5}};
  k.compile_error.clear();
  lines.clear();
  Autotuner again("", o);
  again.tune(req, k.hooks());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "tuning fake [1/3] BM=64 w=4 s=2  0.41 ms");
  EXPECT_EQ(lines[1], "tuning fake [2/3] BM=128 w=8 s=3  0.0123 ms");
  EXPECT_EQ(lines[2], "tuning fake [3/3] BM=256 w=8 s=3  1234 ms");

  // A run quicker than the threshold prints nothing.
  lines.clear();
  o.progress_after_s = 3600;
  Autotuner patient("", o);
  patient.tune(req, k.hooks());
  EXPECT_TRUE(lines.empty());
}

} // namespace
