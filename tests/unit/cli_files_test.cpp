// The files `kiln` reads and writes, run as a process: an input that is not a regular file is refused (not
// an out-of-memory abort), output paths are checked before the run so that a bad one changes no file, a
// symbolic link output is written through to its target, and `kiln cache` neither hangs on a FIFO entry nor
// reports "0 entries" for a cache path it cannot list.
#include "cli_test_fixture.h"
#include "support/npy.h"
#include "support/output_set.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::expect_kiln_error;
using testing_support::slurp;
using testing_support::ToolRun;

class CliFilesTest : public CliTest {
protected:
  // A 1x1x16x16 problem in the interpreter, with `extra` arguments; Q, K, V from files when asked.
  ToolRun attention(std::vector<std::string> extra, bool with_inputs = true) {
    std::vector<std::string> args = {"attention", "--interpret", "--batch", "1",          "--heads",
                                     "1",         "--seq-q",     "16",      "--head-dim", "16"};
    if (with_inputs) {
      for (const char* name : {"q", "k", "v"})
        if (!llvm::sys::fs::exists(path(std::string(name) + ".npy")))
          write_output_file({"test input", path(std::string(name) + ".npy")},
                            serialize_npy(DType::f32, {1, 1, 16, 16}, std::vector<double>(256, 0.5)));
      for (const char* name : {"q", "k", "v"})
        if (std::find(extra.begin(), extra.end(), std::string("--") + name) == extra.end())
          extra.insert(extra.end(), {std::string("--") + name, path(std::string(name) + ".npy")});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return kiln(args);
  }

  // expect_error with substrings built at run time.
  void expect_error_naming(const ToolRun& r, const std::vector<std::string>& substrings) {
    expect_kiln_error(r, {});
    for (const std::string& s : substrings)
      EXPECT_NE(r.err.find(s), std::string::npos) << "missing '" << s << "' in: " << r.err;
  }
};

TEST_F(CliFilesTest, AnInputThatIsNotARegularFileIsRefused) {
  expect_error_naming(attention({"--q", "/dev/zero"}),
                      {"'/dev/zero'", "a character device", "not a regular file"});
  ASSERT_EQ(::mkfifo(path("k_fifo.npy").c_str(), 0600), 0);
  expect_error_naming(attention({"--k", path("k_fifo.npy")}),
                      {path("k_fifo.npy"), "a FIFO", "not a regular file"});
}

// Q's header declares 64 GiB (a sparse file: no disk space) for a 1 x 1 x 16 x 16 problem: refused from the
// header, at once, where kiln used to read the data first and die with a bare "out of host memory".
TEST_F(CliFilesTest, AnInputWhoseHeaderDoesNotMatchIsRefusedBeforeItsDataIsRead) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 268435456, 64), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  write_output_file({"test input", path("big_q.npy")}, bytes + header);
  struct stat st {};
  const int64_t file_bytes = static_cast<int64_t>(bytes.size() + header.size()) + (int64_t{64} << 30);
  ASSERT_EQ(::truncate(path("big_q.npy").c_str(), static_cast<off_t>(file_bytes)), 0);
  ASSERT_EQ(::stat(path("big_q.npy").c_str(), &st), 0);
  if (st.st_blocks * 512 >= (int64_t{1} << 20))
    GTEST_SKIP() << "no sparse files here";
  const auto start = std::chrono::steady_clock::now();
  expect_error_naming(attention({"--q", path("big_q.npy")}),
                      {"big_q.npy' (Q): shape (1, 1, 268435456, 64) does not match the problem",
                       "expected (1, 1, 16, 16)"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST_F(CliFilesTest, ABadOutputPathIsRefusedBeforeTheRunAndChangesNoFile) {
  write_output_file({"test input", path("o.npy")}, "existing O");
  ASSERT_FALSE(llvm::sys::fs::create_directory(path("some_directory")));
  expect_error_naming(attention({"--out", path("o.npy"), "--lse", path("some_directory") + "/"}),
                      {"--lse", "some_directory/'", "names a directory"});
  expect_error_naming(attention({"--out", path("o.npy"), "--lse", path("some_directory")}),
                      {"--lse", "some_directory'", "is a directory", "expected the path of a file"});
  expect_error_naming(attention({"--out", path("o.npy"), "--lse", path("no_such_dir/lse.npy")}),
                      {"--lse", "its directory '" + path("no_such_dir") + "' does not exist"});
  EXPECT_EQ(slurp(path("o.npy")), "existing O") << "O is untouched when LSE cannot be written";
}

TEST_F(CliFilesTest, ASymbolicLinkOutputIsWrittenThroughToItsTarget) {
  ASSERT_FALSE(llvm::sys::fs::create_directory(path("data")));
  write_output_file({"test input", path("data/o.npy")}, "old");
  ASSERT_EQ(::symlink("data/o.npy", path("o_link.npy").c_str()), 0);
  ToolRun r = attention({"--out", path("o_link.npy")}, /*with_inputs=*/false);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(llvm::sys::fs::is_symlink_file(path("o_link.npy"))) << "the link stays";
  EXPECT_EQ(read_npy(path("data/o.npy")).shape, (std::vector<int64_t>{1, 1, 16, 16}));

  ASSERT_EQ(::symlink("data/k.cu", path("k_link.cu").c_str()), 0);
  ToolRun e = kiln({"emit", "vector_add", "--stage", "cuda", "-o", path("k_link.cu")});
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_TRUE(llvm::sys::fs::is_symlink_file(path("k_link.cu")));
  EXPECT_NE(slurp(path("data/k.cu")).find("__global__"), std::string::npos);
}

TEST_F(CliFilesTest, EmitRefusesAnOutputInAMissingDirectoryBeforeCompiling) {
  expect_error_naming(kiln({"emit", "vector_add", "--stage", "cuda", "-o", path("missing/k.cu")}),
                      {"-o", "its directory '" + path("missing") + "' does not exist"});
}

TEST_F(CliFilesTest, CacheListShowsEntriesThatAreNotRegularFilesWithoutOpeningThem) {
  const std::map<std::string, std::string> env = {{"KILN_CACHE_DIR", path("cache")}};
  ASSERT_FALSE(llvm::sys::fs::create_directories(path("cache/compile")));
  ASSERT_FALSE(llvm::sys::fs::create_directories(path("cache/tune")));
  ASSERT_EQ(::mkfifo(path("cache/compile/fifo.kcubin").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("/dev/zero", path("cache/compile/zero.kcubin").c_str()), 0);
  ASSERT_EQ(::mkfifo(path("cache/tune/fifo.json").c_str(), 0600), 0);
  ToolRun r = kiln({"cache", "list"}, env);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 entries"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a FIFO, not a regular file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a symbolic link, not a regular file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 file(s)"), std::string::npos) << r.out;
  ToolRun c = kiln({"cache", "clear"}, env);
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("removed 2 compile cache file(s)"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("and 1 autotune result(s)"), std::string::npos) << c.out;
}

TEST_F(CliFilesTest, CacheListAndClearOnAPathThatIsNotADirectoryAreErrors) {
  write_output_file({"test input", path("cache")}, "a regular file");
  const std::map<std::string, std::string> env = {{"KILN_CACHE_DIR", path("cache")}};
  for (const char* action : {"list", "clear"})
    expect_error_naming(kiln({"cache", action}, env),
                        {"'" + path("cache") + "' is a regular file, not a directory", "KILN_CACHE_DIR"});
}

} // namespace
} // namespace kiln
