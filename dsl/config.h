// A kernel's compile-time configuration: named integer parameters (tile sizes, flags, variants)
// plus the launch shape knobs num_warps and num_stages.
#pragma once

#include <cstdint>
#include <map>
#include <source_location>
#include <string>

namespace kiln {

struct Config {
  std::map<std::string, int64_t> params; // ordered, so that printing and hashing are stable
  int num_warps = 4;
  int num_stages = 2;

  // The value of a parameter; throws kiln::Error naming the parameter, the parameters there are and
  // the caller's line when it is absent.
  int64_t get(const std::string& name, std::source_location where = std::source_location::current()) const;
  int64_t get_or(const std::string& name, int64_t fallback) const;
  Config& set(const std::string& name, int64_t value) {
    params[name] = value;
    return *this;
  }

  std::string str() const; // "BLOCK_M=128 BLOCK_N=64 num_warps=4 num_stages=2"
  void append_str(std::string& out) const; // str() appended to `out`, without a string of its own
  bool operator==(const Config& o) const {
    return params == o.params && num_warps == o.num_warps && num_stages == o.num_stages;
  }
};

} // namespace kiln
