// FlashAttention-2 forward in the interpreter over the shared attention sweep (attention_test_cases.h),
// plus the properties that only FA2's structure has: the grid, and the stage split of the key loop.
#include "attention_test_cases.h"

#include "dsl/printer.h"
#include "kernels/attention/fa2_fwd.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class Fa2Interp : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(Fa2Interp, MatchesReference) {
  const AttentionCase& c = GetParam();
  Config config = default_fa2_config(c.problem);
  config.set("BLOCK_M", c.block_m).set("BLOCK_N", c.block_n);
  check_attention_case(c, run_fa2_interpreted, config);
}

INSTANTIATE_TEST_SUITE_P(fa2, Fa2Interp, ::testing::ValuesIn(attention_sweep()),
                         [](const auto& info) { return attention_case_name(info.param); });

TEST(Fa2Kernel, RowsWithNoVisibleKeyGiveZeroAndMinusInfinity) {
  // Bottom-right causal with N_Q > N_K: query i sees keys j <= i - (N_Q - N_K), so the first 83 rows see none.
  AttentionCase c = make_case(100, 17, 64, 2, f16, 2, 1);
  Config config = default_fa2_config(c.problem);
  config.set("BLOCK_M", 32).set("BLOCK_N", 16);
  AttentionInputs in = make_inputs(c.problem, 99, 3.0);
  AttentionResult out = run_fa2_interpreted(c.problem, config, in);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 100; ++i) {
      size_t row = static_cast<size_t>(h * 100 + i);
      if (i < 83) {
        EXPECT_EQ(out.lse[row], -std::numeric_limits<double>::infinity()) << "h " << h << " row " << i;
        for (int64_t d = 0; d < 64; ++d)
          ASSERT_EQ(out.o[row * 64 + static_cast<size_t>(d)], 0.0) << "h " << h << " row " << i;
      } else {
        EXPECT_TRUE(std::isfinite(out.lse[row])) << "h " << h << " row " << i;
      }
    }
}

TEST(Fa2Kernel, CausalSplitsTheKeyLoopIntoUnmaskedAndMaskedStages) {
  AttentionProblem p;
  p.causal = 1;
  Kernel k = build_fa2_fwd(default_fa2_config(p));
  int loops = 0, dots = 0;
  walk(k.body, [&](const Op& op) {
    loops += op.kind == OpKind::For;
    dots += op.kind == OpKind::Dot;
  });
  EXPECT_EQ(loops, 2) << print_kernel(k);
  EXPECT_EQ(dots, 4) << "two dots per stage\n" << print_kernel(k);
}

// The plain masking strategy (every key tile visited, masked) computes what the two-stage loop does.
TEST(Fa2Kernel, MaskingEveryTileMatchesTheReference) {
  for (const AttentionCase& c : masking_strategy_cases()) {
    Config config = default_fa2_config(c.problem);
    config.set("BLOCK_M", 32).set("BLOCK_N", 16).set("MASK_EVERY_TILE", 1);
    SCOPED_TRACE(attention_case_name(c));
    check_attention_case(c, run_fa2_interpreted, config);
  }
  AttentionProblem p;
  p.causal = 1;
  Config config = default_fa2_config(p);
  config.set("MASK_EVERY_TILE", 1);
  int loops = 0;
  walk(build_fa2_fwd(config).body, [&](const Op& op) { loops += op.kind == OpKind::For; });
  EXPECT_EQ(loops, 1) << "one loop over every key tile";
}

// LAZY_RESCALE=1: the running max moves only by jumps of more than 2^8, so P reaches 256 and alpha is 1 in most
// steps. Every sweep case (inputs up to ±30 among them, whose row maxima jump by hundreds) matches the reference,
// and so do keys whose scores grow along the row: the max then passes the slack in some steps and not in others.
TEST(Fa2Kernel, LazyRescaleMatchesTheReference) {
  for (const AttentionCase& c : attention_sweep()) {
    Config config = default_fa2_config(c.problem);
    config.set("BLOCK_M", c.block_m).set("BLOCK_N", c.block_n).set("LAZY_RESCALE", 1);
    SCOPED_TRACE(attention_case_name(c));
    check_attention_case(c, run_fa2_interpreted, config);
  }
  for (int causal : {0, 1}) {
    const AttentionCase c = make_case(48, 300, 32, causal, f16, 2, 1);
    SCOPED_TRACE("growing scores, causal " + std::to_string(causal));
    AttentionInputs in = make_inputs(c.problem, 7, 1.0);
    // K's row j (bhsd, one kv head) scaled by 1 + j / 12: the later a key, the larger its scores' spread.
    for (int64_t j = 0; j < 300; ++j)
      for (int64_t d = 0; d < 32; ++d)
        in.k.set(j * 32 + d, in.k.get(j * 32 + d) * (1.0 + static_cast<double>(j) / 12.0));
    Config config = default_fa2_config(c.problem);
    config.set("BLOCK_M", 16).set("BLOCK_N", 16).set("LAZY_RESCALE", 1);
    const AttentionResult ref = reference(c.problem, in);
    const AttentionResult out = run_fa2_interpreted(c.problem, config, in, Executor::Interpreter);
    const double tol = attention_tolerance(c.problem.dtype, false, max_abs_lse(ref));
    const Comparison o = compare_to_reference(out.o, ref.o), lse = compare_to_reference(out.lse, ref.lse);
    EXPECT_TRUE(o.ok(tol)) << "O: " << o.str() << ", tolerance " << tol;
    EXPECT_TRUE(lse.ok(tol)) << "LSE: " << lse.str() << ", tolerance " << tol;
  }
}

TEST(Fa2Kernel, GridIsQTilesByBatchHeads) {
  AttentionProblem p;
  p.B = 3;
  p.H = 5;
  p.H_KV = 5;
  p.N_Q = 300;
  p.N_K = 10;
  Config c = default_fa2_config(p);
  Grid g = fa2_fwd_def().grid(c, attention_size_args(p));
  EXPECT_EQ(g, (Grid{3, 15, 1})); // cdiv(300, 128) = 3
}

// The masking-strategy cases (several batches and heads, GQA, both causal alignments, bshd) with `param` set,
// which changes only which program takes which query tile: the same results as the reference.
void check_numbering_cases(const char* param, int64_t value) {
  std::vector<AttentionCase> cases = masking_strategy_cases();
  cases.push_back(make_case(70, 90, 32, 1, DType::f16, 4, 2, /*bshd=*/true));
  for (AttentionCase c : cases) {
    c.problem.B = 3;
    Config config = default_fa2_config(c.problem);
    config.set("BLOCK_M", 32).set("BLOCK_N", 16).set(param, value);
    SCOPED_TRACE(attention_case_name(c));
    check_attention_case(c, run_fa2_interpreted, config);
  }
}

// The numbering cases with PERSISTENT=`persistent`, and the one-dimensional grid a persistent grid walks.
void check_persistent_numbering(int64_t persistent) {
  check_numbering_cases("PERSISTENT", persistent);
  AttentionProblem p;
  p.B = 3;
  p.H = 5;
  p.H_KV = 5;
  p.N_Q = 300;
  p.N_K = 10;
  Config c = default_fa2_config(p);
  c.set("PERSISTENT", persistent);
  EXPECT_EQ(fa2_fwd_def().grid(c, attention_size_args(p)), (Grid{45, 1, 1})); // 3 query tiles x 15 heads
}

// PERSISTENT=1 numbers the programs along x alone (query_tile_program: tile p % tiles of batch·head p / tiles, the
// causal tiles heaviest first within each head), which is what a persistent grid walks. The interpreter runs that
// grid as the launch gives it: the same results, over several batches and heads, GQA, both causal alignments
// and bshd.
TEST(Fa2Kernel, PersistentNumberingMatchesTheReference) { check_persistent_numbering(1); }

// PERSISTENT=2 (a dynamic persistent grid) numbers the programs along x too, the causal tiles heaviest first across
// the heads of a group (query_tile_program over the one-dimensional ids): the same results, on the same grid.
TEST(Fa2Kernel, DynamicPersistentNumberingMatchesTheReference) { check_persistent_numbering(2); }

// With two CTAs an SM (MIN_BLOCKS_PER_SM=2) the causal forward takes its tiles heaviest first across the heads of
// a group (query_tile_program; these short sequences make one group of every batch·head): the same results.
TEST(Fa2Kernel, HeadGroupsOrderMatchesTheReference) { check_numbering_cases("MIN_BLOCKS_PER_SM", 2); }

void expect_config_error(const AttentionProblem& p, const Config& c, const std::string& needle) {
  AttentionInputs in = make_inputs(p, 1, 1.0);
  try {
    run_fa2_interpreted(p, c, in);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Fa2Kernel, ConfigThatDisagreesWithTheProblemIsAnError) {
  AttentionProblem p;
  p.D = 90; // two tiles of 64 and 32 columns, the second past D
  expect_config_error(p, default_fa2_config(p).set("EVEN_D", 1), "EVEN_D=1");
  p.D = 120; // one tile of 128
  expect_config_error(p, default_fa2_config(p).set("SPLIT_D", 1), "SPLIT_D=1");
}

// D = 96 and 192 take two head-dim tiles (3/4 of HEAD_DIM, no padding); D = 80 too (its second tile checked);
// D = 120 one; D = 32 one (HEAD_DIM 32 has no quarter of 16); and not with EXACT_MASKED_V.
TEST(Fa2Kernel, HeadDimsThreeQuartersOfTheTileTakeTwoTiles) {
  auto config_for = [](int64_t d, bool exact = false) {
    AttentionProblem p;
    p.D = d;
    p.exact_masked_v = exact;
    return default_fa2_config(p);
  };
  for (auto [d, hd, split, even] : {std::tuple{96, 128, 1, 1}, {192, 256, 1, 1}, {48, 64, 1, 1}, {80, 128, 1, 0},
                                    {120, 128, 0, 0}, {128, 128, 0, 1}, {32, 32, 0, 1}, {24, 32, 0, 0}}) {
    const Config c = config_for(d);
    EXPECT_EQ(c.get("HEAD_DIM"), hd) << "D=" << d;
    EXPECT_EQ(c.get("SPLIT_D"), split) << "D=" << d;
    EXPECT_EQ(c.get("EVEN_D"), even) << "D=" << d;
  }
  EXPECT_EQ(config_for(96, true).get("SPLIT_D"), 0);
  EXPECT_EQ(config_for(96, true).get("EVEN_D"), 0);
  // The kernel's IR: Q tiles of 64 and 32 columns, and an accumulator for each.
  const std::string ir = print_kernel(build_fa2_fwd(config_for(96)));
  for (const char* want : {"%q_d0", "%q_d1", "%acc_d0", "%acc_d1", "block_ptr<128x64xf16", "block_ptr<128x32xf16"})
    EXPECT_NE(ir.find(want), std::string::npos) << want << " in\n" << ir;
}

} // namespace
