// FA2's forward on the TMA path (codegen/block_base.h, codegen/plan_tma_copies.h): on sm_90a both key loops copy
// their K and V tiles by TMA through 4-D tensor maps over the whole K and V, whose outer dims are the batch and
// the kv head of each program. Each case first checks that the plan copies by TMA and that this launch's maps
// are legal (so the kernel does not take its cp.async fallback), then runs the config through the API and
// holds O and LSE to the double-precision reference, outputs poisoned first. Shapes cut the last key tile and
// the head dim, N_Q != N_K, GQA, bshd strides (the head stride smaller than the row stride), both causal
// alignments, f16 and bf16, K transposed. The same shapes run warp-specialised (WARP_SPECIALIZE=1: a producer
// warpgroup fills one ring for both key loops), with its two consumer warpgroups taking turns (PINGPONG=1), and on a persistent grid (PERSISTENT=1). The attention API admits only 16-byte aligned bases and
// strides, so its maps are always legal: launches with illegal maps (the plain kernel's cp.async path, and the
// unspecialised kernel a warp-specialised one hands them to) are exercised by the matmul's odd-K cases
// (GpuMatmul, GpuMatmulWarpSpecialized). Skipped below compute capability 9.0.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "jit/tensor_map_args.h"
#include "kernels/attention/attention_api.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/compare.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <string>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::testing_support;

namespace {

struct TmaAttentionCase {
  AttentionProblem p;
  int64_t bm, bn;
  int warps, stages;
  bool warp_specialized = false;
  bool pingpong = false; // PINGPONG=1: the two consumer warpgroups issue their products in turn
  bool product_ahead = false; // PRODUCT_AHEAD=1: Q K_{j+1}ᵀ issued before the softmax of S_j
  int persistent = 0;         // PERSISTENT=1: one wave of CTAs walks the query tiles; 2: each draws its next
  bool late = false;          // LAST_PRODUCT_LATE=1: P_j V_j issued after Q K_{j+1}ᵀ
  bool lazy = false;          // LAZY_RESCALE=1: the running max moves by jumps past 2^8, O's rescale skipped at 1
  int exp2_on_fma = 0;        // EXP2_ON_FMA=K: one register in K of P's exp2 by the FMA pipe's polynomial
  int min_blocks = 1;         // MIN_BLOCKS_PER_SM
  bool tile_barriers = false; // TILE_BARRIERS=1: a full and an empty mbarrier per tile of each ring slot
};

std::string label(const TmaAttentionCase& c) {
  std::string s = c.p.str() + "_bm" + std::to_string(c.bm) + "_bn" + std::to_string(c.bn) + "_w" +
                  std::to_string(c.warps) + "_s" + std::to_string(c.stages) + (c.warp_specialized ? "_ws" : "") +
                  (c.pingpong ? "_pingpong" : "") + (c.product_ahead ? "_ahead" : "") +
                  (c.persistent == 1 ? "_persistent" : c.persistent == 2 ? "_dynamic" : "") + (c.late ? "_late" : "") + (c.lazy ? "_lazy" : "") +
                  (c.exp2_on_fma ? "_fma" + std::to_string(c.exp2_on_fma) : "") +
                  (c.min_blocks > 1 ? "_mb" + std::to_string(c.min_blocks) : "") + (c.tile_barriers ? "_tb" : "");
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return s;
}
void PrintTo(const TmaAttentionCase& c, std::ostream* os) { *os << label(c); }

TmaAttentionCase with_tiles(AttentionProblem p, int64_t bm, int64_t bn, int warps, int stages) {
  return {p, bm, bn, warps, stages};
}

TmaAttentionCase warp_specialized(AttentionProblem p, int64_t bn, int stages, int64_t bm = 128, int warps = 8) {
  return {p, bm, bn, warps, stages, true};
}

TmaAttentionCase pingpong(AttentionProblem p, int64_t bn, int stages) {
  return {p, 128, bn, 8, stages, true, true};
}

TmaAttentionCase product_ahead(AttentionProblem p, int64_t bn, int stages, int64_t bm = 128, int warps = 8) {
  return {p, bm, bn, warps, stages, true, false, true};
}

TmaAttentionCase persistent(AttentionProblem p, int64_t bn, int stages, int64_t bm = 128, int warps = 8) {
  return {p, bm, bn, warps, stages, true, false, false, 1};
}

// The same with `ctas` CTAs sharing an SM (MIN_BLOCKS_PER_SM: each CTA's registers capped to fit).
TmaAttentionCase sharing_an_sm(TmaAttentionCase c, int ctas) {
  c.min_blocks = ctas;
  return c;
}

// The same on a dynamic persistent grid (PERSISTENT=2), with `min_blocks` CTAs an SM.
TmaAttentionCase dynamic(TmaAttentionCase c, int min_blocks = 1) {
  c.persistent = 2;
  c.min_blocks = min_blocks;
  return c;
}

TmaAttentionCase late(AttentionProblem p, int64_t bn, int stages, int64_t bm = 128, int warps = 8,
                      int on_persistent_grid = 0) {
  TmaAttentionCase c{p, bm, bn, warps, stages, true};
  c.late = true;
  c.persistent = on_persistent_grid;
  return c;
}

TmaAttentionCase late_pingpong(AttentionProblem p, int64_t bn, int stages) {
  TmaAttentionCase c = late(p, bn, stages);
  c.pingpong = true;
  return c;
}

TmaAttentionCase tile_barriers(TmaAttentionCase c) {
  c.tile_barriers = true;
  return c;
}

TmaAttentionCase lazy(TmaAttentionCase c) {
  c.lazy = true;
  return c;
}

TmaAttentionCase exp2_on_fma(TmaAttentionCase c, int every) {
  c.exp2_on_fma = every;
  return c;
}

AttentionProblem transposed_k(AttentionProblem p) {
  p.k_transposed = true;
  return p;
}

class GpuAttentionTma : public ::testing::TestWithParam<TmaAttentionCase> {};

TEST_P(GpuAttentionTma, TakesTheTmaPathAndMatchesReference) {
  KILN_REQUIRE_GPU();
  KILN_REQUIRE_SM90("TMA");
  const TmaAttentionCase& tc = GetParam();
  const AttentionProblem& p = tc.p;
  SCOPED_TRACE(label(tc));
  Config c = default_fa2_config(p);
  c.set("BLOCK_M", tc.bm).set("BLOCK_N", tc.bn);
  c.set("WARP_SPECIALIZE", tc.warp_specialized ? 1 : 0).set("PINGPONG", tc.pingpong ? 1 : 0);
  c.set("PRODUCT_AHEAD", tc.product_ahead ? 1 : 0).set("PERSISTENT", tc.persistent);
  c.set("LAST_PRODUCT_LATE", tc.late ? 1 : 0).set("LAZY_RESCALE", tc.lazy ? 1 : 0);
  c.set("EXP2_ON_FMA", tc.exp2_on_fma).set("MIN_BLOCKS_PER_SM", tc.min_blocks);
  c.set("TILE_BARRIERS", tc.tile_barriers ? 1 : 0);
  c.num_warps = tc.warps;
  c.num_stages = tc.stages;

  const AttentionInputs in = make_inputs(p, 4242 + p.N_Q + p.N_K, 2.0);
  AttentionOutputs out = make_outputs(p); // NaN-poisoned
  rt::DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v), o = upload(out.o), lse = upload(out.lse);
  const AttentionStrides s = attention_strides(p);
  const TensorRef tq = describe(p, q.ptr(), p.H, p.N_Q, s.q), tk = describe(p, k.ptr(), p.H_KV, p.N_K, s.k),
                  tv = describe(p, v.ptr(), p.H_KV, p.N_K, s.v), to = describe(p, o.ptr(), p.H, p.N_Q, s.o);
  const TensorRef tlse = TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q});
  AttentionOptions opts = attention_options_for(p);
  opts.config = c;

  // Both key loops are copied by TMA, and this launch's two maps (K and V over every batch and head) encode.
  const Kernel kernel = build_fa2_fwd(c);
  std::shared_ptr<JitKernel> jk = JitKernel::compile(kernel);
  // Two with SPLIT_D (D = 96 as tiles of 64 and 32 columns): a K and a V map for each; warp-specialised, O's stores
  // go out by TMA where their stage fits (one map a head-dim tile), and what they write is checked below.
  const size_t head_dim_tiles = c.get("SPLIT_D") != 0 ? 2 : 1;
  const size_t store_maps = static_cast<size_t>(jk->generated().tma_store_maps);
  EXPECT_TRUE(store_maps == 0 || (tc.warp_specialized && store_maps == head_dim_tiles)) << jk->generated().lowered;
  // Warp-specialised, the producer copies Q by TMA too (one map a head-dim tile) where it can: always on the
  // hardware's grid, on a persistent one where Q has two buffers (plan_producer_tiles.h).
  const size_t q_maps = static_cast<size_t>(jk->generated().producer_tile_maps);
  EXPECT_TRUE(q_maps == 0 || (tc.warp_specialized && q_maps == head_dim_tiles)) << jk->generated().lowered;
  if (tc.warp_specialized && tc.persistent == 0) {
    EXPECT_EQ(q_maps, head_dim_tiles) << jk->generated().lowered;
  }
  ASSERT_EQ(jk->generated().tensor_maps.size(), 2 * head_dim_tiles + q_maps + store_maps) << jk->generated().lowered;
  if (tc.warp_specialized) {
    ASSERT_EQ(jk->generated().why_not_warp_specialized, "");
    ASSERT_EQ(jk->generated().threads, 32 * tc.warps + 128);
    ASSERT_EQ(jk->generated().why_not_pingpong, "");
    ASSERT_EQ(jk->generated().why_not_product_ahead, "");
    ASSERT_EQ(jk->generated().why_not_persistent, "");
    ASSERT_EQ(jk->generated().why_not_late_product, "");
    ASSERT_EQ(jk->generated().why_not_tile_barriers, "");
  }
  if (tc.lazy) { // both key loops skip O's rescale where a thread's factors are 1
    ASSERT_NE(jk->generated().lowered.find("skipped in a warp whose factors"), std::string::npos)
        << jk->generated().lowered;
  }
  const ValidatedAttention a = validate_attention_args(tq, tk, tv, to, tlse, opts);
  TensorMapArgs maps = tensor_map_args(jk->generated().tensor_maps, kernel.params, forward_launch_args(a, lse.ptr()));
  ASSERT_EQ(maps.use_tma, 1) << maps.why_not;

  // A dynamic grid runs three times, its outputs poisoned again before each: every launch must find the counter
  // the last one left at 0 (a program skipped leaves NaN, one run twice is harmless but one skipped is not).
  const AttentionResult ref = reference(p, in);
  const double tol = tolerance(p.dtype, p.tf32);
  for (int run = 0; run < (tc.persistent == 2 ? 3 : 1); ++run) {
    SCOPED_TRACE("launch " + std::to_string(run));
    if (run > 0) {
      o.fill_bytes(0xff);
      lse.fill_bytes(0xff);
    }
    forward(tq, tk, tv, to, tlse, opts);
    rt::Stream::wrap(nullptr).synchronize();
    o.copy_to_host(out.o.bytes.data(), out.o.bytes.size());
    lse.copy_to_host(out.lse.bytes.data(), out.lse.bytes.size());
    const AttentionResult got = gather_outputs(p, out);
    Comparison co = compare_to_reference(got.o, ref.o), cl = compare_to_reference(got.lse, ref.lse);
    EXPECT_TRUE(co.ok(tol)) << "O " << co.str() << " config " << c.str();
    EXPECT_TRUE(cl.ok(tol)) << "LSE " << cl.str() << " config " << c.str();
  }
}

INSTANTIATE_TEST_SUITE_P(
    fa2, GpuAttentionTma,
    ::testing::Values(
        with_tiles(problem(2, 4, 4, 256, 256, 64, DType::f16, 0, false), 128, 64, 4, 2),
        // Tails: the last key tile is cut (zero-filled rows of this head, not the next head's rows).
        with_tiles(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 64, 8, 2),
        with_tiles(problem(1, 8, 2, 129, 77, 128, DType::bf16, 0, false), 128, 32, 4, 3),
        // bshd: the head stride (D) is smaller than the row stride (H·D).
        with_tiles(problem(2, 4, 2, 300, 300, 128, DType::f16, 1, true), 128, 64, 8, 2),
        with_tiles(problem(3, 2, 1, 64, 500, 64, DType::bf16, 2, true), 64, 128, 4, 2),
        // Causal both ways, N_Q != N_K, a deeper ring.
        with_tiles(problem(1, 2, 2, 1000, 700, 64, DType::f16, 1, false), 128, 32, 4, 4),
        with_tiles(problem(1, 2, 2, 257, 1024, 128, DType::bf16, 2, false), 128, 64, 8, 3),
        // A head dim the tiles pad: D = 120 in a 128-wide tile, D = 80 in tiles of 64 and 32 (SPLIT_D); the
        // maps' boxes past D read zeros. D = 96 fills its two tiles (SPLIT_D).
        with_tiles(problem(2, 2, 2, 192, 192, 120, DType::f16, 0, false), 64, 64, 4, 2),
        with_tiles(problem(2, 2, 2, 192, 192, 80, DType::f16, 2, false), 64, 64, 4, 2),
        with_tiles(problem(2, 2, 2, 192, 192, 96, DType::f16, 0, false), 64, 64, 4, 2),
        // Kᵀ loaded as (D, N_K) blocks: the map's inner dim is the head dim.
        with_tiles(transposed_k(problem(1, 4, 4, 256, 300, 64, DType::f16, 1, false)), 128, 64, 4, 2)),
    [](const auto& info) { return label(info.param); });

INSTANTIATE_TEST_SUITE_P(
    fa2_ws, GpuAttentionTma,
    ::testing::Values(
        warp_specialized(problem(2, 4, 4, 256, 256, 64, DType::f16, 0, false), 64, 2),
        // Tails in both key loops' ring; GQA; N_Q != N_K.
        warp_specialized(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 2),
        warp_specialized(problem(1, 8, 2, 129, 77, 128, DType::bf16, 0, false), 64, 3),
        // bshd, both causal alignments: the unmasked loop hands the ring to the masked one mid-phase.
        warp_specialized(problem(2, 4, 2, 300, 300, 128, DType::f16, 1, true), 64, 2),
        warp_specialized(problem(3, 2, 1, 64, 500, 64, DType::bf16, 2, true), 128, 3),
        warp_specialized(problem(1, 2, 2, 1000, 700, 64, DType::f16, 1, false), 64, 3),
        // Bottom-right causal with N_Q > N_K: the first query tiles see no key (both loops run no iteration).
        warp_specialized(problem(1, 2, 2, 1024, 257, 128, DType::bf16, 2, false), 128, 2),
        warp_specialized(problem(2, 2, 2, 192, 192, 96, DType::f16, 0, false), 64, 2),
        warp_specialized(transposed_k(problem(1, 4, 4, 256, 300, 64, DType::f16, 1, false)), 128, 2),
        // One consumer warpgroup: 128 rows, or 64 rows (the space runs it two CTAs an SM).
        warp_specialized(problem(2, 3, 1, 300, 333, 128, DType::bf16, 1, false), 64, 2, 128, 4),
        warp_specialized(problem(2, 3, 3, 300, 333, 64, DType::f16, 2, true), 128, 2, 64, 4),
        // 64 rows and 64 keys at four CTAs an SM (104 registers a consumer): tails, GQA, both causal alignments.
        sharing_an_sm(warp_specialized(problem(2, 3, 3, 200, 333, 64, DType::f16, 1, false), 64, 2, 64, 4), 4),
        sharing_an_sm(warp_specialized(problem(1, 4, 2, 1000, 700, 64, DType::bf16, 2, true), 64, 2, 64, 4), 4),
        // Many key tiles: the ring's phases wrap many times within one program.
        warp_specialized(problem(1, 2, 2, 256, 4096, 128, DType::f16, 0, false), 128, 2),
        // Two head-dim tiles (SPLIT_D): D = 192 as 128 + 64 with GQA, D = 80 padded to 64 + 32 in bshd.
        warp_specialized(problem(1, 4, 2, 300, 333, 192, DType::bf16, 2, false), 64, 2),
        warp_specialized(problem(2, 2, 2, 200, 300, 80, DType::f16, 1, true), 128, 2)),
    [](const auto& info) { return label(info.param); });

// The same kernels with the two consumer warpgroups taking turns at every product (ping-pong): the turns carry
// over from the unmasked to the masked loop, through loops with no iteration, and across many key tiles.
INSTANTIATE_TEST_SUITE_P(
    fa2_pingpong, GpuAttentionTma,
    ::testing::Values(pingpong(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 2),
                      pingpong(problem(1, 8, 2, 129, 77, 128, DType::bf16, 0, false), 64, 3),
                      pingpong(problem(2, 4, 2, 300, 300, 128, DType::f16, 1, true), 64, 2),
                      pingpong(problem(3, 2, 1, 64, 500, 64, DType::bf16, 2, true), 128, 3),
                      pingpong(problem(1, 2, 2, 1024, 257, 128, DType::bf16, 2, false), 128, 2),
                      pingpong(transposed_k(problem(1, 4, 4, 256, 300, 64, DType::f16, 1, false)), 128, 2),
                      pingpong(problem(1, 2, 2, 256, 4096, 128, DType::f16, 0, false), 128, 2)),
    [](const auto& info) { return label(info.param); });

// The same kernels with each key loop's Q Kᵀ issued one iteration ahead: the first and last iterations, loops
// with no iteration (the product before the loop is then never issued), the two loops handing the ring over, a
// 3-stage ring, one consumer warpgroup, and many key tiles.
INSTANTIATE_TEST_SUITE_P(
    fa2_ahead, GpuAttentionTma,
    ::testing::Values(product_ahead(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 2),
                      product_ahead(problem(1, 8, 2, 129, 77, 128, DType::bf16, 0, false), 64, 3),
                      product_ahead(problem(2, 4, 2, 300, 300, 128, DType::f16, 1, true), 64, 2),
                      product_ahead(problem(3, 2, 1, 64, 500, 64, DType::bf16, 2, true), 128, 3),
                      product_ahead(problem(1, 2, 2, 1024, 257, 128, DType::bf16, 2, false), 128, 2),
                      product_ahead(transposed_k(problem(1, 4, 4, 256, 300, 64, DType::f16, 1, false)), 128, 2),
                      product_ahead(problem(2, 3, 1, 300, 333, 128, DType::bf16, 1, false), 64, 2, 128, 4),
                      product_ahead(problem(1, 2, 2, 256, 4096, 128, DType::f16, 0, false), 128, 2)),
    [](const auto& info) { return label(info.param); });

// The same kernels with each key loop's P V issued after the next iteration's Q Kᵀ (LAST_PRODUCT_LATE=1): loops
// with one iteration and with none (bottom-right, N_Q > N_K), the two loops each issuing their last product after
// the loop, 2- and 3-stage rings, one consumer warpgroup, many key tiles, and a persistent grid.
INSTANTIATE_TEST_SUITE_P(
    fa2_late, GpuAttentionTma,
    ::testing::Values(late(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 2),
                      late(problem(1, 8, 2, 129, 77, 128, DType::bf16, 0, false), 64, 3),
                      late(problem(2, 4, 2, 300, 300, 128, DType::f16, 1, true), 64, 2),
                      late(problem(3, 2, 1, 64, 500, 64, DType::bf16, 2, true), 128, 3),
                      late(problem(1, 2, 2, 1024, 257, 128, DType::bf16, 2, false), 128, 2),
                      late(transposed_k(problem(1, 4, 4, 256, 300, 64, DType::f16, 1, false)), 128, 2),
                      late(problem(2, 3, 1, 300, 333, 128, DType::bf16, 1, false), 64, 2, 128, 4),
                      late(problem(1, 2, 2, 256, 4096, 128, DType::f16, 0, false), 128, 3),
                      late(problem(3, 16, 4, 333, 777, 128, DType::bf16, 2, true), 128, 2, 128, 8, true),
                      // Two head-dim tiles (SPLIT_D): four products an iteration.
                      late(problem(1, 2, 2, 300, 1000, 96, DType::f16, 2, false), 128, 3),
                      late(problem(2, 2, 2, 256, 700, 192, DType::bf16, 0, false), 64, 3)),
    [](const auto& info) { return label(info.param); });

// The same kernels with LAZY_RESCALE=1 (inputs in [-2, 2]: a row's max passes the 2^8 slack in some key tiles and not
// in others): the space's tiles (64 rows over one consumer warpgroup; 128 rows, late, 3 stages), both causal
// alignments, tails, GQA, bshd, two head-dim tiles, and a persistent grid.
INSTANTIATE_TEST_SUITE_P(
    fa2_lazy_rescale, GpuAttentionTma,
    ::testing::Values(lazy(warp_specialized(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 2, 64, 4)),
                      lazy(warp_specialized(problem(3, 2, 1, 64, 500, 64, DType::bf16, 2, true), 64, 2, 64, 4)),
                      lazy(late(problem(2, 4, 2, 300, 300, 128, DType::f16, 1, true), 128, 3)),
                      lazy(late(problem(1, 2, 2, 256, 4096, 128, DType::bf16, 0, false), 64, 3)),
                      lazy(late(problem(1, 2, 2, 300, 1000, 96, DType::f16, 2, false), 128, 3)),
                      lazy(late(problem(3, 16, 4, 333, 777, 128, DType::bf16, 2, true), 128, 3, 128, 8, true))),
    [](const auto& info) { return label(info.param); });

// The same with part of P's exponentials on the FMA pipe (EXP2_ON_FMA): the 64-row tile at D = 64 (one in four,
// both causal alignments, tails), the late 128-row tile at D = 128 with LAZY_RESCALE (one in two, alpha's too: 2^0
// must stay exactly 1 for the rescale to be skipped), and every exponential (one in one) with GQA and bshd.
INSTANTIATE_TEST_SUITE_P(
    fa2_exp2_on_fma, GpuAttentionTma,
    ::testing::Values(exp2_on_fma(warp_specialized(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 2, 64, 4), 4),
                      exp2_on_fma(warp_specialized(problem(3, 2, 1, 64, 500, 64, DType::bf16, 2, true), 128, 2, 64, 4), 4),
                      exp2_on_fma(lazy(late(problem(2, 4, 2, 300, 300, 128, DType::f16, 1, true), 128, 3)), 2),
                      exp2_on_fma(late(problem(1, 2, 2, 256, 4096, 128, DType::bf16, 0, false), 64, 3), 1)),
    [](const auto& info) { return label(info.param); });

// The late tiles with a full and an empty mbarrier per tile of each slot (TILE_BARRIERS=1: K's tile back after
// S's wait, V's an iteration later, each waited for where it is loaded): two stages (which hold only one iteration's
// K and V under one pair a slot), loops with one iteration and none, both causal alignments, GQA, bshd, many key
// tiles, D = 256 over 64-key tiles, ping-pong, and static and dynamic persistent grids.
INSTANTIATE_TEST_SUITE_P(
    fa2_tile_barriers, GpuAttentionTma,
    ::testing::Values(tile_barriers(late(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 2)),
                      tile_barriers(late(problem(2, 4, 2, 300, 300, 128, DType::f16, 1, true), 128, 2)),
                      tile_barriers(late(problem(3, 2, 1, 64, 500, 64, DType::bf16, 2, true), 128, 2)),
                      tile_barriers(late(problem(1, 2, 2, 256, 4096, 128, DType::bf16, 0, false), 128, 2)),
                      tile_barriers(late(problem(1, 2, 2, 300, 1000, 256, DType::f16, 1, false), 64, 2)),
                      tile_barriers(late(problem(2, 3, 3, 333, 500, 128, DType::f16, 0, false), 128, 3)),
                      tile_barriers(late_pingpong(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 2)),
                      tile_barriers(late(problem(3, 16, 4, 333, 777, 128, DType::bf16, 2, true), 128, 2, 128, 8, 1)),
                      tile_barriers(late(problem(3, 16, 4, 333, 777, 128, DType::bf16, 1, false), 128, 2, 128, 8, 2))),
    [](const auto& info) { return label(info.param); });

// The same with the two consumer warpgroups taking turns (PINGPONG=1), an iteration's Q Kᵀ and the previous P V in
// one turn: one and no iteration in a loop, both loops, 2 and 3 stages, many key tiles.
INSTANTIATE_TEST_SUITE_P(
    fa2_late_pingpong, GpuAttentionTma,
    ::testing::Values(late_pingpong(problem(2, 3, 3, 200, 333, 64, DType::f16, 0, false), 128, 3),
                      late_pingpong(problem(2, 4, 2, 300, 300, 128, DType::f16, 1, true), 64, 2),
                      late_pingpong(problem(3, 2, 1, 64, 500, 64, DType::bf16, 2, true), 128, 3),
                      late_pingpong(problem(1, 2, 2, 256, 4096, 128, DType::bf16, 0, false), 128, 3)),
    [](const auto& info) { return label(info.param); });

// The warp-specialised kernels on a persistent grid (PERSISTENT=1): one CTA an SM walks the programs of every
// (batch, head), so most CTAs take several query tiles, their producer running into the next tile's K and V
// while the consumers store the last tile's O. More programs than SMs in every case but the last; heads whose
// first query tiles see no key (bottom-right, N_Q > N_K); tails of both sequences and of the head dim; GQA;
// bshd; causal tiles launched heaviest first within each head; one consumer warpgroup. Each program copies the next
// one's Q after its key loops (PersistentPrefetch), or into a second buffer where it starts (where one fits), so a
// wrong next program id or a copy that lands on a Q still being read shows here.
INSTANTIATE_TEST_SUITE_P(
    fa2_persistent, GpuAttentionTma,
    ::testing::Values(persistent(problem(4, 8, 8, 1000, 1000, 64, DType::f16, 0, false), 128, 2),
                      persistent(problem(4, 8, 2, 1000, 1000, 64, DType::f16, 1, false), 64, 2),
                      persistent(problem(3, 16, 4, 333, 777, 128, DType::bf16, 2, true), 128, 3),
                      persistent(problem(2, 16, 16, 1024, 257, 128, DType::bf16, 2, false), 64, 2),
                      persistent(problem(2, 12, 12, 600, 600, 96, DType::f16, 1, true), 64, 2),
                      persistent(transposed_k(problem(2, 32, 8, 256, 300, 64, DType::f16, 1, false)), 128, 2),
                      persistent(problem(8, 8, 8, 300, 333, 128, DType::bf16, 1, false), 64, 2, 128, 4),
                      persistent(problem(1, 2, 2, 256, 4096, 128, DType::f16, 0, false), 128, 2),
                      // Late products, about eight programs a CTA: Q copied for the next program under the epilogue.
                      late(problem(8, 16, 4, 1024, 1024, 128, DType::bf16, 1, false), 128, 3, 128, 8, 1),
                      late(problem(8, 16, 16, 1000, 1100, 128, DType::f16, 0, true), 128, 3, 128, 8, 1),
                      // Two stages with tile barriers: Q in two buffers, the producer copying each program's Q into
                      // the turn's buffer once the program two turns before is done with it (plan_producer_tiles);
                      // several programs a CTA, tails.
                      tile_barriers(late(problem(8, 16, 4, 1024, 1024, 128, DType::bf16, 0, false), 128, 2, 128, 8, 1)),
                      tile_barriers(late(problem(6, 16, 16, 700, 900, 128, DType::f16, 1, true), 128, 2, 128, 8, 1)),
                      tile_barriers(late(problem(8, 16, 8, 1000, 1000, 64, DType::f16, 2, false), 128, 2, 128, 8, 1))),
    [](const auto& info) { return label(info.param); });

// The same on a dynamic persistent grid (PERSISTENT=2): the producer draws each CTA's next program from the
// launch's counter and hands it to the consumers; causal tiles heaviest first across a group of heads (the ids
// start in that order). Each case launches three times (the counter must be back at 0 each time). Also the
// 64-row tile at two CTAs an SM, whose two CTAs draw from one counter.
INSTANTIATE_TEST_SUITE_P(
    fa2_dynamic, GpuAttentionTma,
    ::testing::Values(dynamic(persistent(problem(4, 8, 8, 1000, 1000, 64, DType::f16, 0, false), 128, 2)),
                      dynamic(persistent(problem(4, 8, 2, 1000, 1000, 64, DType::f16, 1, false), 64, 2)),
                      dynamic(persistent(problem(3, 16, 4, 333, 777, 128, DType::bf16, 2, true), 128, 3)),
                      dynamic(persistent(problem(2, 12, 12, 600, 600, 96, DType::f16, 1, true), 64, 2)),
                      dynamic(persistent(transposed_k(problem(2, 32, 8, 256, 300, 64, DType::f16, 1, false)), 128, 2)),
                      dynamic(persistent(problem(8, 8, 8, 300, 333, 128, DType::bf16, 1, false), 64, 2, 128, 4)),
                      dynamic(persistent(problem(1, 2, 2, 256, 4096, 128, DType::f16, 0, false), 128, 2)),
                      dynamic(persistent(problem(8, 16, 16, 1024, 1024, 64, DType::f16, 1, false), 128, 2, 64, 4), 2),
                      late(problem(4, 16, 4, 1024, 1024, 128, DType::bf16, 1, false), 128, 3, 128, 8, 2),
                      // Two stages with tile barriers: Q in two buffers filled by the producer, which draws the ids.
                      tile_barriers(late(problem(8, 16, 4, 1024, 1024, 128, DType::bf16, 1, false), 128, 2, 128, 8, 2)),
                      tile_barriers(late(problem(6, 16, 16, 700, 900, 128, DType::f16, 2, true), 128, 2, 128, 8, 2)),
                      late(problem(8, 8, 8, 1000, 1100, 128, DType::f16, 0, true), 128, 3, 128, 8, 2)),
    [](const auto& info) { return label(info.param); });

} // namespace
