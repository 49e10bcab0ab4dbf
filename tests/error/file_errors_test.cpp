// Bad files are clear errors naming the file, what was expected and what came: .npy inputs that are not
// regular files (never opened when they would block or never end), headers declaring more data than the file
// holds, output paths that cannot be written, and cache directories that cannot be listed.
#include "error_test_support.h"
#include "runtime/cache_dir.h"
#include "runtime/compile_cache.h"
#include "runtime/tuning_cache.h"
#include "support/npy.h"
#include "support/output_set.h"
#include "temp_dir.h"

#include <gtest/gtest.h>
#include <llvm/Support/Path.h>

#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {
namespace {

using kiln_test::expect_mentions;
using kiln_test::user_error;
using testing_support::TempDir;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A format 1.0 .npy header with `dict`, padded to 64 bytes, then `data`.
std::string npy_with_header(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

// ---- .npy inputs ----

TEST(FileErrors, NpyInputThatIsNotARegularFile) {
  TempDir dir;
  expect_mentions(user_error([] { read_npy("/dev/zero"); }),
                  {"'/dev/zero'", "a character device", "not a regular file"});
  const std::string fifo = dir.path() + "/q.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_mentions(user_error([&] { read_npy(fifo); }), {"'" + fifo + "'", "a FIFO", "not a regular file"});
  expect_mentions(user_error([&] { read_npy(dir.path()); }),
                  {dir.path(), "a directory", "not a regular file"});
  const std::string link = dir.path() + "/zero.npy";
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  expect_mentions(user_error([&] { read_npy(link); }), {"'" + link + "'", "a character device"});
}

TEST(FileErrors, NpyHeaderDeclaringMoreDataThanTheFileHolds) {
  TempDir dir;
  const std::string f8 = dir.path() + "/huge_f8.npy", f4 = dir.path() + "/huge_f4.npy";
  // 2^61 float64 elements: 2^64 bytes, which wraps a 64-bit size to 0.
  write_bytes(f8,
              npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }",
                              std::string(16, '\0')));
  expect_mentions(
      user_error([&] { read_npy(f8); }),
      {f8, "(2305843009213693952,)", "float64", "more than 2^64 data bytes", "holds 16", "128-byte header"});
  write_bytes(f4,
              npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2305843009213693952,), }",
                              std::string(16, '\0')));
  expect_mentions(user_error([&] { read_npy(f4); }),
                  {f4, "(2305843009213693952,)", "float32", "9223372036854775808 data bytes", "holds 16"});
  std::string in_memory = npy_with_header(
      "{'descr': '<f8', 'fortran_order': False, 'shape': (1073741824, 1073741824, 1073741824), }", "");
  expect_mentions(user_error([&] { parse_npy(in_memory, "mem.npy"); }),
                  {"'mem.npy'", "(1073741824, 1073741824, 1073741824)", "more than 2^64", "holds 0"});
}

// A float32 .npy of `shape` as long as its header says, `data_bytes` of zeros in a sparse file (no disk
// space). False where the file system cannot make one.
bool write_sparse_npy(const std::string& path, const std::string& shape, uint64_t data_bytes) {
  const std::string header =
      npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", "");
  write_bytes(path, header);
  struct stat st {};
  if (::truncate(path.c_str(), static_cast<off_t>(header.size() + data_bytes)) != 0 ||
      ::stat(path.c_str(), &st) != 0)
    return false;
  return st.st_blocks * 512 < (int64_t{1} << 20);
}

// 64 GiB declared, and held: the caller's check sees the header before any data is read or any memory is
// sized for it, so refusing it costs nothing.
TEST(FileErrors, NpyHeaderIsCheckedBeforeTheDataIsRead) {
  TempDir dir;
  const std::string f = dir.path() + "/q.npy";
  if (!write_sparse_npy(f, "(1, 1, 268435456, 64)", uint64_t{64} << 30))
    GTEST_SKIP() << "no sparse files here";
  std::vector<int64_t> seen;
  size_t values_seen = 1;
  expect_mentions(user_error([&] {
                    read_npy(f, [&](const NpyArray& header) {
                      seen = header.shape;
                      values_seen = header.values.size();
                      fail("'{}': shape {} does not match the problem", f, header.shape_str());
                    });
                  }),
                  {f, "(1, 1, 268435456, 64) does not match the problem"});
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 1, 268435456, 64}));
  EXPECT_EQ(values_seen, 0u) << "the header comes before the data";
}

TEST(FileErrors, NpyHeaderLongerThanAnyNumPyWrites) {
  std::string bytes = "\x93NUMPY\x02";
  bytes += '\0';
  bytes += std::string("\x00\x00\x00\x40", 4); // a 1 GiB header
  expect_mentions(user_error([&] { parse_npy(bytes, "big_header.npy"); }),
                  {"'big_header.npy'", "1073741824 bytes long", "at most 1048576"});
}

// ---- output paths ----

TEST(FileErrors, OutputPathsThatCannotBeWritten) {
  TempDir dir;
  const std::string d = dir.path();
  write_bytes(d + "/in.npy", "x");
  expect_mentions(user_error([&] {
                    check_output_paths({{"--lse", d}});
                  }),
                  {"--lse", "'" + d + "'", "is a directory", "expected the path of a file"});
  expect_mentions(user_error([&] {
                    check_output_paths({{"--lse", d + "/new/"}});
                  }),
                  {"--lse", d + "/new/", "names a directory"});
  expect_mentions(user_error([&] {
                    check_output_paths({{"--out", d + "/missing/o.npy"}});
                  }),
                  {"--out", d + "/missing/o.npy", "its directory '" + d + "/missing' does not exist"});
  expect_mentions(user_error([&] {
                    check_output_paths({{"--out", d + "/in.npy/o.npy"}});
                  }),
                  {"--out", "'" + d + "/in.npy' is a regular file, not a directory"});
  expect_mentions(user_error([] {
                    check_output_paths({{"-o", "/dev/null"}});
                  }),
                  {"-o", "'/dev/null'", "a character device", "only as regular files"});
  expect_mentions(user_error([&] {
                    check_output_paths({{"--out", d + "/o.npy"}, {"--lse", d + "/./o.npy"}});
                  }),
                  {"--out and --lse name the same file"});
  const std::string same_dir_spelled_otherwise = d + "/../" + llvm::sys::path::filename(d).str();
  expect_mentions(
      user_error([&] {
        check_output_paths({{"--dq", d + "/g.npy"}}, {{"--dout", same_dir_spelled_otherwise + "/g.npy"}});
      }),
      {"refusing to overwrite the input", "(--dout)", "another --dq path"});
  const std::string link = d + "/link.npy";
  ASSERT_EQ(::symlink("in.npy", link.c_str()), 0);
  expect_mentions(user_error([&] {
                    check_output_paths({{"--out", link}}, {{"--q", d + "/in.npy"}});
                  }),
                  {"refusing to overwrite the input", "(--q)"});
  const std::string loop = d + "/loop.npy";
  ASSERT_EQ(::symlink("loop.npy", loop.c_str()), 0);
  expect_mentions(user_error([&] {
                    check_output_paths({{"--out", loop}});
                  }),
                  {"--out", "'" + loop + "'", "symbolic link", "more than 40 links"});
}

// ---- cache directories ----

TEST(FileErrors, CacheDirectoryThatIsARegularFile) {
  TempDir dir;
  const std::string root = dir.path() + "/cache";
  write_bytes(root, "not a directory");
  for (auto* what : {"compile list", "compile clear", "tune list", "tune clear"}) {
    const std::string m = user_error([&] {
      const std::string w = what;
      rt::CompileCache compile(root);
      rt::TuningCache tune(root);
      if (w == "compile list")
        compile.list();
      else if (w == "compile clear")
        compile.clear();
      else if (w == "tune list")
        tune.list();
      else
        tune.clear();
    });
    expect_mentions(m, {"'" + root + "' is a regular file, not a directory", "KILN_CACHE_DIR"});
  }
  ASSERT_EQ(::unlink(root.c_str()), 0);
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  write_bytes(root + "/compile", "x");
  expect_mentions(user_error([&] { rt::list_cache_dir(root + "/compile"); }),
                  {"'" + root + "/compile'", "it is a regular file, not a directory", "KILN_CACHE_DIR"});
}

TEST(FileErrors, CacheDirectoryThatCannotBeRead) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root reads every directory";
  TempDir dir;
  const std::string compile = dir.path() + "/compile";
  ASSERT_EQ(::mkdir(compile.c_str(), 0), 0);
  const std::string m = user_error([&] { rt::CompileCache(dir.path()).list(); });
  ::chmod(compile.c_str(), 0700);
  expect_mentions(m, {"'" + compile + "'", "ermission denied", "KILN_CACHE_DIR"});
}

} // namespace
} // namespace kiln
