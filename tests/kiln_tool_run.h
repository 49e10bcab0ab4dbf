// Running the built `kiln` binary (KILN_TOOL_PATH), or another program on kiln::tool_main, as a process from
// a test: its exit code, stdout and stderr, with this process's environment minus KILN_INTERPRET plus what
// the test adds. Shared by the CLI tests that need no GPU (tests/unit) and those that do (tests/gpu).
#pragma once

#include <gtest/gtest.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/Optional.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>

#include <cstdlib>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace kiln::testing_support {

struct ToolRun {
  int rc = -1;
  std::string out, err;
};

inline std::string slurp(llvm::StringRef path) {
  auto b = llvm::MemoryBuffer::getFile(path);
  return b ? (*b)->getBuffer().str() : std::string();
}

// The kiln binary: $KILN_TOOL when set (scripts/gpu_check.sh sets it beside the test binaries it is
// given, which on a GPU machine are not where they were built), else the one this build made.
inline std::string kiln_tool_path() {
  const char* e = std::getenv("KILN_TOOL");
  return e && *e ? std::string(e) : std::string(KILN_TOOL_PATH);
}

// tests/install/my_kiln.cpp as this build made it (a user's tool on kiln::tool_main): $KILN_USER_TOOL when
// set (scripts/gpu_check.sh sets it beside the test binaries), else KILN_USER_TOOL_PATH.
inline std::string user_tool_path() {
  const char* e = std::getenv("KILN_USER_TOOL");
  return e && *e ? std::string(e) : std::string(KILN_USER_TOOL_PATH);
}

// tests/tutorial_kernels_tool.cpp (the tutorials' kernels in a user's tool): $KILN_TUTORIAL_TOOL when set
// (scripts/gpu_check.sh sets it beside the test binaries), else KILN_TUTORIAL_TOOL_PATH.
inline std::string tutorial_tool_path() {
  const char* e = std::getenv("KILN_TUTORIAL_TOOL");
  return e && *e ? std::string(e) : std::string(KILN_TUTORIAL_TOOL_PATH);
}

// Runs the command-line program `tool` (kiln, or a user's tool on kiln::tool_main) with `args`; its output
// goes through files in `scratch_dir`.
inline ToolRun run_tool(const std::string& tool, const std::string& scratch_dir,
                        const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    llvm::StringRef kv(*e);
    std::string key = kv.split('=').first.str();
    if (key != "KILN_INTERPRET" && !env.count(key))
      env_strings.push_back(kv.str());
  }
  for (const auto& [k, v] : env)
    env_strings.push_back(k + "=" + v);
  std::vector<llvm::StringRef> argv = {tool}, envp;
  for (const std::string& a : args)
    argv.push_back(a);
  for (const std::string& e : env_strings)
    envp.push_back(e);
  const std::string out = scratch_dir + "/stdout.txt", err = scratch_dir + "/stderr.txt";
  llvm::sys::fs::remove(out); // the redirects do not truncate an existing file
  llvm::sys::fs::remove(err);
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(out),
                                                 llvm::StringRef(err)};
  ToolRun r;
  r.rc =
      llvm::sys::ExecuteAndWait(tool, argv, llvm::ArrayRef<llvm::StringRef>(envp), redirects, 600);
  r.out = slurp(out);
  r.err = slurp(err);
  if (r.rc < 0 && !llvm::sys::fs::exists(tool))
    r.err = "kiln_tool_run: no program at '" + tool + "' (for kiln, set KILN_TOOL)\n" + r.err;
  return r;
}

// Runs kiln with `args`; its output goes through files in `scratch_dir`.
inline ToolRun run_kiln(const std::string& scratch_dir, const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& env = {}) {
  return run_tool(kiln_tool_path(), scratch_dir, args, env);
}

// Expects exit code 1 and a "kiln: error: " line containing every substring.
inline void expect_kiln_error(const ToolRun& r, std::initializer_list<const char*> substrings) {
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("kiln: error: "), std::string::npos) << r.err;
  for (const char* s : substrings)
    EXPECT_NE(r.err.find(s), std::string::npos) << "missing '" << s << "' in: " << r.err;
}

} // namespace kiln::testing_support
