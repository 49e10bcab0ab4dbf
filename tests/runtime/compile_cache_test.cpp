// The compile cache: memory and disk hits, keys, corrupt entries, concurrent writers, listing and clearing.
#include "runtime/compile_cache.h"
#include "runtime_test_support.h"
#include "support/error.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>

#include <fstream>
#include <functional>
#include <set>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln::rt {
namespace {

using testing::ScratchDir;

CompileRequest request(const std::string& tag = "") {
  CompileRequest req;
  req.source = std::string(testing::kVecAddSource) + "// " + tag + "\n";
  req.kernel_name = "vec_add";
  req.arch = "sm_80";
  return req;
}

std::string read_file(const std::string& path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, false, false, true);
  EXPECT_TRUE(bool(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : "";
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(CompileCache, MissThenMemoryHitThenDiskHit) {
  KILN_SKIP_WITHOUT_NVRTC();
  ScratchDir dir;
  CompileCache cache(dir.path());
  CompiledKernel first = cache.get(request());
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_FALSE(first.cache_key.empty());
  EXPECT_TRUE(llvm::sys::fs::exists(cache.entry_path(first.cache_key)));

  CompiledKernel second = cache.get(request());
  EXPECT_EQ(cache.stats().memory_hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(second.cubin, first.cubin);

  cache.clear_memory();  // as a new process would start
  CompiledKernel third = cache.get(request());
  CacheStats s = cache.stats();
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(third.cubin, first.cubin);
  EXPECT_EQ(third.lowered_name, first.lowered_name);
  EXPECT_EQ(third.log, first.log);
  EXPECT_EQ(third.usage, first.usage);
  EXPECT_EQ(third.cache_key, first.cache_key);

  CompileCache other_process(dir.path());
  EXPECT_EQ(other_process.get(request()).cubin, first.cubin);
  EXPECT_EQ(other_process.stats().disk_hits, 1u);
  EXPECT_EQ(other_process.stats().misses, 0u);
}

TEST(CompileCache, KeyCoversSourceOptionsArchAndName) {
  KILN_SKIP_WITHOUT_NVRTC();
  CompileCache cache("");
  std::string base = cache.key_for(request());
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(cache.key_for(request()), base) << "deterministic";
  CompileRequest r = request("changed");
  EXPECT_NE(cache.key_for(r), base);
  r = request();
  r.arch = "sm_90a";
  EXPECT_NE(cache.key_for(r), base);
  r = request();
  r.options = {"-lineinfo"};
  EXPECT_NE(cache.key_for(r), base);
  r = request();
  r.fast_math = true;
  EXPECT_NE(cache.key_for(r), base);
  r = request();
  r.want_ptx = true;
  EXPECT_EQ(cache.key_for(r), base) << "an entry with PTX serves requests without it";
}

TEST(CompileCache, EntryWithoutPtxIsRecompiledWhenPtxIsWanted) {
  KILN_SKIP_WITHOUT_NVRTC();
  ScratchDir dir;
  CompileCache cache(dir.path());
  EXPECT_TRUE(cache.get(request()).ptx.empty());
  CompileRequest r = request();
  r.want_ptx = true;
  EXPECT_FALSE(cache.get(r).ptx.empty());
  EXPECT_EQ(cache.stats().misses, 2u);
  cache.clear_memory();
  EXPECT_FALSE(cache.get(request()).ptx.empty()) << "the rewritten entry carries PTX";
  EXPECT_EQ(cache.stats().disk_hits, 1u);
}

// Each corruption must be detected, recompiled and rewritten with a valid entry.
void expect_corruption_recovered(const std::function<std::string(std::string)>& corrupt, const char* what) {
  ScratchDir dir;
  CompiledKernel good;
  std::string path;
  {
    CompileCache cache(dir.path());
    good = cache.get(request(what));
    path = cache.entry_path(good.cache_key);
  }
  std::string original = read_file(path);
  write_file(path, corrupt(original));
  ASSERT_NE(read_file(path), original) << what;

  CompileCache cache(dir.path());
  CompiledKernel again = cache.get(request(what));
  CacheStats s = cache.stats();
  EXPECT_EQ(s.corrupt_entries, 1u) << what;
  EXPECT_EQ(s.disk_hits, 0u) << what;
  EXPECT_EQ(s.misses, 1u) << what;
  EXPECT_EQ(again.cubin, good.cubin) << what;
  std::string problem;
  EXPECT_TRUE(parse_cache_entry(read_file(path), good.cache_key, &problem).has_value())
      << what << ": entry not rewritten: " << problem;
}

TEST(CompileCache, CorruptEntriesAreRecompiledAndRewritten) {
  KILN_SKIP_WITHOUT_NVRTC();
  expect_corruption_recovered([](std::string s) { return s.substr(0, s.size() / 2); }, "truncated payload");
  expect_corruption_recovered([](std::string s) { return s.substr(0, 10); }, "truncated header");
  expect_corruption_recovered([](std::string) { return std::string(); }, "empty file");
  expect_corruption_recovered(
      [](std::string s) {
        size_t at = s.size() - 100;  // inside the payload
        s.replace(at, 1, 1, static_cast<char>(s.at(at) ^ 0x5a));
        return s;
      },
      "flipped payload byte");
  expect_corruption_recovered(
      [](std::string s) {
        s.replace(0, 1, "X");
        return s;
      },
      "bad magic");
  expect_corruption_recovered(
      [](std::string s) {
        s.replace(20, 1, 1, static_cast<char>(s.at(20) ^ 0x01));  // the first field length
        return s;
      },
      "bad length");
  expect_corruption_recovered([](std::string s) { return s + "trailing"; }, "trailing bytes");
}

TEST(CompileCache, ParseRejectsEntriesForAnotherKey) {
  CompiledKernel k;
  k.kernel_name = "k";
  k.cubin = "\x7f" "ELF-not-really";
  std::string bytes = serialize_cache_entry("key-a", k);
  std::string problem;
  EXPECT_TRUE(parse_cache_entry(bytes, "key-a", &problem).has_value()) << problem;
  EXPECT_FALSE(parse_cache_entry(bytes, "key-b", &problem).has_value());
  EXPECT_NE(problem.find("key-a"), std::string::npos) << problem;
}

TEST(CompileCache, ConcurrentProcessesCompilingTheSameKernelAllSucceed) {
  KILN_SKIP_WITHOUT_NVRTC();
  ScratchDir dir;
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      while (::read(gate[0], &c, 1) > 0) {  // returns 0 once the parent closes the gate: all start together
      }
      int code = 0;
      try {
        CompileCache cache(dir.path());
        CompiledKernel k = cache.get(request("concurrent"));
        code = testing::starts_with_elf_magic(k.cubin) && cache.stats().write_failures == 0 ? 0 : 2;
      } catch (...) {
        code = 1;
      }
      ::_exit(code);  // skip gtest's and static destructors in the child
    }
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status)) << "child " << pid << " did not exit normally";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child " << pid;
  }
  CompileCache cache(dir.path());
  std::vector<CacheEntryInfo> entries = cache.list();
  ASSERT_EQ(entries.size(), 1u) << "one entry, and no temporaries left behind";
  EXPECT_TRUE(entries[0].valid) << entries[0].problem;
  cache.get(request("concurrent"));
  EXPECT_EQ(cache.stats().disk_hits, 1u);
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(dir.path() + "/compile", ec), end; it != end && !ec; it.increment(ec))
    ++files;
  EXPECT_EQ(files, 1) << "temporary files must be renamed or removed";
}

TEST(CompileCache, ListAndClear) {
  KILN_SKIP_WITHOUT_NVRTC();
  ScratchDir dir;
  CompileCache cache(dir.path());
  cache.get(request("a"));
  CompileRequest b = request("b");
  b.arch = "sm_90a";
  cache.get(b);
  write_file(dir.path() + "/compile/0123.kcubin", "garbage");
  std::vector<CacheEntryInfo> entries = cache.list();
  ASSERT_EQ(entries.size(), 3u);
  int valid = 0;
  std::set<std::string> archs;
  for (const auto& e : entries) {
    if (!e.valid) {
      EXPECT_FALSE(e.problem.empty());
      continue;
    }
    ++valid;
    EXPECT_EQ(e.kernel_name, "vec_add");
    EXPECT_GT(e.size_bytes, 0u);
    EXPECT_GE(e.age_seconds, 0.0);
    EXPECT_TRUE(e.age_seconds < 3600.0) << "an entry written just now reports its age: " << e.age_seconds;
    archs.insert(e.arch);
  }
  EXPECT_EQ(valid, 2);
  EXPECT_EQ(archs, (std::set<std::string>{"sm_80", "sm_90a"}));
  EXPECT_EQ(cache.clear(), 3u);
  EXPECT_TRUE(cache.list().empty());
  cache.get(request("a"));
  EXPECT_EQ(cache.stats().misses, 3u) << "clear() also empties memory";
}

TEST(CompileCache, UnwritableDirectoryStillCompiles) {
  KILN_SKIP_WITHOUT_NVRTC();
  ScratchDir dir;
  std::string file = dir.path() + "/not-a-directory";
  write_file(file, "x");
  CompileCache cache(file);  // <file>/compile cannot be created
  CompiledKernel k = cache.get(request("unwritable"));
  EXPECT_TRUE(testing::starts_with_elf_magic(k.cubin));
  EXPECT_EQ(cache.stats().write_failures, 1u);
}

TEST(CompileCache, DefaultDirectoryFollowsEnvironment) {
  std::string saved_kiln = std::getenv("KILN_CACHE_DIR") ? std::getenv("KILN_CACHE_DIR") : "";
  std::string saved_xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  ::setenv("KILN_CACHE_DIR", "/tmp/a", 1);
  ::setenv("XDG_CACHE_HOME", "/tmp/b", 1);
  EXPECT_EQ(CompileCache::default_dir(), "/tmp/a");
  ::unsetenv("KILN_CACHE_DIR");
  EXPECT_EQ(CompileCache::default_dir(), "/tmp/b/kiln");
  ::unsetenv("XDG_CACHE_HOME");
  if (const char* home = std::getenv("HOME")) {
    EXPECT_EQ(CompileCache::default_dir(), std::string(home) + "/.cache/kiln");
  }
  if (!saved_kiln.empty())
    ::setenv("KILN_CACHE_DIR", saved_kiln.c_str(), 1);
  if (!saved_xdg.empty())
    ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
}

} // namespace
} // namespace kiln::rt
