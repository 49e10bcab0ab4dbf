#include "tools/line_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kiln::cli {
namespace {

std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string_view::npos)
      end = s.size();
    lines.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

struct Edit {
  char op; // ' ', '-', '+'
  std::string_view line;
};

// Edits turning a[lo_a, hi_a) into b[lo_b, hi_b) by LCS; a plain replacement when the table would be huge.
void lcs_edits(const std::vector<std::string_view>& a, size_t lo_a, size_t hi_a,
               const std::vector<std::string_view>& b, size_t lo_b, size_t hi_b, std::vector<Edit>& out) {
  const size_t n = hi_a - lo_a, m = hi_b - lo_b;
  if (n * m > 50'000'000) {
    for (size_t i = lo_a; i < hi_a; ++i)
      out.push_back({'-', a[i]});
    for (size_t j = lo_b; j < hi_b; ++j)
      out.push_back({'+', b[j]});
    return;
  }
  // len[i][j]: LCS length of a[lo_a+i..] and b[lo_b+j..].
  std::vector<uint32_t> len((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> uint32_t& { return len[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      at(i, j) = a[lo_a + i] == b[lo_b + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[lo_a + i] == b[lo_b + j]) {
      out.push_back({' ', a[lo_a + i]});
      ++i, ++j;
    } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
      out.push_back({'-', a[lo_a + i++]}); // deletions first, as diff -u prints them
    } else {
      out.push_back({'+', b[lo_b + j++]});
    }
  }
}

} // namespace

std::string unified_line_diff(std::string_view a_text, std::string_view b_text, std::string_view a_name,
                              std::string_view b_name, int context) {
  const std::vector<std::string_view> a = split_lines(a_text), b = split_lines(b_text);
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre])
    ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf])
    ++suf;
  if (pre == a.size() && pre == b.size())
    return "";
  std::vector<Edit> edits;
  for (size_t i = 0; i < pre; ++i)
    edits.push_back({' ', a[i]});
  lcs_edits(a, pre, a.size() - suf, b, pre, b.size() - suf, edits);
  for (size_t i = a.size() - suf; i < a.size(); ++i)
    edits.push_back({' ', a[i]});

  std::string out = fmt::format("--- {}\n+++ {}\n", a_name, b_name);
  const size_t ctx = static_cast<size_t>(std::max(0, context));
  size_t k = 0;
  while (k < edits.size()) {
    // The next change, and the hunk around it: extend while the gap between changes is at most 2·ctx.
    size_t first = k;
    while (first < edits.size() && edits[first].op == ' ')
      ++first;
    if (first == edits.size())
      break;
    size_t start = first >= ctx ? first - ctx : 0;
    size_t last = first; // last change in the hunk
    for (size_t x = first + 1; x < edits.size(); ++x)
      if (edits[x].op != ' ') {
        if (x - last > 2 * ctx)
          break;
        last = x;
      }
    size_t end = std::min(edits.size(), last + ctx + 1);
    // Line numbers (1-based) at `start` in a and b.
    size_t la = 1, lb = 1;
    for (size_t x = 0; x < start; ++x) {
      la += edits[x].op != '+';
      lb += edits[x].op != '-';
    }
    size_t na = 0, nb = 0;
    for (size_t x = start; x < end; ++x) {
      na += edits[x].op != '+';
      nb += edits[x].op != '-';
    }
    out += fmt::format("@@ -{},{} +{},{} @@\n", na ? la : la - 1, na, nb ? lb : lb - 1, nb);
    for (size_t x = start; x < end; ++x) {
      out += edits[x].op;
      out += edits[x].line;
      out += '\n';
    }
    k = end;
  }
  return out;
}

} // namespace kiln::cli
