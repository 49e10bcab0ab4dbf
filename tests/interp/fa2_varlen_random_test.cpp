// Random packed problems through the interpreter, forward and backward, against the per-sequence double
// reference: 24 batches of 1 to 6 sequences with lengths from 0 to 300 drawn apart for queries and keys (one
// in five empty), causal modes, GQA groups, head dims, dtypes, K variants, padded token strides and tiles all
// drawn from a fixed seed, so that every run checks the same problems and a failure names its index.
#include "attention_varlen_bwd_cases.h"

#include <random>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

VarlenCase random_varlen_case(int index) {
  std::mt19937_64 rng(0x7a51d + static_cast<uint64_t>(index));
  auto pick = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  auto length = [&] { return pick(5) == 0 ? int64_t{0} : 1 + pick(300); };
  VarlenCase c;
  c.name = "random" + std::to_string(index);
  const int64_t B = 1 + pick(6);
  for (int64_t b = 0; b < B; ++b) {
    c.problem.seqlens_q.push_back(length());
    c.problem.seqlens_k.push_back(pick(3) == 0 ? c.problem.seqlens_q.back() : length());
  }
  const int64_t dims[] = {16, 32, 40, 64};
  const DType dtypes[] = {DType::f16, DType::bf16, DType::f32};
  c.problem.H_KV = 1 + pick(2);
  c.problem.H = c.problem.H_KV * (1 + pick(3));
  c.problem.D = dims[pick(4)];
  c.problem.dtype = dtypes[pick(3)];
  c.problem.causal = static_cast<int>(pick(3));
  c.problem.k_transposed = pick(2) == 0;
  c.problem.token_pad = 8 * pick(2);
  const int64_t tiles[] = {16, 32, 64};
  c.block_m = tiles[pick(3)];
  c.block_n = tiles[pick(3)];
  return c;
}

class Fa2VarlenRandom : public ::testing::TestWithParam<int> {};

TEST_P(Fa2VarlenRandom, ForwardAndBackwardMatchTheReference) {
  const VarlenCase c = random_varlen_case(GetParam());
  SCOPED_TRACE(c.problem.str() + " tiles " + std::to_string(c.block_m) + "x" + std::to_string(c.block_n));
  check_varlen_case(
      c,
      [](const VarlenProblem& p, const Config& cfg, const AttentionInputs& in, Executor e) {
        return run_fa2_varlen_interpreted(p, cfg, in, e);
      },
      varlen_case_config(c));
  check_varlen_bwd_case(c, varlen_bwd_case_configs(c, GetParam() % 2 == 1));
}

INSTANTIATE_TEST_SUITE_P(varlen, Fa2VarlenRandom, ::testing::Range(0, 24));

} // namespace
