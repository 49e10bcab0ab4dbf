#include "support/env.h"

#include "support/error.h"

#include <llvm/ADT/StringRef.h>

#include <cstdlib>

namespace kiln {

namespace {
std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    return std::nullopt;
  return std::string(v);
}
} // namespace

std::optional<std::string> env_choice(const char* name, std::initializer_list<std::string_view> accepted) {
  std::optional<std::string> v = env_value(name);
  if (!v)
    return std::nullopt;
  std::string list;
  for (std::string_view a : accepted) {
    if (*v == a)
      return v;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  fail("environment variable {}='{}' is not accepted; expected one of: {} (or unset it for the default)",
       name, *v, list);
}

std::optional<int64_t> env_integer(const char* name, int64_t min, int64_t max, const char* what) {
  std::optional<std::string> v = env_value(name);
  if (!v)
    return std::nullopt;
  long long n = 0;
  if (llvm::StringRef(*v).getAsInteger(10, n) || n < min || n > max)
    fail("environment variable {}='{}' is not accepted; expected {}, a base-10 integer from {} to {} (or "
         "unset it "
         "for the default)",
         name, *v, what, min, max);
  return static_cast<int64_t>(n);
}

} // namespace kiln
