#include "dsl/param_def.h"

#include <fmt/format.h>

#include <utility>

namespace kiln {

ParamDef ParamDef::flag(std::string name, int64_t default_value, std::string help) {
  return {std::move(name), default_value, std::move(help), ParamKind::Flag, 0, 1};
}

ParamDef ParamDef::choice(std::string name, int64_t default_value, std::string help, int64_t min,
                          int64_t max) {
  return {std::move(name), default_value, std::move(help), ParamKind::Choice, min, max};
}

ParamDef ParamDef::power_of_two(std::string name, int64_t default_value, std::string help, int64_t min,
                                int64_t max) {
  return {std::move(name), default_value, std::move(help), ParamKind::PowerOfTwo, min, max};
}

ParamDef ParamDef::count(std::string name, int64_t default_value, std::string help, int64_t min,
                         int64_t max) {
  return {std::move(name), default_value, std::move(help), ParamKind::Count, min, max};
}

bool ParamDef::accepts(int64_t value) const {
  if (value < min || value > max)
    return false;
  return kind != ParamKind::PowerOfTwo || (value > 0 && (value & (value - 1)) == 0);
}

std::string ParamDef::expected() const {
  switch (kind) {
  case ParamKind::Flag:
    return "0 or 1";
  case ParamKind::Choice:
    return fmt::format("one of the codes {} to {} ({})", min, max, help);
  case ParamKind::PowerOfTwo:
    return fmt::format("a power of two from {} to {}", min, max);
  case ParamKind::Count:
    if (min == std::numeric_limits<int64_t>::min() && max == std::numeric_limits<int64_t>::max())
      return "any integer";
    return fmt::format("an integer from {} to {}", min, max);
  }
  return "";
}

} // namespace kiln
