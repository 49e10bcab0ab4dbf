// The attention backward's generated code on the GPU, held to the interpreter's sweep and references
// (interp/attention_bwd_test_cases.h) at GPU-sized tiles, plus what only the GPU can show: the default and
// every tuning-space config compile and run right, the deterministic mode gives bitwise-equal gradients
// twice, the atomic dQ agrees with it; and the backward with mods (interp/attention_mods_bwd_cases.h) at the
// cases' tiles and the default configs.
#include "gpu/gpu_skip.h"
#include "interp/attention_bwd_test_cases.h"
#include "interp/attention_mods_bwd_cases.h"
#include "kernels/attention/fa2_bwd_dkdv.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class GpuFa2Bwd : public ::testing::TestWithParam<AttentionCase> {};

// The sweep at the default (GPU) configs (EveryTuningConfigIsRight covers the other tiles).
TEST_P(GpuFa2Bwd, MatchesReference) {
  KILN_REQUIRE_GPU();
  const AttentionCase& c = GetParam();
  check_bwd_case(c, default_bwd_configs(c.problem), Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(fa2_bwd, GpuFa2Bwd, ::testing::ValuesIn(attention_sweep()),
                         [](const auto& info) { return attention_case_name(info.param); });

// One small shape through every backward kernel (preprocess, dK/dV, dQ; the atomic dK/dV and the dQ convert):
// the case compute-sanitizer's memcheck and racecheck run (scripts/gpu_check.sh).
TEST(GpuFa2BwdSmall, BothVariants) {
  KILN_REQUIRE_GPU();
  AttentionCase c = make_case(200, 150, 64, 2, f16, 4, 2);
  check_bwd_case(c, default_bwd_configs(c.problem), Executor::Gpu);
  check_bwd_case(c, default_bwd_configs(c.problem, /*atomic_dq=*/true), Executor::Gpu);
}

// The fused dK/dV adds dQ through a block pointer, on sm_90a staged in shared memory and reduced by the TMA unit
// (one bulk reduction a block where its rows are whole and inside, one a row at the query tail and over pieces of
// the head dim): GQA over 8 warps, one query head a kv head warp-specialised over two warpgroups of 64 keys (D = 64,
// K's tile in 64-byte lines so that dQ's product runs on wgmma) and over one at two CTAs an SM (D = 128, where the
// stage would not let two CTAs share an SM: vector reductions from registers), and D = 96 in two pieces. Small, so
// that memcheck and racecheck run it (gpu_check.sh --backward).
TEST(GpuFa2BwdSmall, FusedDqAddsMatchTheReference) {
  KILN_REQUIRE_GPU();
  struct Tile {
    int64_t block_n;
    int warps;
    bool ws;
    int64_t min_blocks;
  };
  const std::pair<AttentionCase, Tile> runs[] = {
      {make_case(200, 150, 64, 2, f16, 4, 2), {128, 8, false, 1}},
      {make_case(300, 257, 64, 1, bf16, 2, 2), {128, 8, true, 1}},
      {make_case(190, 300, 128, 2, f16, 2, 2), {64, 4, true, 2}},
      {make_case(150, 200, 96, 2, f16, 2, 1), {64, 4, false, 1}},
  };
  for (const auto& [c, t] : runs) {
    AttentionBwdConfigs configs = default_bwd_configs(c.problem, /*atomic_dq=*/true);
    configs.dkdv.set("BLOCK_N", t.block_n).set("BLOCK_M", 64);
    configs.dkdv.set("WARP_SPECIALIZE", t.ws ? 1 : 0).set("MIN_BLOCKS_PER_SM", t.min_blocks);
    configs.dkdv.num_warps = t.warps;
    SCOPED_TRACE(attention_case_name(c) + " dkdv " + configs.dkdv.str());
    check_bwd_case(c, configs, Executor::Gpu);
  }
}

// EXACT_MASKED_V=1: a NaN in V at a key hidden from rows inside the tiles their programs visit does not reach their
// dQ.
TEST(GpuFa2BwdSmall, HiddenNanValueDoesNotReachTheRowsThatDoNotSeeIt) {
  KILN_REQUIRE_GPU();
  for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    check_bwd_hidden_nan_value(dt, [](const AttentionCase& c) { return default_bwd_configs(c.problem); }, Executor::Gpu);
    check_bwd_hidden_nan_value(
        dt, [](const AttentionCase& c) { return default_bwd_configs(c.problem, /*atomic_dq=*/true); }, Executor::Gpu);
  }
}

// Longer sequences and the widest head, which the interpreter cannot afford.
TEST(GpuFa2BwdLarge, LongSequencesAndD256) {
  KILN_REQUIRE_GPU();
  for (AttentionCase c : {make_case(1000, 1000, 128, 1, f16, 2, 1), make_case(1537, 2048, 64, 2, bf16, 4, 4),
                          make_case(4096, 4096, 64, 0, f16, 1, 1), make_case(300, 700, 256, 2, f16, 2, 2),
                          make_case(257, 300, 256, 0, bf16, 1, 1), make_case(513, 513, 200, 1, f16, 1, 1)}) {
    SCOPED_TRACE(attention_case_name(c));
    check_bwd_case(c, default_bwd_configs(c.problem), Executor::Gpu);
    check_bwd_case(c, default_bwd_configs(c.problem, /*atomic_dq=*/true), Executor::Gpu);
  }
}

// Every config of both tuning spaces that fits the device runs and is right (the autotuner may pick any).
TEST(GpuFa2BwdLarge, EveryTuningConfigIsRight) {
  KILN_REQUIRE_GPU();
  for (AttentionCase c : {make_case(300, 300, 64, 1, f16, 2, 1), make_case(200, 260, 128, 2, bf16, 2, 2)}) {
    const AttentionBwdConfigs base = default_bwd_configs(c.problem);
    for (const Config& dkdv : bwd_dkdv_config_space(c.problem)) {
      SCOPED_TRACE(attention_case_name(c) + " dkdv " + dkdv.str());
      check_bwd_case(c, AttentionBwdConfigs{dkdv, base.dq}, Executor::Gpu);
    }
    for (const Config& dq : bwd_dq_config_space(c.problem)) {
      SCOPED_TRACE(attention_case_name(c) + " dq " + dq.str());
      check_bwd_case(c, AttentionBwdConfigs{base.dkdv, dq}, Executor::Gpu);
    }
  }
}

// dK/dV warp-specialised (a producer warpgroup copies Q and dO by TMA; one query head a kv head) matches the
// reference: tails in the query loops, N_Q != N_K, both causal alignments, D = 64 and 128, f16 and bf16.
TEST(GpuFa2BwdLarge, WarpSpecializedDkdvMatchesTheReference) {
  KILN_REQUIRE_GPU();
  for (AttentionCase c : {make_case(300, 300, 64, 1, f16, 2, 2), make_case(1000, 777, 128, 2, bf16, 2, 2),
                          make_case(513, 1024, 64, 0, bf16, 3, 3), make_case(640, 640, 128, 0, f16, 1, 1)}) {
    AttentionBwdConfigs configs = default_bwd_configs(c.problem);
    // One warpgroup in each of two CTAs an SM (232 registers a consumer); 128 query rows a step, whose LSE and Delta
    // the consumers read from the producer's ring at each use (D = 64: the tile spills past it), with the products
    // issued early and in the program's order (PRODUCTS_IN_ORDER=1, the tile the tuner offers).
    for (auto [warps, stages, rows, ctas, in_order] :
         {std::tuple{8, 2, 64, 1, 0}, {8, 3, 64, 1, 0}, {4, 2, 64, 1, 0}, {4, 2, 64, 2, 0}, {8, 2, 128, 1, 0},
          {8, 2, 128, 1, 1}}) {
      if (rows == 128 && c.problem.D > 64)
        continue;
      Config dkdv = configs.dkdv;
      dkdv.set("WARP_SPECIALIZE", 1).set("BLOCK_N", warps == 8 ? 128 : 64).set("BLOCK_M", rows);
      dkdv.set("MIN_BLOCKS_PER_SM", ctas).set("PRODUCTS_IN_ORDER", in_order);
      dkdv.num_warps = warps;
      dkdv.num_stages = stages;
      SCOPED_TRACE(attention_case_name(c) + " dkdv " + dkdv.str());
      check_bwd_case(c, AttentionBwdConfigs{dkdv, configs.dq}, Executor::Gpu);
    }
  }
}

// dQ warp-specialised (a producer warpgroup copies K and V by TMA) over 128 query rows, with 64- and 128-key steps:
// key tails, N_Q != N_K, both causal alignments, GQA, D = 64 and 128, f16 and bf16.
TEST(GpuFa2BwdLarge, WarpSpecializedDqMatchesTheReference) {
  KILN_REQUIRE_GPU();
  for (AttentionCase c : {make_case(300, 300, 64, 1, f16, 2, 2), make_case(1000, 777, 128, 2, bf16, 4, 2),
                          make_case(513, 1024, 64, 0, bf16, 3, 1), make_case(640, 650, 128, 1, f16, 1, 1)}) {
    const AttentionBwdConfigs configs = default_bwd_configs(c.problem);
    for (int64_t keys : {64, 128}) {
      Config dq = configs.dq;
      dq.set("WARP_SPECIALIZE", 1).set("BLOCK_M", 128).set("BLOCK_N", keys);
      dq.num_warps = 8;
      dq.num_stages = 2;
      SCOPED_TRACE(attention_case_name(c) + " dq " + dq.str());
      check_bwd_case(c, AttentionBwdConfigs{configs.dkdv, dq}, Executor::Gpu);
    }
  }
}

// The fused backward: dQ added by dK/dV (ATOMIC_DQ=1) over two warpgroups of 64 keys, its 64-row dQ product on a
// warp split of its own (the two warpgroups take half its columns each), warp-specialised where each kv head has
// one query head and not where a GQA group shares it; one warpgroup of 64 keys, warp-specialised; and at D = 64
// 128 query rows a step over 128 keys, in the program's order (PRODUCTS_IN_ORDER=1), dQ added in its own step.
TEST(GpuFa2BwdLarge, FusedAtomicDkdvMatchesTheReference) {
  KILN_REQUIRE_GPU();
  for (AttentionCase c : {make_case(300, 300, 64, 1, f16, 2, 2), make_case(1000, 777, 128, 2, bf16, 2, 2),
                          make_case(513, 1024, 64, 0, bf16, 3, 3), make_case(640, 640, 128, 0, f16, 1, 1),
                          make_case(700, 500, 128, 1, f16, 4, 2)}) {
    AttentionBwdConfigs configs = default_bwd_configs(c.problem, /*atomic_dq=*/true);
    const bool one_head_a_kv_head = c.problem.H == c.problem.H_KV;
    for (auto [warps, stages, ws, rows] :
         {std::tuple{8, 2, true, 64}, {8, 3, true, 64}, {4, 2, true, 64}, {8, 2, false, 64}, {8, 2, true, 128}}) {
      if ((ws && !one_head_a_kv_head) || (rows == 128 && c.problem.D > 64))
        continue;
      Config dkdv = configs.dkdv;
      dkdv.set("WARP_SPECIALIZE", ws ? 1 : 0).set("BLOCK_N", warps == 8 ? 128 : 64).set("BLOCK_M", rows);
      dkdv.set("PRODUCTS_IN_ORDER", rows == 128 ? 1 : 0);
      dkdv.num_warps = warps;
      dkdv.num_stages = stages;
      SCOPED_TRACE(attention_case_name(c) + " dkdv " + dkdv.str());
      check_bwd_case(c, AttentionBwdConfigs{dkdv, configs.dq}, Executor::Gpu);
    }
  }
}

// The backward's warp-specialised tiles on a static persistent grid (PERSISTENT=1: one wave of CTAs walks the
// programs, the producer running into the next program's steps and program tiles): more programs than the CTAs
// that fit at once (so that every CTA walks), query and key tails, N_Q != N_K, D = 64 and 128, both dtypes, the
// fused dQ adds, and a causal mask (which the tuner prunes, but a user may ask for).
TEST(GpuFa2BwdLarge, PersistentGridsMatchTheReference) {
  KILN_REQUIRE_GPU();
  for (AttentionCase c : {make_case(520, 520, 64, 0, f16, 16, 16), make_case(600, 520, 128, 0, bf16, 16, 16),
                          make_case(520, 700, 64, 1, bf16, 16, 16)}) {
    c.problem.B = 2;
    for (bool atomic : {false, true}) {
      const AttentionBwdConfigs base = default_bwd_configs(c.problem, atomic);
      // (keys, rows, warps, CTAs an SM, products in order): the space's three warp-specialised dK/dV tiles.
      for (auto [keys, rows, warps, ctas, in_order] :
           {std::tuple{128, 64, 8, 1, 0}, {64, 64, 4, 2, 0}, {128, 128, 8, 1, 1}}) {
        if ((rows == 128 && c.problem.D > 64) || (atomic && ctas > 1 && c.problem.D > 64))
          continue;
        Config dkdv = base.dkdv;
        dkdv.set("WARP_SPECIALIZE", 1).set("PERSISTENT", 1).set("BLOCK_N", keys).set("BLOCK_M", rows);
        dkdv.set("MIN_BLOCKS_PER_SM", ctas).set("PRODUCTS_IN_ORDER", in_order);
        dkdv.num_warps = warps;
        dkdv.num_stages = 2;
        SCOPED_TRACE(attention_case_name(c) + " dkdv " + dkdv.str());
        check_bwd_case(c, AttentionBwdConfigs{dkdv, base.dq}, Executor::Gpu);
      }
      if (atomic)
        continue;
      for (int64_t keys : {64, 128}) {
        Config dq = base.dq;
        dq.set("WARP_SPECIALIZE", 1).set("PERSISTENT", 1).set("BLOCK_M", 128).set("BLOCK_N", keys);
        dq.num_warps = 8;
        dq.num_stages = 2;
        SCOPED_TRACE(attention_case_name(c) + " dq " + dq.str());
        check_bwd_case(c, AttentionBwdConfigs{base.dkdv, dq}, Executor::Gpu);
      }
    }
  }
}

// PERSISTENT=1 without a producer (the tuner does not offer it, a user may ask for it): the CTAs copy the next
// program's K and V themselves; with GQA, where dK/dV loops over a group's query heads, deterministic and fused.
TEST(GpuFa2BwdLarge, PersistentGridsWithoutAProducerMatchTheReference) {
  KILN_REQUIRE_GPU();
  AttentionCase c = make_case(300, 520, 64, 0, f16, 16, 4);
  c.problem.B = 6; // 216 dK/dV programs, 480 dQ programs: more than the CTAs that fit at once
  for (bool atomic : {false, true}) {
    AttentionBwdConfigs configs = default_bwd_configs(c.problem, atomic);
    configs.dkdv.set("PERSISTENT", 1).set("BLOCK_N", 64).set("BLOCK_M", 64);
    configs.dq.set("PERSISTENT", 1).set("BLOCK_M", 64).set("BLOCK_N", 64);
    SCOPED_TRACE(attention_case_name(c) + " dkdv " + configs.dkdv.str() + " dq " + configs.dq.str());
    check_bwd_case(c, configs, Executor::Gpu);
  }
}

// Deterministic mode: two runs give the same bits (GQA sums in a loop, dQ in its own kernel, no atomics).
TEST(GpuFa2BwdLarge, DeterministicModeIsBitwiseReproducible) {
  KILN_REQUIRE_GPU();
  AttentionCase c = make_case(777, 1031, 64, 1, f16, 8, 2);
  const AttentionProblem& p = c.problem;
  AttentionInputs in = make_inputs(p, 5, 1.0);
  HostBuffer dout = make_dout(p, 6, 1.0);
  AttentionBwdBuffers first = make_bwd_buffers(p, in, dout), second = make_bwd_buffers(p, in, dout);
  run_bwd(p, default_bwd_configs(p), first, Executor::Gpu);
  run_bwd(p, default_bwd_configs(p), second, Executor::Gpu);
  EXPECT_EQ(first.dq.bytes, second.dq.bytes);
  EXPECT_EQ(first.dk.bytes, second.dk.bytes);
  EXPECT_EQ(first.dv.bytes, second.dv.bytes);
}

// The backward with mods: every mod case at its tiles and at the default (GPU) configs, the atomic variant too,
// and where each kv head has one query head, the warp-specialised dK/dV.
class GpuModsBwd : public ::testing::TestWithParam<ModCase> {};

TEST_P(GpuModsBwd, GradientsMatchTheReferenceWithTheSameMods) {
  KILN_REQUIRE_GPU();
  const ModCase& c = GetParam();
  check_mod_bwd_case(c, mod_case_bwd_configs(c), Executor::Gpu);
  SCOPED_TRACE("default configs");
  check_mod_bwd_case(c, default_bwd_configs(c.base.problem), Executor::Gpu);
  SCOPED_TRACE("atomic dQ");
  check_mod_bwd_case(c, default_bwd_configs(c.base.problem, /*atomic_dq=*/true), Executor::Gpu);
  const AttentionProblem& p = c.base.problem;
  if (p.H == p.H_KV) { // the tuner may pick the warp-specialised dK/dV there
    SCOPED_TRACE("warp-specialised dK/dV");
    AttentionBwdConfigs ws = default_bwd_configs(p);
    ws.dkdv.set("WARP_SPECIALIZE", 1).set("BLOCK_N", 128).set("BLOCK_M", 64);
    ws.dkdv.num_warps = 8;
    check_mod_bwd_case(c, ws, Executor::Gpu);
  }
}

INSTANTIATE_TEST_SUITE_P(mods_bwd, GpuModsBwd, ::testing::ValuesIn(mod_bwd_cases()),
                         [](const auto& info) { return info.param.name; });

// Longer sequences with mods: document masking, a causal window and softcapping (the combination), and
// ALiBi on the built-in bottom-right causal path, at the default configs.
TEST(GpuModsBwdLarge, DocumentWindowSoftcapAndAlibi) {
  KILN_REQUIRE_GPU();
  AttentionCase docs = make_case(600, 600, 128, 0, bf16, 4, 2, false, true, 2.0);
  docs.problem.B = 2;
  ModTensorData ids = document_ids(docs.problem, 600, {250, 17, 200, 90}, "q_doc");
  ModTensorData kv = ids;
  kv.data.name = "kv_doc";
  const ModCase combo = mod_case("document_window_softcap_600", docs, {softcap(5)},
                                 {document_mask(), sliding_window(100, 0)}, {{"q_doc", ids}, {"kv_doc", kv}});
  AttentionCase br = make_case(700, 900, 64, 2, f16, 4, 4);
  const ModCase alibi_br = mod_case("alibi_causal_br_700x900", br, {alibi()}, {},
                                    {{"alibi_slopes", alibi_slopes(br.problem)}});
  for (const ModCase& c : {combo, alibi_br}) {
    SCOPED_TRACE(c.name);
    check_mod_bwd_case(c, default_bwd_configs(c.base.problem), Executor::Gpu);
  }
}

} // namespace
