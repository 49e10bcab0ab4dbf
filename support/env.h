// kiln's environment variables (KILN_INTERPRET, KILN_AUTOTUNE, KILN_LOG, KILN_DEVICE) read in one way: unset
// or empty means the default, an accepted value is returned, and anything else is a kiln::Error naming the
// variable, the values it accepts and what it holds, rather than being silently ignored.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// `name`'s value when it is one of `accepted` (compared exactly); nullopt when unset or empty.
std::optional<std::string> env_choice(const char* name, std::initializer_list<std::string_view> accepted);

// `name`'s value as a base-10 integer from `min` to `max` (`what` says what it counts, for the message);
// nullopt when unset or empty.
std::optional<int64_t> env_integer(const char* name, int64_t min, int64_t max, const char* what);

} // namespace kiln
