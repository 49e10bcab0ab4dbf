#include "runtime/shared_library.h"

namespace kiln::rt {

OpenedLibrary open_first(const std::vector<std::string>& candidates) {
  OpenedLibrary out;
  for (const std::string& candidate : candidates) {
    out.handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (out.handle) {
      out.path = candidate;
      return out;
    }
    const char* e = dlerror();
    out.failures.push_back({candidate, e ? e : ""});
  }
  return out;
}

std::string SymbolResolver::missing() const {
  std::string list;
  for (const std::string& m : missing_)
    list += (list.empty() ? "" : ", ") + m;
  return list;
}

} // namespace kiln::rt
