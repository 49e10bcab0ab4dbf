// Row vectors of a warp-specialised dot loop staged through the producer's ring (assign_layouts'
// stage_register_loads): dK/dV's LSE and Delta, one unswizzled TMA copy each beside Q and dO, read from the slot
// where each register is used. Renderings that do not ask for a producer (the illegal-maps fallback, other configs,
// sm_80) keep their loads into registers; one whose producer is refused later copies its staged vectors itself.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "dsl/dsl.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kiln_test {
namespace {

const std::map<std::string, int64_t> kDkdvWs = {
    {"HEAD_DIM", 64}, {"BLOCK_N", 128}, {"BLOCK_M", 64}, {"num_warps", 8}, {"WARP_SPECIALIZE", 1}};

// The staged vectors of `loop`'s ring, in ring order.
std::vector<const SharedTile*> staged_vectors(const Planned& p, const Op* loop) {
  std::vector<const SharedTile*> out;
  for (const Op* load : p.plan.pipelined.at(loop)) {
    const SharedTile& t = p.plan.tiles[p.plan.tile_of.at(load->result())];
    if (t.to_registers && t.rows == 1)
      out.push_back(&t);
  }
  return out;
}

TEST(StagedVectors, DkdvsLseAndDeltaRideTheProducersRingAsOneUnswizzledCopyEach) {
  for (int64_t atomic_dq : {0, 1}) {
    SCOPED_TRACE("ATOMIC_DQ=" + std::to_string(atomic_dq));
    std::map<std::string, int64_t> o = kDkdvWs;
    o["ATOMIC_DQ"] = atomic_dq;
    const Planned p = plan_for("fa2_bwd_dkdv", o, "sm_90a");
    ASSERT_TRUE(p.plan.ws.on()) << p.plan.ws.why_not;
    for (const Op* loop : ops_of(p.kernel, OpKind::For)) {
      const std::vector<const Op*>& ring = p.plan.pipelined.at(loop);
      ASSERT_EQ(ring.size(), 4u); // Q, dO, then LSE and Delta
      const std::vector<const SharedTile*> vectors = staged_vectors(p, loop);
      ASSERT_EQ(vectors.size(), 2u);
      // The slot is waited for by the loop's first tile (Q), which every vector follows.
      EXPECT_FALSE(p.plan.tiles[p.plan.tile_of.at(ring.front()->result())].to_registers);
      for (const SharedTile* t : vectors) {
        EXPECT_EQ(t->cols, 64);
        EXPECT_EQ(t->elem_bytes, 4);
        EXPECT_EQ(t->stages, 2);
        const TmaCopy& c = p.plan.tma.copies.at(t->load);
        EXPECT_EQ(c.panels, 1);
        EXPECT_EQ(c.panel_elems, 64);
        EXPECT_EQ(c.bytes_per_stage, 256);
        const TensorMapParam& m = p.plan.tma.maps[static_cast<size_t>(c.map)];
        EXPECT_EQ(m.swizzle, SwizzleMode::None);
        EXPECT_EQ(m.box, std::vector<int64_t>{64});
        EXPECT_FALSE(m.outer.empty()) << "LSE + (b·H + h)·N_Q: the base's per-program terms are the map's outer dims";
      }
    }
  }
}

TEST(StagedVectors, OnlyAProducersRingStagesThem) {
  struct Case {
    std::string why;
    std::map<std::string, int64_t> overrides;
    std::string arch;
    CodegenOptions options;
  };
  std::map<std::string, int64_t> plain = kDkdvWs;
  plain["WARP_SPECIALIZE"] = 0;
  CodegenOptions unspecialized;
  unspecialized.warp_specialize = false;
  const std::vector<Case> cases = {{"not asked", plain, "sm_90a", {}},
                                   {"no producer on sm_80", kDkdvWs, "sm_80", {}},
                                   {"the illegal maps' rendering", kDkdvWs, "sm_90a", unspecialized}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    const Planned p = plan_for("fa2_bwd_dkdv", c.overrides, c.arch, c.options);
    // The three query loops (unspecialised, a loop over a GQA group's query heads holds them).
    ASSERT_EQ(p.plan.pipelined.size(), 3u);
    for (const auto& [loop, loads] : p.plan.pipelined) {
      EXPECT_EQ(loads.size(), 2u);
      EXPECT_TRUE(staged_vectors(p, loop).empty());
    }
  }
}

// The consumers read each vector from its slot where a register of it is used: no array of it is declared, and the
// illegal maps' rendering loads it into registers as before.
TEST(StagedVectors, ConsumersReadTheSlotAtEachUse) {
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  const GeneratedKernel g = generate_cuda(def.build(def.with_overrides(def.default_config(), kDkdvWs)),
                                          Target::parse("sm_90a"));
  ASSERT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
      ++n;
    return n;
  };
  // Three query loops (masked, unmasked, masked), two vectors each.
  EXPECT_EQ(count(g.source, "= kiln_reads_at_use("), 6u);
  EXPECT_NE(g.lowered.find("read from its ring slot where each register is used (staged by TMA)"), std::string::npos);
  ASSERT_TRUE(g.illegal_maps_fallback);
  EXPECT_EQ(count(g.illegal_maps_fallback->source, "kiln_reads_at_use"), 0u);
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  expect_compiles_without_spills(g, "sm_90a");
}

// A dot loop whose tiles cannot be copied by TMA (Q's block shape is computed in the kernel, so no tensor map
// describes it): asked for a producer, it is refused one after the vectors were staged, and the consumers copy
// the vector into the ring as they copy its tiles (cp.async chunks), then read it at each use.
Kernel build_vector_beside_an_unmappable_tile() {
  Config config;
  config.num_warps = 4;
  config.num_stages = 2;
  config.set("WARP_SPECIALIZE", 1);
  KernelBuilder kb("vector_beside_an_unmappable_tile", config);
  Value kp = kb.arg_ptr("K", f16), qp = kb.arg_ptr("Q", f16), rp = kb.arg_ptr("R", f32), op = kb.arg_ptr("O", f32);
  Value n = kb.arg("N", i32);
  Value k = load(make_block_ptr(kp, {64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0}));
  Value q_ptr = make_block_ptr(qp, {n + 1, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0});
  Value r_ptr = make_block_ptr(rp, {n}, {1}, {0}, {64}, {0});
  Value acc = zeros({64, 64}, f32);
  for_range(0, n, 64, [&](Value) {
    Value s = dot(k, trans(load(q_ptr, {0})));
    Value r = load(r_ptr, {0});
    acc = acc + exp2(s - r.expand_dims(0));
    q_ptr = advance(q_ptr, {64, 0});
    r_ptr = advance(r_ptr, {64});
  });
  store(make_block_ptr(op, {64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0}), acc);
  return kb.finish();
}

TEST(StagedVectors, ARefusedProducersVectorsAreCopiedByTheConsumers) {
  const Planned p = plan_kernel(build_vector_beside_an_unmappable_tile(), "sm_90a");
  EXPECT_FALSE(p.plan.ws.on());
  ASSERT_EQ(p.plan.pipelined.size(), 1u);
  EXPECT_EQ(staged_vectors(p, p.plan.pipelined.begin()->first).size(), 1u);
  const GeneratedKernel g = generate_cuda(build_vector_beside_an_unmappable_tile(), Target::parse("sm_90a"));
  EXPECT_NE(g.why_not_warp_specialized.find("not copied by TMA"), std::string::npos) << g.why_not_warp_specialized;
  EXPECT_NE(g.source.find("-> shared [64] float"), std::string::npos); // the consumers' copy of the vector
  EXPECT_NE(g.source.find("= kiln_reads_at_use("), std::string::npos);
  expect_nvrtc_compiles(g, "sm_90a");
}

} // namespace
} // namespace kiln_test
