#include "dsl/config.h"

#include "support/error.h"

#include <iterator>

namespace kiln {

int64_t Config::get(const std::string& name, std::source_location where) const {
  auto it = params.find(name);
  if (it == params.end()) {
    std::string names;
    for (const auto& [k, v] : params)
      names += (names.empty() ? "" : ", ") + k;
    fail_at(SourceLoc::current(where), "config has no parameter '{}'; it has {} (config: {})", name,
            names.empty() ? "no parameters" : names, str());
  }
  return it->second;
}

int64_t Config::get_or(const std::string& name, int64_t fallback) const {
  auto it = params.find(name);
  return it == params.end() ? fallback : it->second;
}

std::string Config::str() const {
  std::string out;
  append_str(out);
  return out;
}

void Config::append_str(std::string& out) const {
  auto to = std::back_inserter(out);
  for (const auto& [k, v] : params)
    fmt::format_to(to, "{}={} ", k, v);
  fmt::format_to(to, "num_warps={} num_stages={}", num_warps, num_stages);
}

} // namespace kiln
