#include "dsl/config.h"

#include "support/error.h"

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
  for (const auto& [k, v] : params)
    out += fmt::format("{}={} ", k, v);
  out += fmt::format("num_warps={} num_stages={}", num_warps, num_stages);
  return out;
}

} // namespace kiln
