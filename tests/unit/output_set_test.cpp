// Output files written as a set (support/output_set.h): all or nothing, a failed commit undone, symbolic
// links written through to their targets, permissions kept, and concurrent writers of the same outputs
// leaving one writer's whole set (the directory lock, support/directory_lock.h).
#include "support/directory_lock.h"
#include "support/error.h"
#include "support/output_set.h"
#include "temp_dir.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <chrono>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln {
namespace {

using testing_support::TempDir;

std::string slurp(const std::string& path) {
  auto b = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  return b ? (*b)->getBuffer().str() : "<missing>";
}

// The names in `dir`, so that a test sees any temporary or backup left behind.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec, false), end; !ec && it != end; it.increment(ec))
    names.push_back(llvm::sys::path::filename(it->path()).str());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(OutputSet, CommitWritesEveryFileAndLeavesNoTemporaries) {
  TempDir dir;
  const std::string a = dir.path() + "/a.npy", b = dir.path() + "/b.npy";
  write_output_file({"--out", a}, "old a");
  OutputSet set;
  set.stage({"--out", a}, "new a");
  set.stage({"--lse", b}, "new b");
  EXPECT_EQ(slurp(a), "old a") << "staging changes no visible file";
  EXPECT_EQ(set.commit(), (std::vector<std::string>{a, b}));
  EXPECT_EQ(slurp(a), "new a");
  EXPECT_EQ(slurp(b), "new b");
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"a.npy", "b.npy"}));
}

TEST(OutputSet, AFailedCommitRestoresTheFilesItAlreadyReplaced) {
  TempDir dir;
  const std::string a = dir.path() + "/a.npy", b = dir.path() + "/b.npy", c = dir.path() + "/c.npy";
  write_output_file({"--out", a}, "old a");
  OutputSet set;
  set.stage({"--out", a}, "new a");
  set.stage({"--new", c}, "new c");
  set.stage({"--lse", b}, "new b");
  ASSERT_FALSE(llvm::sys::fs::create_directory(b)); // b becomes a directory after the paths were checked
  try {
    set.commit();
    FAIL() << "committing over a directory must fail";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--lse '" + b + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("restored"), std::string::npos) << m;
  }
  EXPECT_EQ(slurp(a), "old a") << "the replaced file is put back";
  EXPECT_FALSE(llvm::sys::fs::exists(c)) << "a file that did not exist before is removed again";
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"a.npy", "b.npy"})) << "no temporary left";
}

TEST(OutputSet, AFailedStageLeavesNothing) {
  TempDir dir;
  const std::string ok = dir.path() + "/ok.npy", missing = dir.path() + "/no/such/dir/x.npy";
  try {
    OutputSet set;
    set.stage({"--out", ok}, "abc");
    set.stage({"--lse", missing}, "def");
    FAIL() << "staging into a missing directory must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write --lse '" + missing + "'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(names_in(dir.path()).empty()) << "neither an output nor a temporary";
}

TEST(OutputSet, AnUncommittedSetLeavesNothing) {
  TempDir dir;
  {
    OutputSet set;
    set.stage({"--out", dir.path() + "/a.npy"}, "a");
    EXPECT_EQ(names_in(dir.path()).size(), 1u) << "the staged temporary";
  }
  EXPECT_TRUE(names_in(dir.path()).empty()) << "removed when the set is dropped";
}

TEST(OutputSet, ASymbolicLinkIsWrittenThroughToItsTarget) {
  TempDir dir;
  ASSERT_FALSE(llvm::sys::fs::create_directory(dir.path() + "/data"));
  const std::string target = dir.path() + "/data/o.npy", link = dir.path() + "/o.npy";
  write_output_file({"--out", target}, "old");
  ASSERT_EQ(::symlink("data/o.npy", link.c_str()), 0);
  check_output_paths({{"--out", link}});
  write_output_file({"--out", link}, "new");
  EXPECT_TRUE(llvm::sys::fs::is_symlink_file(link)) << "the link stays a link";
  EXPECT_EQ(slurp(target), "new") << "its target gets the contents";
  EXPECT_EQ(names_in(dir.path() + "/data"), std::vector<std::string>{"o.npy"});

  const std::string dangling = dir.path() + "/later.npy"; // a link to a file not yet there: created
  ASSERT_EQ(::symlink("data/later.npy", dangling.c_str()), 0);
  write_output_file({"-o", dangling}, "created");
  EXPECT_EQ(slurp(dir.path() + "/data/later.npy"), "created");
  EXPECT_TRUE(llvm::sys::fs::is_symlink_file(dangling));
}

TEST(OutputSet, AReplacedFileKeepsItsPermissions) {
  TempDir dir;
  const std::string a = dir.path() + "/a.txt";
  write_output_file({"-o", a}, "old");
  ASSERT_EQ(::chmod(a.c_str(), 0640), 0);
  write_output_file({"-o", a}, "new");
  struct stat st {};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

// Four processes commit the same pair of files again and again, each pair tagged with its writer and round;
// the parent, holding the same lock, must always find both files from one commit.
TEST(OutputSet, ConcurrentWritersLeaveAConsistentSet) {
  TempDir dir;
  const std::string o = dir.path() + "/o.npy", lse = dir.path() + "/lse.npy";
  write_output_file({"--out", o}, "start");
  write_output_file({"--lse", lse}, "start");
  constexpr int kWriters = 4, kRounds = 200;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        for (int r = 0; r < kRounds; ++r) {
          const std::string tag = std::to_string(w) + ":" + std::to_string(r);
          OutputSet set;
          set.stage({"--out", o}, tag);
          set.stage({"--lse", lse}, tag);
          set.commit();
        }
      } catch (...) {
        code = 1;
      }
      ::_exit(code); // skip gtest's and static destructors in the child
    }
    children.push_back(pid);
  }
  int checks = 0, mismatches = 0;
  std::vector<int> status(kWriters, -1); // wait status, once a writer has exited
  auto reap = [&](int options) {
    for (int w = 0; w < kWriters; ++w)
      if (status[w] == -1 && ::waitpid(children[w], &status[w], options) != children[w])
        status[w] = -1;
    return std::count(status.begin(), status.end(), -1) == 0;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!reap(WNOHANG) && std::chrono::steady_clock::now() < deadline) {
    const DirectoryLocks lock({dir.path()});
    ASSERT_TRUE(lock.all_held());
    mismatches += slurp(o) != slurp(lse);
    ++checks;
  }
  reap(0);
  for (int w = 0; w < kWriters; ++w)
    EXPECT_TRUE(WIFEXITED(status[w]) && WEXITSTATUS(status[w]) == 0) << "writer " << w << " failed";
  EXPECT_EQ(mismatches, 0) << "of " << checks << " locked reads";
  EXPECT_GT(checks, 0);
  EXPECT_EQ(slurp(o), slurp(lse));
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"lse.npy", "o.npy"}));
}

} // namespace
} // namespace kiln
