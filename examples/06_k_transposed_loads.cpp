// Tutorial 06: two ways to feed Kᵀ to the QKᵀ tensor-core product in FlashAttention-2, and why they run at
// the same speed. K_TRANSPOSED=1 reads K through a block pointer over Kᵀ, (HEAD_DIM, BLOCK_N) with order
// (0, 1); K_TRANSPOSED=0 loads row-major (BLOCK_N, HEAD_DIM) K tiles and writes trans(k) in the kernel.
// This program generates kiln's FA2 (kernels/attention/fa2_fwd.cpp) both ways for sm_90a and prints the
// difference between the two CUDA sources, then runs both in the interpreter (or on the GPU) on one problem
// and checks they agree with each other and with a double-precision reference.
// docs/tutorials/06_k_transposed_loads.md.
#include <kiln/kiln.h>

#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa2_fwd.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// The lines that differ between a and b ("-" only in a, "+" only in b) with their line numbers: the common
// prefix and suffix are trimmed, and the middle is matched by a longest common subsequence.
int print_line_diff(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre])
    ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf])
    ++suf;
  const size_t n = a.size() - pre - suf, m = b.size() - pre - suf;
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[pre + i] == b[pre + j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  int changed = 0;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[pre + i] == b[pre + j]) {
      ++i, ++j;
    } else if (j == m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1])) {
      std::printf("- %5zu: %s\n", pre + i + 1, a[pre + i].c_str());
      ++i, ++changed;
    } else {
      std::printf("+ %5zu: %s\n", pre + j + 1, b[pre + j].c_str());
      ++j, ++changed;
    }
  }
  return changed;
}

int main() {
  AttentionProblem p;
  p.B = 1, p.H = 2, p.N_Q = p.N_K = 160, p.D = 64, p.dtype = DType::f16, p.causal = 0;

  std::string sources[2];
  Config configs[2];
  for (int kt : {0, 1}) {
    p.k_transposed = kt != 0;
    configs[kt] = default_fa2_config(p);
    sources[kt] = generate_cuda(build_fa2_fwd(configs[kt]), Target::parse("sm_90a")).source;
  }
  std::printf("FA2 forward, %s, generated for sm_90a\n  K_TRANSPOSED=0: %s\n  K_TRANSPOSED=1: %s\n\n",
              p.str().c_str(), configs[0].str().c_str(), configs[1].str().c_str());
  std::vector<std::string> a = lines_of(sources[0]), b = lines_of(sources[1]);
  std::printf("diff (- K_TRANSPOSED=0, %zu lines; + K_TRANSPOSED=1, %zu lines):\n", a.size(), b.size());
  const int changed = print_line_diff(a, b);
  std::printf("%d lines differ\n\n", changed);

  // Same answers: tiles small enough for the interpreter, the same inputs for both variants.
  std::string why;
  const bool gpu = gpu_available(&why);
  AttentionInputs in = make_inputs(p, 6, 1.0);
  AttentionResult ref = reference(p, in);
  AttentionResult out[2];
  for (int kt : {0, 1}) {
    p.k_transposed = kt != 0;
    Config c = default_fa2_config(p);
    if (!gpu)
      c.set("BLOCK_M", 64).set("BLOCK_N", 32);
    out[kt] = run_fa2_interpreted(p, c, in, gpu ? Executor::Gpu : Executor::Interpreter);
  }
  double between = 0, to_ref = 0;
  for (size_t i = 0; i < ref.o.size(); ++i) {
    between = std::max(between, std::abs(out[0].o[i] - out[1].o[i]));
    to_ref = std::max({to_ref, std::abs(out[0].o[i] - ref.o[i]), std::abs(out[1].o[i] - ref.o[i])});
  }
  if (std::isnan(between + to_ref))
    between = to_ref = INFINITY;
  const bool ok = changed > 0 && to_ref < 1e-2;
  std::printf(
      "ran both on %s: max |O(K_TRANSPOSED=0) - O(K_TRANSPOSED=1)| = %.2e, max |O - reference| = %.2e: %s\n",
      gpu ? current_device().name.c_str() : "the interpreter", between, to_ref, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
