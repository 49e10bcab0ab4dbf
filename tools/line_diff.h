// A unified diff of two texts by lines (longest common subsequence after trimming the common prefix and
// suffix), for `kiln compare-loads --diff`. No external diff program needed.
#pragma once

#include <string>
#include <string_view>

namespace kiln::cli {

// "--- a\n+++ b\n@@ -l,n +l,n @@\n ..." with `context` unchanged lines around each change; "" when equal.
std::string unified_line_diff(std::string_view a, std::string_view b, std::string_view a_name,
                              std::string_view b_name, int context = 3);

} // namespace kiln::cli
