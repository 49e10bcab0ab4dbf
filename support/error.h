// kiln's two kinds of failure: a user's mistake (kiln::Error) and a bug in kiln (kiln::InternalError).
// User errors name what was expected, what came, and where (the DSL call site when there is one).
#pragma once

#include <fmt/format.h>

#include <source_location>
#include <stdexcept>
#include <string>

namespace kiln {

// Where a DSL call was made in the user's code; captured by default arguments of every DSL entry point.
struct SourceLoc {
  const char* file = "";
  unsigned line = 0;

  static SourceLoc current(std::source_location loc = std::source_location::current()) {
    return SourceLoc{loc.file_name(), static_cast<unsigned>(loc.line())};
  }
  bool known() const { return line != 0; }
  std::string str() const;  // "file.cpp:42", with the directory stripped
};

// A mistake by the user of kiln: bad kernel, bad shapes, bad options, missing driver, bad files.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A fault inside kiln itself; never the user's fault.
class InternalError : public std::logic_error {
public:
  explicit InternalError(const std::string& message) : std::logic_error("kiln internal error: " + message) {}
};

template <typename... Args> [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// Like fail(), suffixed with " (at file:line)" when the location is known.
template <typename... Args>
[[noreturn]] void fail_at(SourceLoc loc, fmt::format_string<Args...> f, Args&&... args) {
  std::string msg = fmt::format(f, std::forward<Args>(args)...);
  if (loc.known())
    msg += " (at " + loc.str() + ")";
  throw Error(msg);
}

#define KILN_INTERNAL_CHECK(cond, ...)                                                                     \
  do {                                                                                                     \
    if (!(cond))                                                                                           \
      throw ::kiln::InternalError(fmt::format("{}:{}: check `{}` failed: {}", __FILE__, __LINE__, #cond,  \
                                              fmt::format(__VA_ARGS__)));                                  \
  } while (0)

} // namespace kiln
