// Split-KV decoding in the interpreter (kernels/attention/decode_split.h, decode_combine.h) over the shared
// sweep (decode_test_cases.h) at D = 16 and 32, plus what only the decoding kernels' structure has: the grid
// (one program per split and kv head, not per query head), the num_splits heuristic, and the combine's LSE
// rules.
#include "decode_test_cases.h"

#include "jit/tuned_kernel.h"
#include "kernels/attention/decode_combine.h"
#include "kernels/attention/decode_split.h"

#include <cmath>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class DecodeInterp : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeInterp, MatchesReference) {
  const DecodeCase& c = GetParam();
  check_decode_case(c, decode_case_split_config(c), default_decode_combine_config(c.problem));
}

std::vector<DecodeCase> interp_sweep() {
  std::vector<DecodeCase> cs = decode_sweep(32);
  for (const DecodeCase& c : decode_sweep(16)) // D = 16 on the cheaper half, and D = 24 (not a power of two)
    if (c.problem.N_K <= 300)
      cs.push_back(c);
  DecodeCase odd = decode_case(2, 8, 2, 4, 100, 24, 2, 3, 32, 64, {100, 50});
  cs.push_back(odd);
  return cs;
}

INSTANTIATE_TEST_SUITE_P(decode, DecodeInterp, ::testing::ValuesIn(interp_sweep()),
                         [](const auto& info) { return decode_case_name(info.param); });

// K/V are read once per kv head: the split kernel's grid is (splits, B · H_KV, row tiles of G · N_Q).
TEST(DecodeKernels, GridIsSplitsByKvHeadsByPackedRowTiles) {
  DecodeProblem p;
  p.B = 3, p.H = 32, p.H_KV = 8, p.N_Q = 4, p.N_K = 8192, p.D = 128, p.page_size = 64;
  const Config split = default_decode_split_config(p);
  EXPECT_EQ(split.get("BLOCK_M"), 16) << "G · N_Q = 16 packed rows";
  EXPECT_EQ(split.get("PAGED"), 1);
  EXPECT_EQ((decode_split_def().grid(split, decode_size_args(p, 5))), (Grid{5, 24, 1}));
  p.N_Q = 16; // 64 rows: one tile of 64
  EXPECT_EQ((decode_split_def().grid(default_decode_split_config(p), decode_size_args(p, 2))),
            (Grid{2, 24, 1}));
  p.H_KV = 1; // MQA: 512 rows, 8 tiles of 64
  EXPECT_EQ((decode_split_def().grid(default_decode_split_config(p), decode_size_args(p, 2))),
            (Grid{2, 3, 8}));
  const Config combine = default_decode_combine_config(p);
  EXPECT_EQ((decode_combine_def().grid(combine, decode_size_args(p, 2))), (Grid{3 * 32 * 16 / 16, 1, 1}));
}

TEST(DecodeKernels, SmallPagesShrinkTheKeyTileToAPage) {
  DecodeProblem p;
  p.N_K = 1000, p.page_size = 16;
  EXPECT_EQ(default_decode_split_config(p).get("BLOCK_N"), 16);
  Config wide = default_decode_split_config(p);
  wide.set("BLOCK_N", 32);
  try {
    check_decode_split_config(p, wide);
    FAIL() << "BLOCK_N=32 over pages of 16 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wider than a page of 16 keys"), std::string::npos) << e.what();
  }
  const SizeArgs sizes = decode_size_args(p, 1);
  EXPECT_NE(decode_split_def().prune(wide, sizes), "");
}

// The tuner must keep a candidate for every page size (it fails when its rule prunes them all).
TEST(DecodeKernels, EveryPageSizeKeepsTuningCandidates) {
  for (int64_t page : {0, 16, 64, 256}) {
    DecodeProblem p;
    p.N_K = 4096, p.page_size = page, p.D = 128;
    const SizeArgs sizes = decode_size_args(p, 4);
    int kept = 0;
    for (const Config& c : tuning_candidates(decode_split_def(), default_decode_split_config(p)))
      if (decode_split_def().prune(c, sizes).empty()) {
        ++kept;
        EXPECT_LE(c.get("BLOCK_N"), page ? page : 128) << c.str();
      }
    EXPECT_GT(kept, 0) << "page " << page;
  }
}

TEST(DecodeKernels, TopLeftCausalIsRefused) {
  Config c = decode_split_def().default_config();
  c.set("CAUSAL", 1);
  try {
    build_decode_split(c);
    FAIL() << "top-left causal was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bottom-right"), std::string::npos) << e.what();
  }
}

TEST(DecodeSplits, HeuristicFillsTheGpuAndNoMore) {
  // Issue 19's decoding shape: 64 sequences x 8 kv heads = 512 programs. On 132 slots (one CTA an SM) they
  // are 3.9 waves, nearly even: no split.
  EXPECT_EQ(choose_num_splits(512, 8192 / 64, 132), 1);
  // On an H100 whose SMs hold 3 split CTAs each (396 slots) they are 1.3 waves; 2 splits make 2.6 of 3.
  EXPECT_EQ(choose_num_splits(512, 8192 / 64, 3 * 132), 2);
  // Many full waves: no split.
  EXPECT_EQ(choose_num_splits(4096, 128, 3 * 132), 1);
  // One sequence, 8 kv heads: split until the waves are nearly full.
  const int64_t s = choose_num_splits(8, 128, 132);
  EXPECT_GT(s, 1);
  EXPECT_GE(8 * s, 132 * 8 / 10) << s;
  EXPECT_LE(s, 128);
  // Never more splits than key tiles, nor for a single tile.
  EXPECT_LE(choose_num_splits(1, 3, 132), 3);
  EXPECT_EQ(choose_num_splits(1, 1, 132), 1);
  EXPECT_EQ(choose_num_splits(4, 0, 132), 1);
}

TEST(DecodeSplits, SplitKeysAreWholeTiles) {
  EXPECT_EQ(decode_split_keys(1000, 64, 4), 256); // 16 tiles, 4 a split
  EXPECT_EQ(decode_split_keys(100, 32, 7), 32);   // 4 tiles over 7 splits: the last 3 are empty
  EXPECT_EQ(decode_split_keys(0, 32, 3), 0);
}

// The split count does not change the result beyond rounding: 1, 2 and 16 splits of the same problem agree.
TEST(DecodeSplits, SplitCountsAgree) {
  DecodeCase c = decode_case(2, 4, 2, 4, 300, 16, 2, 1, 16, 0, {300, 211});
  const DecodeInputs in = make_decode_inputs(c.problem, 7, 1.0);
  const Config split = decode_case_split_config(c), combine = default_decode_combine_config(c.problem);
  const AttentionResult one = run_decode(c.problem, split, combine, 1, in);
  for (int64_t n : {2, 16}) {
    const AttentionResult many = run_decode(c.problem, split, combine, n, in);
    const Comparison o = compare_to_reference(many.o, one.o);
    EXPECT_TRUE(o.ok(tolerance(c.problem.dtype))) << n << " splits: " << o.str();
  }
}

} // namespace

namespace {

// docs/guarantees.md: a NaN in a key a query sees makes that query's O and LSE NaN, through the combine too;
// the other kv head's queries, and the other sequence, stay finite and exact.
TEST(DecodeSplits, NanInAVisibleKeyReachesItsQueriesOnly) {
  DecodeCase c = decode_case(2, 4, 2, 4, 200, 16, 2, 3, 32, 0, {200, 150});
  const DecodeProblem& p = c.problem;
  DecodeInputs in = make_decode_inputs(p, 11, 1.0);
  in.k.set(((0 * p.N_K + 37) * p.H_KV + 1) * p.D + 3, std::nan("")); // sequence 0, key 37, kv head 1
  const AttentionResult ref = decode_reference(p, in);
  const AttentionResult out =
      run_decode(p, decode_case_split_config(c), default_decode_combine_config(p), 3, in);
  int nan_rows = 0;
  for (double lse : ref.lse)
    nan_rows += std::isnan(lse);
  EXPECT_EQ(nan_rows, 2 * 4) << "heads 2 and 3 of sequence 0, all 4 queries";
  const Comparison o = compare_to_reference(out.o, ref.o), lse = compare_to_reference(out.lse, ref.lse);
  EXPECT_TRUE(o.ok(tolerance(p.dtype))) << o.str();
  EXPECT_TRUE(lse.ok(tolerance(p.dtype))) << lse.str();
}

} // namespace
