// Cache entries that are not regular files — a FIFO, a symbolic link to /dev/zero — are listed as unusable,
// never opened: `kiln cache list` neither hangs nor runs out of memory, and the autotuner treats them as
// misses (runtime/cache_dir.h).
#include "runtime/cache_dir.h"
#include "runtime/compile_cache.h"
#include "runtime/tuning_cache.h"
#include "runtime_test_support.h"
#include "support/error.h"
#include "support/version.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <fstream>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::rt {
namespace {

using testing::ScratchDir;

TEST(CacheDir, CompileEntriesThatAreNotRegularFilesAreListedNotOpened) {
  ScratchDir dir;
  const std::string compile = dir.path() + "/compile";
  ASSERT_FALSE(llvm::sys::fs::create_directories(compile));
  ASSERT_EQ(::mkfifo((compile + "/fifo.kcubin").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("/dev/zero", (compile + "/zero.kcubin").c_str()), 0);
  std::map<std::string, std::string> problems;
  for (const CacheEntryInfo& e : CompileCache(dir.path()).list()) {
    EXPECT_FALSE(e.valid) << e.path;
    problems[e.key] = e.problem;
  }
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems["fifo"].find("it is a FIFO, not a regular file"), std::string::npos) << problems["fifo"];
  EXPECT_NE(problems["zero"].find("it is a symbolic link, not a regular file"), std::string::npos)
      << problems["zero"];
  EXPECT_EQ(CompileCache(dir.path()).clear(), 2u) << "clearing removes them";
  EXPECT_TRUE(CompileCache(dir.path()).list().empty());
}

TEST(CacheDir, TuningFilesThatAreNotRegularFilesAreMissesAndListedNotOpened) {
  ScratchDir dir;
  TuningCache cache(dir.path());
  const TuningKey key{"fa2_fwd", "N_Q=64", "sm_90a", "test device", "space"};
  const std::string path = cache.file_path(key);
  ASSERT_FALSE(llvm::sys::fs::create_directories(dir.path() + "/tune"));
  ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0);
  EXPECT_FALSE(cache.find(key).has_value());
  EXPECT_EQ(cache.stats().corrupt_files, 1u) << "a link is not a result";
  ASSERT_EQ(::mkfifo((dir.path() + "/tune/fifo.json").c_str(), 0600), 0);
  const std::vector<TuningFileInfo> files = cache.list();
  ASSERT_EQ(files.size(), 2u);
  for (const TuningFileInfo& f : files) {
    EXPECT_TRUE(f.kernel.empty()) << f.path;
    EXPECT_NE(f.problem.find("not a regular file"), std::string::npos) << f.problem;
  }
}

// A result file's name holds kiln's version and the code generator's hash, so a build reads only its own; `kiln cache
// prune` removes the others (and unreadable ones), which a changed code generator leaves behind.
TEST(CacheDir, PruningRemovesTheTuningResultsOfOtherBuilds) {
  ScratchDir dir;
  TuningCache cache(dir.path());
  const TuningKey key{"fa2_fwd", "N_Q=64", "sm_90a", "test device", "space"};
  TuningRecord record;
  record.best_id = "a";
  record.best_ms = 1.5;
  record.table = {CandidateResult{"a", CandidateStatus::Ok, "", 1.5, 0, -1, -1}};
  cache.store(key, record);
  std::string other = serialize_tuning_record(key, record);
  const std::string mine = std::string("\"code_generator\": \"") + code_generator_hash() + "\"";
  ASSERT_NE(other.find(mine), std::string::npos) << other;
  other.replace(other.find(mine), mine.size(), "\"code_generator\": \"0000000000000000\"");
  std::ofstream(dir.path() + "/tune/other_build.json") << other;
  std::ofstream(dir.path() + "/tune/broken.json") << "{ not json";
  std::map<std::string, bool> this_build;
  for (const TuningFileInfo& f : cache.list())
    this_build[llvm::sys::path::filename(f.path).str()] = f.this_build;
  ASSERT_EQ(this_build.size(), 3u);
  EXPECT_TRUE(this_build[llvm::sys::path::filename(cache.file_path(key)).str()]);
  EXPECT_FALSE(this_build["other_build.json"]);
  EXPECT_FALSE(this_build["broken.json"]);
  EXPECT_EQ(cache.prune(), 2u);
  ASSERT_EQ(cache.list().size(), 1u);
  cache.clear_memory();
  const std::optional<TuningRecord> kept = cache.find(key);
  ASSERT_TRUE(kept.has_value()) << "this build's result stays and is read back";
  EXPECT_EQ(kept->best_id, "a");
}

TEST(CacheDir, ReadingACacheFileIsBounded) {
  ScratchDir dir;
  const std::string path = dir.path() + "/entry";
  EXPECT_FALSE(read_cache_file(path, 10).has_value()) << "no file is a miss, not an error";
  std::ofstream(path) << "0123456789abc";
  EXPECT_EQ(read_cache_file(path, 13), "0123456789abc");
  try {
    read_cache_file(path, 10);
    FAIL() << "a file above the cap must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 13 bytes, more than the 10 bytes"), std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace kiln::rt
