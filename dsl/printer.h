// The textual form of kiln IR: stable, readable, one op per line with its call site.
// It is what `kiln emit --stage=ir` shows and what IR tests check substrings of.
#pragma once

#include "dsl/ir.h"

#include <string>

namespace kiln {

[[nodiscard]] std::string print_kernel(const Kernel& k);
[[nodiscard]] std::string value_name(const Kernel& k, ValueId v); // "%acc12" or "%12"

} // namespace kiln
