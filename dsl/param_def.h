// A kernel's compile-time parameter as its KernelDef declares it: name, default, help, and the values it
// takes (its kind and range). KernelDef::check reads these to refuse a config before any work is done.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace kiln {

enum class ParamKind {
  Flag,       // 0 or 1
  Choice,     // an integer code from min to max, each naming a variant (the help says which)
  PowerOfTwo, // a power of two from min to max (tile sizes)
  Count,      // any integer from min to max
};

// {name, default, help} alone declares a Count that takes any integer; the shipped kernels declare what each
// parameter takes through the named constructors.
struct ParamDef {
  std::string name;
  int64_t default_value = 0;
  std::string help;
  ParamKind kind = ParamKind::Count;
  int64_t min = std::numeric_limits<int64_t>::min(), max = std::numeric_limits<int64_t>::max();

  static ParamDef flag(std::string name, int64_t default_value, std::string help);
  static ParamDef choice(std::string name, int64_t default_value, std::string help, int64_t min, int64_t max);
  static ParamDef power_of_two(std::string name, int64_t default_value, std::string help, int64_t min,
                               int64_t max);
  static ParamDef count(std::string name, int64_t default_value, std::string help, int64_t min, int64_t max);

  bool accepts(int64_t value) const;
  // What the parameter takes, for messages: "0 or 1", "a power of two from 16 to 256", "an integer from 1 to
  // 32".
  std::string expected() const;
};

} // namespace kiln
