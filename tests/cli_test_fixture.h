// The fixture of the command-line tests (tests/unit/cli_*_test.cpp): a temporary working directory per test
// and `kiln` run in it as a process.
#pragma once

#include "kiln_tool_run.h"

#include <gtest/gtest.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>

#include <map>
#include <string>
#include <vector>

namespace kiln::testing_support {

class CliTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("kiln-cli-test", dir_)); }
  void TearDown() override { llvm::sys::fs::remove_directories(dir_); }

  std::string path(const std::string& name) const { return (dir_ + "/" + name).str(); }

  // Runs kiln with `args`; the environment is this process's without KILN_INTERPRET, plus `env`.
  ToolRun kiln(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    return run_kiln(dir_.str().str(), args, env);
  }
  // Runs another command-line program (a user's tool on kiln::tool_main) the same way.
  ToolRun tool(const std::string& program, const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env = {}) {
    return run_tool(program, dir_.str().str(), args, env);
  }

  // Expects exit code 1 and a "kiln: error: " line containing every substring.
  void expect_error(const ToolRun& r, std::initializer_list<const char*> substrings) {
    expect_kiln_error(r, substrings);
  }

  llvm::SmallString<128> dir_;
};

} // namespace kiln::testing_support
