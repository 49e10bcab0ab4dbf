// The fixture of the command-line tests (tests/unit/cli_*_test.cpp): a temporary working directory per test
// and `kiln` run in it as a process.
#pragma once

#include "kiln_tool_run.h"
#include "support/npy.h"

#include <gtest/gtest.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

  // Writes `values` as an f32 .npy file of `shape` in the test's directory; returns its path.
  std::string write_npy(const std::string& name, const std::vector<int64_t>& shape,
                        const std::vector<double>& values) {
    return write_file(name, serialize_npy(DType::f32, shape, values));
  }
  // An int32 .npy file (serialize_npy writes floats only): the format 1.0 header, then `values` (zeros where
  // none are given).
  std::string write_int32_npy(const std::string& name, const std::vector<int64_t>& shape,
                              const std::vector<int32_t>& values = {}) {
    std::string dims;
    int64_t n = 1;
    for (int64_t d : shape) {
      dims += std::to_string(d) + ", ";
      n *= d;
    }
    std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (" + dims + "), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    bytes += header;
    std::string data(static_cast<size_t>(n) * 4, '\0');
    if (!values.empty())
      std::memcpy(data.data(), values.data(), std::min(data.size(), values.size() * 4)); // little-endian hosts
    return write_file(name, bytes + data);
  }
  std::string write_file(const std::string& name, const std::string& bytes) {
    const std::string p = path(name);
    std::error_code ec;
    llvm::raw_fd_ostream os(p, ec);
    os << bytes;
    return p;
  }

  // Expects exit code 1 and a "kiln: error: " line containing every substring.
  void expect_error(const ToolRun& r, std::initializer_list<const char*> substrings) {
    expect_kiln_error(r, substrings);
  }

  llvm::SmallString<128> dir_;
};

} // namespace kiln::testing_support
