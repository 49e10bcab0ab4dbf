// Reading generated CUDA in codegen tests: how often a piece of text occurs.
#pragma once

#include <string>

namespace kiln_test {

// Whether `what` occurs in `text`.
inline bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// How many times `what` starts in `s` (overlapping occurrences count).
inline int occurrences(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

} // namespace kiln_test
