// plan_warp_specialization (codegen/plan_warp_specialization.h): when a config's WARP_SPECIALIZE=1 splits the
// program into a producer warpgroup and consumers, what the producer recomputes, the registers each side keeps,
// and why a kernel or target that does not allow it keeps the code it had.
#include "codegen/codegen.h"
#include "codegen/plan_warp_specialization.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "dsl/dsl.h"
#include "kernels/attention/fa2_bwd_block_mask.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kiln_test {
namespace {

const std::map<std::string, int64_t> kTunedWs = {{"BLOCK_M", 128}, {"BLOCK_N", 256},         {"BLOCK_K", 64},
                                                 {"MIN_BLOCKS_PER_SM", 1}, {"WARP_SPECIALIZE", 1}};

TEST(WarpSpecialization, MatmulOnSm90aGetsAProducerForItsTmaLoop) {
  Planned p = plan_for("matmul", kTunedWs, "sm_90a");
  const WarpSpecialization& ws = p.plan.ws;
  ASSERT_TRUE(ws.on()) << ws.why_not;
  EXPECT_TRUE(ws.why_not.empty());
  std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
  ASSERT_EQ(loops.size(), 1u);
  EXPECT_EQ(ws.loops, loops);
  EXPECT_EQ(ws.consumer_threads, 256); // matmul's 8 warps
  EXPECT_EQ(ws.threads(), 384);
  // __launch_bounds__(384, 1) leaves 170 registers a thread: 168 at entry; the producer's 128 threads give
  // back 144 each, which the 256 consumers take (72 each: 240, setmaxnreg's most that kiln gives).
  EXPECT_EQ(ws.entry_registers, 168);
  EXPECT_EQ(ws.producer_registers, 24);
  EXPECT_EQ(ws.consumer_registers, 240);
  // The producer recomputes the grouped program order and the two block pointers: scalar ops at the top of
  // the kernel, before the loop, in program order.
  ASSERT_FALSE(ws.producer_ops.empty());
  std::vector<const Op*> top;
  for (const auto& op : p.kernel.body.ops)
    top.push_back(op.get());
  const auto loop_at = std::find(top.begin(), top.end(), ws.loops.front());
  size_t last = 0;
  int makes = 0;
  for (const Op* op : ws.producer_ops) {
    auto at = std::find(top.begin(), loop_at, op);
    ASSERT_NE(at, loop_at) << op_name(op->kind) << " at " << op->loc.str() << " is not before the loop";
    EXPECT_GE(static_cast<size_t>(at - top.begin()), last);
    last = static_cast<size_t>(at - top.begin());
    const Placement where = p.plan.where(op->result());
    EXPECT_TRUE(where == Placement::Scalar || where == Placement::BlockPtr) << op_name(op->kind);
    makes += op->kind == OpKind::MakeBlockPtr;
    EXPECT_NE(op->kind, OpKind::Load);
  }
  EXPECT_EQ(makes, 2); // A's and B's, not C's (the store's block pointer is the consumers' alone)
  // Full and empty barriers for each slot of the 3-stage ring.
  EXPECT_EQ(p.plan.tma.barrier_bytes, 2 * 8 * 3);
}

// A matmul whose K loop ends at a bound read from memory (*k_end), as a block mask's runs do; with
// `writes_bound`, the kernel also stores to that tensor.
Kernel matmul_with_loaded_bound(bool writes_bound) {
  Config config;
  config.set("WARP_SPECIALIZE", 1);
  config.num_warps = 8;
  config.num_stages = 3;
  KernelBuilder kb("matmul_with_loaded_bound", config);
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), c = kb.arg_ptr("c", f32);
  Value k_end_ptr = kb.arg_ptr("k_end", i32);
  Value M = kb.arg("M", i32), N = kb.arg("N", i32), K = kb.arg("K", i32);
  Value k_end = load(k_end_ptr).named("k_end_value");
  Value pa = make_block_ptr(a, {M, K}, {K, 1}, {program_id(0) * 128, 0}, {128, 64}, {1, 0});
  Value pb = make_block_ptr(b, {K, N}, {N, 1}, {0, program_id(1) * 128}, {64, 128}, {1, 0});
  Value acc = zeros({128, 128}, f32);
  for_range(0, k_end, 64, [&](Value) {
    acc = dot(load(pa), load(pb), acc);
    pa = advance(pa, {0, 64});
    pb = advance(pb, {64, 0});
  });
  store(make_block_ptr(c, {M, N}, {N, 1}, {program_id(0) * 128, program_id(1) * 128}, {128, 128}, {1, 0}), acc);
  if (writes_bound)
    store(k_end_ptr, k_end + 1);
  return kb.finish();
}

// The producer reads a loop bound from memory itself where the kernel never writes that tensor (the consumers
// read the same value whenever they read it), and refuses where the kernel writes it.
TEST(WarpSpecialization, ProducerLoadsScalarsOfTensorsTheKernelNeverWrites) {
  const Planned read_only = plan_kernel(matmul_with_loaded_bound(false), "sm_90a");
  ASSERT_TRUE(read_only.plan.ws.on()) << read_only.plan.ws.why_not;
  EXPECT_EQ(std::count_if(read_only.plan.ws.producer_ops.begin(), read_only.plan.ws.producer_ops.end(),
                          [](const Op* op) { return op->kind == OpKind::Load; }),
            1);
  const Planned written = plan_kernel(matmul_with_loaded_bound(true), "sm_90a");
  EXPECT_FALSE(written.plan.ws.on());
  EXPECT_NE(written.plan.ws.why_not.find("tensors the kernel never writes"), std::string::npos)
      << written.plan.ws.why_not;
}

// FA2's forward has two key loops (unmasked, then masked) whose K/V tiles occupy the same bytes: one producer
// walks both, filling one ring whose barriers the second loop continues.
TEST(WarpSpecialization, Fa2ForwardsTwoKeyLoopsShareOneRing) {
  for (int64_t causal : {0, 1, 2}) {
    SCOPED_TRACE("CAUSAL=" + std::to_string(causal));
    Planned p = plan_for("fa2_fwd",
                         {{"HEAD_DIM", 128}, {"BLOCK_N", 128}, {"CAUSAL", causal}, {"WARP_SPECIALIZE", 1}}, "sm_90a");
    const WarpSpecialization& ws = p.plan.ws;
    ASSERT_TRUE(ws.on()) << ws.why_not;
    std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
    ASSERT_EQ(loops.size(), 2u);
    EXPECT_EQ(ws.loops, loops); // in program order
    EXPECT_EQ(p.plan.tma.loops.at(loops[0]), 0);
    EXPECT_EQ(p.plan.tma.loops.at(loops[1]), 0);
    // One ring of 2 slots: full and empty barriers; and Q's pair, which the producer copies before the loops
    // (plan_producer_tiles.h; one buffer, its empty barrier unused).
    EXPECT_EQ(p.plan.tma.barrier_bytes, 2 * 8 * 2 + 2 * 8);
    EXPECT_EQ(p.plan.producer_tiles.tiles.size(), 1u) << p.plan.producer_tiles.why_not;
    EXPECT_EQ(ws.consumer_registers, 240);
    // The consumers wait for Q where the program loads it, not with the loops' first tiles.
    EXPECT_TRUE(p.plan.unwaited_loads.empty());
    // The producer recomputes only scalars and block pointers; the masked loop starts from the block pointers
    // the unmasked one leaves, which the producer carries itself.
    for (const Op* op : ws.producer_ops) {
      const Placement where = p.plan.where(op->result());
      EXPECT_TRUE(where == Placement::Scalar || where == Placement::BlockPtr) << op_name(op->kind);
      EXPECT_NE(op->kind, OpKind::For);
    }
  }
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  const GeneratedKernel g = generate_cuda(
      def.build(def.with_overrides(def.default_config(), {{"HEAD_DIM", 128}, {"CAUSAL", 1}, {"WARP_SPECIALIZE", 1}})),
      Target::parse("sm_90a"));
  EXPECT_EQ(g.threads, 384);
  EXPECT_EQ(occurrences(g.source, "__syncthreads();"), 1) << g.source;
  EXPECT_EQ(occurrences(g.source, "unsigned long long kiln_full"), 1) << g.source;
  EXPECT_NE(g.lowered.find("the producer goes on filling the ring of the loop at"), std::string::npos) << g.lowered;
}

// dK/dV with WARP_SPECIALIZE=1 (no loop over a group's query heads): its three query loops (masked, unmasked,
// masked) share one ring that a producer fills with Q and dO (and LSE, Delta) by TMA; at D = 64 it compiles
// without spills (at D = 128 ptxas spills 8 bytes at the consumers' 240 registers, 108 at the 224 they had while the
// producer kept a cp.async path: worklog §71, §81). One tile of the space spills: 128 × 128 at D = 64, 164 bytes,
// since its products are no longer put in series (C7520, worklog §92); it measured 9.26 → 9.09 ms on an H200 all
// the same, beaten by the 64 × 64 tile's 8.78, and stays in the space for other shapes.
TEST(WarpSpecialization, DkdvsThreeQueryLoopsShareOneRing) {
  for (int64_t causal : {0, 2}) {
    SCOPED_TRACE("CAUSAL=" + std::to_string(causal));
    Planned p = plan_for("fa2_bwd_dkdv",
                         {{"HEAD_DIM", 64}, {"BLOCK_N", 128}, {"BLOCK_M", 64}, {"CAUSAL", causal},
                          {"WARP_SPECIALIZE", 1}, {"num_warps", 8}},
                         "sm_90a");
    const WarpSpecialization& ws = p.plan.ws;
    ASSERT_TRUE(ws.on()) << ws.why_not;
    const std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
    ASSERT_EQ(loops.size(), 3u);
    EXPECT_EQ(ws.loops, loops);
    for (const Op* loop : loops)
      EXPECT_EQ(p.plan.tma.loops.at(loop), 0);
  }
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  for (const Config& c : def.config_space())
    if (c.get_or("WARP_SPECIALIZE", 0) == 1 && !(c.get("BLOCK_M") == 128 && c.get("BLOCK_N") == 128)) {
      SCOPED_TRACE(c.str());
      const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
      ASSERT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
      expect_compiles_without_spills(g, "sm_90a");
    }
}

// dQ's space offers two warp-specialised tiles (128 query rows over 8 warps, 64- or 128-key steps), each also on a
// static persistent grid. Dense, its two
// key loops specialise with GQA too (dQ has no loop over a group's heads); over a block mask, whose key tiles come
// from lists read in the kernel, the producer cannot recompute the loops' bounds and the config is the unspecialised
// one (pruned by the tuner).
TEST(WarpSpecialization, DqsTileSpecialisesDenseButNotOverABlockMask) {
  const std::map<std::string, int64_t> tile = {
      {"HEAD_DIM", 128}, {"BLOCK_M", 128}, {"BLOCK_N", 64}, {"num_warps", 8}, {"WARP_SPECIALIZE", 1}};
  const KernelDef& dense = builtin_kernels().find("fa2_bwd_dq");
  const std::vector<Config> space = dense.config_space();
  for (int64_t persistent : {0, 1})
    EXPECT_EQ(std::count_if(space.begin(), space.end(),
                            [&](const Config& c) {
                              return c.get("WARP_SPECIALIZE") == 1 && c.get("PERSISTENT") == persistent;
                            }),
              2);
  for (int64_t causal : {0, 1}) {
    std::map<std::string, int64_t> o = tile;
    o["CAUSAL"] = causal;
    const Config c = dense.with_overrides(dense.default_config(), o);
    const GeneratedKernel g = generate_cuda(dense.build(c), Target::parse("sm_90a"));
    EXPECT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
    EXPECT_EQ(g.threads, 384);
    EXPECT_EQ(dense.prune(c, {{"B", 1}, {"H", 8}, {"H_KV", 2}, {"N_Q", 4096}, {"N_K", 4096}, {"D", 128}}), "");
    const KernelDef& masked = fa2_bwd_dq_block_mask_def();
    const GeneratedKernel m =
        generate_cuda(masked.build(masked.with_overrides(masked.default_config(), o)), Target::parse("sm_90a"));
    EXPECT_FALSE(m.why_not_warp_specialized.empty());
    EXPECT_EQ(m.threads, 256);
  }
}

// Both of dQ's warp-specialised tiles compile without spills at the common head dims, causal (both key loops), on
// the usual grid and the persistent one: the 128-key step holds S and dP of 64 rows by 128 keys a warpgroup (64
// registers each) beside dQ's 32.
TEST(WarpSpecialization, DqsWarpSpecialisedTilesCompileWithoutSpills) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dq");
  int compiled = 0;
  for (const int64_t head_dim : {64, 128})
    for (Config c : def.config_space()) {
      if (c.get("WARP_SPECIALIZE") == 0)
        continue;
      c.set("HEAD_DIM", head_dim).set("CAUSAL", 1);
      SCOPED_TRACE(c.str());
      const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
      ASSERT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
      expect_compiles_without_spills(g, "sm_90a");
      ++compiled;
    }
  EXPECT_EQ(compiled, 8);
}

TEST(WarpSpecialization, GeneratedKernelHasTheProducerThreadsAndNoCtaBarrierInTheProgram) {
  const KernelDef& def = builtin_kernels().find("matmul");
  const Kernel k = def.build(def.with_overrides(def.default_config(), kTunedWs));
  const GeneratedKernel g = generate_cuda(k, Target::parse("sm_90a"));
  EXPECT_EQ(g.threads, 384);
  EXPECT_TRUE(g.why_not_warp_specialized.empty());
  // The only __syncthreads is the one after the barriers' initialisation, before the roles split; the
  // consumers' barriers are named barriers the producer never joins.
  EXPECT_EQ(occurrences(g.source, "__syncthreads();"), 1) << g.source;
  EXPECT_NE(g.lowered.find("warp-specialised"), std::string::npos) << g.lowered;
  EXPECT_NE(g.lowered.find("setmaxnreg: producer 24 registers, consumers 240"), std::string::npos) << g.lowered;
  // The producer copies by TMA alone: no cp.async in the kernel, and `kiln_tma` only in its parameter list.
  EXPECT_EQ(occurrences(g.source, "kiln::cp_async_16("), 0) << g.source;
  EXPECT_EQ(occurrences(g.source, "kiln_tma"), 1) << g.source;
  // A launch whose maps are illegal runs the same config generated without warp specialisation: every thread
  // copies, by TMA or by cp.async as its maps allow.
  ASSERT_TRUE(g.illegal_maps_fallback);
  const GeneratedKernel& fallback = *g.illegal_maps_fallback;
  EXPECT_EQ(fallback.name, g.name);
  EXPECT_EQ(fallback.threads, 256);
  EXPECT_EQ(fallback.why_not_warp_specialized, "CodegenOptions::warp_specialize is off");
  // Its copies read the same maps; it stores C from registers (TMA stores are the warp-specialised kernel's).
  EXPECT_EQ(fallback.tma_store_maps, 0);
  EXPECT_EQ(fallback.tensor_maps.size() + static_cast<size_t>(g.tma_store_maps), g.tensor_maps.size());
  EXPECT_NE(fallback.source.find("kiln::cp_async_16("), std::string::npos);
  EXPECT_FALSE(fallback.illegal_maps_fallback);
  EXPECT_EQ(generate_cuda(k, Target::parse("sm_90a"), CodegenOptions{}).source, g.source);
}

TEST(WarpSpecialization, FewThreadsMoveNoRegisters) {
  // 4 consumer warps + the producer: 256 threads may each hold 255 registers already.
  std::map<std::string, int64_t> o = kTunedWs;
  o["BLOCK_N"] = 128;
  o["num_warps"] = 4;
  Planned p = plan_for("matmul", o, "sm_90a");
  ASSERT_TRUE(p.plan.ws.on()) << p.plan.ws.why_not;
  EXPECT_EQ(p.plan.ws.threads(), 256);
  EXPECT_EQ(p.plan.ws.consumer_registers, 0);
  EXPECT_EQ(p.plan.ws.producer_registers, 0);
}

TEST(WarpSpecialization, RegisterBudgetsBalance) {
  struct Case {
    int consumers, blocks;
    bool draws;
    int entry, producer, consumer;
  };
  for (const Case c : {Case{256, 1, false, 168, 24, 240}, Case{128, 1, false, 0, 0, 0},
                       Case{128, 2, false, 128, 24, 232}, Case{512, 1, false, 96, 24, 112},
                       Case{256, 2, false, 80, 24, 104}, Case{256, 1, true, 168, 32, 232},
                       Case{128, 2, true, 128, 32, 224}}) {
    WarpSpecialization ws;
    plan_register_reallocation(c.consumers, c.blocks, c.draws, ws);
    EXPECT_EQ(ws.entry_registers, c.entry) << c.consumers << " consumers, " << c.blocks << " blocks";
    EXPECT_EQ(ws.producer_registers, c.producer);
    EXPECT_EQ(ws.consumer_registers, c.consumer);
    if (ws.consumer_registers) {
      // setmaxnreg.inc blocks until the pool has the registers: the consumers never take more than the
      // producer gave back, and every count is a multiple of 8 in [24, 256].
      EXPECT_LE((ws.consumer_registers - ws.entry_registers) * c.consumers,
                (ws.entry_registers - ws.producer_registers) * WarpSpecialization::kProducerThreads);
      for (int n : {ws.entry_registers, ws.producer_registers, ws.consumer_registers}) {
        EXPECT_EQ(n % 8, 0);
        EXPECT_GE(n, 24);
        EXPECT_LE(n, 256);
      }
      EXPECT_LE((c.consumers + WarpSpecialization::kProducerThreads) * ws.entry_registers * c.blocks, 64 * 1024);
    }
  }
}

TEST(WarpSpecialization, NotAskedNotDone) {
  Planned p = plan_for("matmul", {{"BLOCK_K", 64}}, "sm_90a");
  EXPECT_FALSE(p.plan.ws.on());
  EXPECT_TRUE(p.plan.ws.why_not.empty());
}

TEST(WarpSpecialization, SaysWhyWhereItDoesNotApply) {
  Planned ampere = plan_for("matmul", kTunedWs, "sm_80");
  EXPECT_FALSE(ampere.plan.ws.on());
  EXPECT_NE(ampere.plan.ws.why_not.find("sm_80 has no TMA"), std::string::npos) << ampere.plan.ws.why_not;

  CodegenOptions off;
  off.warp_specialize = false;
  Planned switched_off = plan_for("matmul", kTunedWs, "sm_90a", off);
  EXPECT_FALSE(switched_off.plan.ws.on());
  EXPECT_EQ(switched_off.plan.ws.why_not, "CodegenOptions::warp_specialize is off");

  CodegenOptions no_tma;
  no_tma.tma = false;
  Planned cp_async = plan_for("matmul", kTunedWs, "sm_90a", no_tma);
  EXPECT_FALSE(cp_async.plan.ws.on());
  EXPECT_NE(cp_async.plan.ws.why_not.find("not copied by TMA (CodegenOptions::tma is off)"), std::string::npos)
      << cp_async.plan.ws.why_not;

  // A config the target cannot specialise generates the unspecialised kernel, and says so for the tuner.
  const KernelDef& def = builtin_kernels().find("matmul");
  const GeneratedKernel g =
      generate_cuda(def.build(def.with_overrides(def.default_config(), kTunedWs)), Target::parse("sm_80"));
  EXPECT_EQ(g.threads, 256);
  EXPECT_FALSE(g.why_not_warp_specialized.empty());
  EXPECT_NE(g.lowered.find("not warp-specialised (WARP_SPECIALIZE=1): sm_80"), std::string::npos) << g.lowered;
}

TEST(WarpSpecialization, PartialWarpgroupsAreRefused) {
  std::map<std::string, int64_t> o = kTunedWs;
  o["BLOCK_M"] = 64;
  o["BLOCK_N"] = 64;
  o["BLOCK_K"] = 32;
  o["num_warps"] = 2;
  const KernelDef& def = builtin_kernels().find("matmul");
  const GeneratedKernel g = generate_cuda(def.build(def.with_overrides(def.default_config(), o)),
                                          Target::parse("sm_90a"));
  EXPECT_EQ(g.threads, 64);
  EXPECT_NE(g.why_not_warp_specialized.find("num_warps=2 is not whole warpgroups"), std::string::npos)
      << g.why_not_warp_specialized;
}

// ptxas honours setmaxnreg per branch: every warp-specialised config of matmul's and FA2's spaces compiles (no
// C7508, which compile_cuda raises as an error) with no spill in either branch (the producer at its 24 or 32
// registers). FA2 at its common head dims, causal (both key loops).
TEST(WarpSpecialization, EveryWarpSpecialisedConfigCompilesWithoutSpills) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  int compiled = 0;
  for (const std::string name : {"matmul", "fa2_fwd"}) {
    const KernelDef& def = builtin_kernels().find(name);
    for (const int64_t head_dim : name == "fa2_fwd" ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{0})
      for (Config c : def.config_space()) {
        if (c.get("WARP_SPECIALIZE") == 0)
          continue;
        if (head_dim)
          c.set("HEAD_DIM", head_dim).set("CAUSAL", 1);
        SCOPED_TRACE(name + " " + c.str());
        const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
        ASSERT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
        // The tuner prunes a config whose MIN_BLOCKS_PER_SM CTAs' shared memory exceeds an SM's (228 KiB on
        // sm_90): FA2's four-CTA 64 x 64 tile at D = 128, whose register cap it could not compile under either.
        if (c.get_or("MIN_BLOCKS_PER_SM", 1) * g.shared_bytes > 228 * 1024)
          continue;
        expect_compiles_without_spills(g, "sm_90a");
        ++compiled;
      }
  }
  EXPECT_GE(compiled, 5 + 14);
}

// setmaxnreg raises the consumers' registers, but ptxas compiles every instruction under the cap at entry: FA2's
// 128-key tile over one warpgroup at three CTAs an SM (entry 80) has a product that needs about 90 (C7602). The
// error's first line, which the tuner's table shows, says so.
TEST(WarpSpecialization, AnEntryCapBelowAnInstructionsNeedFailsSayingSoOnTheFirstLine) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  const Config c = def.with_overrides(def.default_config(), {{"HEAD_DIM", 64},
                                                             {"BLOCK_M", 64},
                                                             {"BLOCK_N", 128},
                                                             {"num_warps", 4},
                                                             {"WARP_SPECIALIZE", 1},
                                                             {"MIN_BLOCKS_PER_SM", 3}});
  const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
  try {
    (void)rt::compile_cuda(compile_request_for(g, "sm_90a"));
    FAIL() << "compiled at an entry cap of 80 registers";
  } catch (const Error& e) {
    const std::string msg = e.what();
    const std::string first = msg.substr(0, msg.find('\n'));
    EXPECT_NE(first.find("needs more registers than the kernel's __launch_bounds__ leave a thread"),
              std::string::npos)
        << first;
    EXPECT_NE(msg.find("lower MIN_BLOCKS_PER_SM"), std::string::npos) << msg;
  }
}

} // namespace
} // namespace kiln_test
