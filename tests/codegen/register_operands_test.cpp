// plan_register_operands (codegen/plan_register_operands.h): on sm_90a, in a warp-specialised kernel whose consumers
// hold enough registers, the shared A of a wgmma product that does not change inside the product's loop (dK/dV's K in
// Sᵀ = K Qᵀ and V in dPᵀ = V dOᵀ, dQ's Q and dO) is read into registers once before that loop, by ldmatrix in wgmma's
// register-A fragment, and the products there take wgmma's register-A form (_rs), reading only B from shared memory;
// the tile stays in shared memory for its other readers (the fused dQ = dS K reads K as its B). Tested: dK/dV at
// D = 64 (fused and deterministic) and dQ's warp-specialised tile take both operands before their loops (the plan, the
// generated source, the lowered text, and ptxas without spills where NVRTC is usable); CodegenOptions::
// register_operands off takes none; D = 128, dK/dV's 128 x 128 tile and a kernel without warp specialisation keep
// their A in shared memory, and the plan says why.
#include "codegen/codegen.h"
#include "codegen/plan_register_operands.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <regex>
#include <set>

namespace kiln_test {
namespace {

// dK/dV's 64-query steps of a 128-key tile at D = 64, warp-specialised (two consumer warpgroups).
std::map<std::string, int64_t> dkdv_d64(int64_t atomic_dq) {
  return {{"HEAD_DIM", 64}, {"BLOCK_M", 64},  {"BLOCK_N", 128},
          {"WARP_SPECIALIZE", 1}, {"num_warps", 8}, {"ATOMIC_DQ", atomic_dq}};
}

// dQ's warp-specialised 128-query tile at D = 64.
const std::map<std::string, int64_t> kDqD64 = {
    {"HEAD_DIM", 64}, {"BLOCK_M", 128}, {"BLOCK_N", 64}, {"WARP_SPECIALIZE", 1}, {"num_warps", 8}};

// The plan generate_cuda makes.
Planned planned(const std::string& name, const std::map<std::string, int64_t>& overrides,
                const CodegenOptions& options = {}) {
  return plan_for(name, overrides, "sm_90a", options);
}

GeneratedKernel generated(const std::string& name, const std::map<std::string, int64_t>& overrides,
                          const CodegenOptions& options = {}) {
  const KernelDef& def = builtin_kernels().find(name);
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)), Target::parse("sm_90a"),
                       options);
}

// The wgmma calls (not the helpers' definitions) of shape `mnk` ("m64n64k16") in `s`, by form: "rs" or "ss".
int wgmma_calls(const std::string& s, const std::string& mnk, const std::string& form) {
  const std::regex call("kiln_wgmma_" + mnk + "_f16_" + form + "\\w*\\(\\*reinterpret_cast");
  return static_cast<int>(std::distance(std::sregex_iterator(s.begin(), s.end(), call), std::sregex_iterator()));
}

// The names of the results of the products in `loop` that read `a` as their A.
std::set<std::string> products_of(const Kernel& k, const Op& loop, ValueId a) {
  std::set<std::string> out;
  walk(loop.regions[0], [&](const Op& op) {
    if (op.kind == OpKind::Dot && op.operands[0] == a)
      out.insert(k.info(op.result()).name);
  });
  return out;
}

// The loops (For ops) of the kernel that hold products, in program order.
std::vector<const Op*> loops_with_products(const Kernel& k) {
  std::vector<const Op*> out;
  for (const Op* loop : ops_of(k, OpKind::For)) {
    bool any = false;
    walk(loop->regions[0], [&](const Op& op) { any = any || op.kind == OpKind::Dot; });
    if (any)
      out.push_back(loop);
  }
  return out;
}

// Checks the plan's operands of `p` against the generated `g`: for every loop with operands, two 16-register
// shared tiles `a_names`, the A of the products `product_names` there (in that order), declared and read by ldmatrix
// right before the loop's `// for` line, every m64n64 product inside the loop in the register-A form.
void expect_operands_before_their_loops(const Planned& p, const GeneratedKernel& g,
                                        const std::vector<std::string>& a_names,
                                        const std::vector<std::string>& product_names) {
  const std::vector<const Op*> loops = loops_with_products(p.kernel);
  for (const auto& [loop, operands] : p.plan.register_operands.before) {
    SCOPED_TRACE(loop->loc.str());
    ASSERT_EQ(loop->kind, OpKind::For);
    ASSERT_EQ(operands.size(), a_names.size());
    for (size_t i = 0; i < operands.size(); ++i) {
      const RegisterOperands::Operand& o = operands[i];
      EXPECT_EQ(p.kernel.info(o.value).name, a_names[i]);
      EXPECT_EQ(products_of(p.kernel, *loop, o.value), std::set<std::string>{product_names[i]});
      EXPECT_EQ(p.plan.where(o.value), Placement::Shared) << "the tile stays in shared memory";
      EXPECT_EQ(o.registers, 16) << "128 x 64 over 8 warps: 4 k steps of 4 words";
      EXPECT_EQ(o.split.warps_m, 8);
      EXPECT_EQ(o.split.warps_n, 1);
    }

    // The source: each operand declared and read before the loop (after the loop before it), products in it _rs.
    const size_t at = g.source.find("// for " + loop->loc.str() + "\n");
    ASSERT_NE(at, std::string::npos);
    const auto l = std::find(loops.begin(), loops.end(), loop);
    ASSERT_NE(l, loops.end());
    const size_t previous =
        l == loops.begin() ? 0 : g.source.find("// for " + (*std::prev(l))->loc.str() + "\n");
    ASSERT_NE(previous, std::string::npos);
    for (const RegisterOperands::Operand& o : operands) {
      const size_t comment = g.source.rfind(
          fmt::format("// %{} (128 x 64, shared) is the same in every iteration: read into registers once", o.value),
          at);
      ASSERT_NE(comment, std::string::npos);
      EXPECT_GT(comment, previous) << "read before this loop, not only before an earlier one";
      const size_t array = g.source.find("kiln::u32 a_regs", comment);
      ASSERT_NE(array, std::string::npos);
      EXPECT_LT(array, at);
      EXPECT_EQ(g.source.compare(g.source.find('[', array), 5, "[16];"), 0) << g.source.substr(array, 40);
      const size_t load = g.source.find("kiln::ldmatrix_x4(", array);
      EXPECT_LT(load, at) << "ldmatrix_x4 (K-major A) reads the array before the loop";
    }
    EXPECT_EQ(occurrences(g.source.substr(previous, at - previous), "read into registers once"),
              static_cast<int>(operands.size()));
    const size_t end = std::next(l) == loops.end() ? std::string::npos
                                                   : g.source.find("// for " + (*std::next(l))->loc.str() + "\n");
    const std::string body = g.source.substr(at, end == std::string::npos ? std::string::npos : end - at);
    EXPECT_GE(wgmma_calls(body, "m64n64k16", "rs"), 8) << "both products' 4 k steps";
    EXPECT_EQ(wgmma_calls(body, "m64n64k16", "ss"), 0);
  }
}

TEST(RegisterOperands, Fa2BackwardDkdvAtD64ReadsKAndVIntoRegistersBeforeTheQueryLoops) {
  for (int64_t atomic_dq : {1, 0}) {
    SCOPED_TRACE(atomic_dq);
    const Planned p = planned("fa2_bwd_dkdv", dkdv_d64(atomic_dq));
    const RegisterOperands& ro = p.plan.register_operands;
    ASSERT_FALSE(ro.before.empty()) << ro.why_not;
    EXPECT_TRUE(ro.why_not.empty()) << ro.why_not;
    for (const auto& [loop, operands] : ro.before) { // K's 16 and V's 16 before each loop
      int registers = 0;
      for (const RegisterOperands::Operand& o : operands)
        registers += o.registers;
      EXPECT_EQ(registers, 32);
    }
    EXPECT_GE(p.plan.ws.consumer_registers, kMinConsumerRegisters);

    const GeneratedKernel g = generated("fa2_bwd_dkdv", dkdv_d64(atomic_dq));
    expect_operands_before_their_loops(p, g, {"k", "v"}, {"qkT", "dpT"});
    EXPECT_EQ(occurrences(g.source, "read into registers once"), 2 * static_cast<int>(ro.before.size()));
    EXPECT_EQ(occurrences(g.lowered, "a shared A read into 16 registers a thread before the loop"),
              2 * static_cast<int>(ro.before.size()))
        << g.lowered;
    EXPECT_EQ(g.lowered.find("shared A left in shared memory"), std::string::npos);
    if (atomic_dq) {
      // The fused dQ = dS K reads dSᵀ from the scratch and K as its B: A stays in shared memory (m64n32).
      EXPECT_GT(wgmma_calls(g.source, "m64n32k16", "ss"), 0);
      EXPECT_EQ(wgmma_calls(g.source, "m64n32k16", "rs"), 0);
    } else {
      // The deterministic kernel's three query loops (masked, unmasked, masked) each read K and V before it, and
      // no m64n64 product reads its A from shared memory.
      EXPECT_EQ(ro.before.size(), 3u);
      EXPECT_EQ(wgmma_calls(g.source, "m64n64k16", "ss"), 0);
      EXPECT_EQ(wgmma_calls(g.source, "m64n32k16", "ss"), 0) << "no dQ product";
    }

    std::string why;
    if (!rt::nvrtc_available(&why))
      GTEST_SKIP() << "NVRTC not available: " << why;
    expect_compiles_without_spills(g, "sm_90a");
  }
}

// The budget is per loop: the operands read before the first query loop are dead by the second, so each of the three
// sibling loops takes K and V (at ATOMIC_DQ=1 the loops' products take 144 registers: 144 + 16 + 16 = 176 fits each).
TEST(RegisterOperands, Fa2BackwardDkdvFusedReadsKAndVBeforeEachOfItsThreeQueryLoops) {
  const Planned p = planned("fa2_bwd_dkdv", dkdv_d64(1));
  EXPECT_EQ(p.plan.register_operands.before.size(), 3u);
  EXPECT_EQ(p.plan.register_operands.why_not, "");
  const GeneratedKernel g = generated("fa2_bwd_dkdv", dkdv_d64(1));
  EXPECT_EQ(p.plan.register_operands.products.size(), 6u) << "Sᵀ and dPᵀ in each loop";
  EXPECT_EQ(occurrences(g.lowered, "A registers (read from its shared tile once before the loop)"), 6) << g.lowered;
  EXPECT_EQ(wgmma_calls(g.source, "m64n64k16", "ss"), 0);
}

TEST(RegisterOperands, SwitchedOffEveryProductReadsItsAFromSharedMemory) {
  CodegenOptions off;
  off.register_operands = false;
  for (int64_t atomic_dq : {1, 0}) {
    SCOPED_TRACE(atomic_dq);
    const Planned p = planned("fa2_bwd_dkdv", dkdv_d64(atomic_dq), off);
    EXPECT_TRUE(p.plan.register_operands.before.empty());
    EXPECT_EQ(p.plan.register_operands.why_not, "CodegenOptions::register_operands is off");

    const GeneratedKernel g = generated("fa2_bwd_dkdv", dkdv_d64(atomic_dq), off);
    const GeneratedKernel on = generated("fa2_bwd_dkdv", dkdv_d64(atomic_dq));
    EXPECT_EQ(g.source.find("read into registers once"), std::string::npos);
    EXPECT_EQ(g.source.find("a_regs"), std::string::npos);
    EXPECT_NE(g.lowered.find("shared A left in shared memory: CodegenOptions::register_operands is off"),
              std::string::npos)
        << g.lowered;
    // Sᵀ and dPᵀ are _ss again: as many m64n64 products, the ones on read from registers now from shared memory.
    const int ss = wgmma_calls(g.source, "m64n64k16", "ss"), rs = wgmma_calls(g.source, "m64n64k16", "rs");
    EXPECT_GE(ss, 8 * 3) << "Sᵀ and dPᵀ, 4 k steps each, in each query loop";
    EXPECT_EQ(ss + rs, wgmma_calls(on.source, "m64n64k16", "ss") + wgmma_calls(on.source, "m64n64k16", "rs"));
    EXPECT_EQ(wgmma_calls(g.source, "m64n32k16", "ss"), wgmma_calls(on.source, "m64n32k16", "ss"));
  }
}

// `overrides` of `kernel` plan no operand, RegisterOperands::why_not (and the lowered text) says `why`, and the
// source reads nothing into registers.
Planned expect_kept_in_shared(const std::map<std::string, int64_t>& overrides, const std::string& why,
                              const std::string& kernel = "fa2_bwd_dkdv") {
  Planned p = planned(kernel, overrides);
  const RegisterOperands& ro = p.plan.register_operands;
  EXPECT_TRUE(ro.before.empty());
  EXPECT_NE(ro.why_not.find(why), std::string::npos) << ro.why_not;
  const GeneratedKernel g = generated(kernel, overrides);
  EXPECT_EQ(g.source.find("read into registers once"), std::string::npos);
  EXPECT_NE(g.lowered.find("shared A left in shared memory: "), std::string::npos);
  return p;
}

TEST(RegisterOperands, KeptInSharedMemoryWhereTheRegistersAreNotThereAndWhy) {
  for (int64_t atomic_dq : {1, 0}) {
    SCOPED_TRACE(atomic_dq);
    // D = 128: a 128 x 128 A over 8 warps is 8 k steps of 4 words a thread.
    std::map<std::string, int64_t> d128 = dkdv_d64(atomic_dq);
    d128["HEAD_DIM"] = 128;
    expect_kept_in_shared(d128, fmt::format("would take 32 registers a thread (at most {})", kMaxOperandRegisters));
    // Without warp specialisation no consumer warpgroup is given more registers (setmaxnreg) to hold them in.
    std::map<std::string, int64_t> plain = dkdv_d64(atomic_dq);
    plain.erase("WARP_SPECIALIZE");
    const Planned p = expect_kept_in_shared(
        plain, fmt::format("not warp-specialised with consumers of at least {} registers", kMinConsumerRegisters));
    EXPECT_FALSE(p.plan.ws.on());
  }
  // Two CTAs an SM: consumers of 232 registers (FA2's 64 x 64 tile at D = 64, which ptxas 13.0 miscompiled with the
  // operands and LAZY_RESCALE=1: worklog §104).
  const Planned two = expect_kept_in_shared(
      {{"HEAD_DIM", 64}, {"BLOCK_M", 64}, {"BLOCK_N", 64}, {"WARP_SPECIALIZE", 1}, {"MIN_BLOCKS_PER_SM", 2}},
      fmt::format("not warp-specialised with consumers of at least {} registers", kMinConsumerRegisters), "fa2_fwd");
  EXPECT_TRUE(two.plan.ws.on());
  EXPECT_LT(two.plan.ws.consumer_registers, kMinConsumerRegisters);
  // dK/dV's deterministic 128 x 128 tile at D = 64: the 128-query step's products take 192 registers.
  std::map<std::string, int64_t> wide = dkdv_d64(0);
  wide["BLOCK_M"] = 128;
  const Planned p = expect_kept_in_shared(wide, "16 registers beside the loop's products' 192");
  ASSERT_TRUE(p.plan.ws.on());
  EXPECT_NE(p.plan.register_operands.why_not.find(
                fmt::format("would pass the {} a consumer keeps for them ({} less {})",
                            p.plan.ws.consumer_registers - kRegistersBesideProducts, p.plan.ws.consumer_registers,
                            kRegistersBesideProducts)),
            std::string::npos)
      << p.plan.register_operands.why_not;
}

TEST(RegisterOperands, Fa2BackwardDqAtD64ReadsQAndDoIntoRegistersBeforeTheKeyLoops) {
  const Planned p = planned("fa2_bwd_dq", kDqD64);
  const RegisterOperands& ro = p.plan.register_operands;
  ASSERT_FALSE(ro.before.empty()) << ro.why_not;
  EXPECT_EQ(ro.before.size(), loops_with_products(p.kernel).size()) << "every key loop";
  const GeneratedKernel g = generated("fa2_bwd_dq", kDqD64);
  expect_operands_before_their_loops(p, g, {"q", "do"}, {"qk", "dp"});
  EXPECT_EQ(wgmma_calls(g.source, "m64n64k16", "ss"), 0);
  EXPECT_NE(g.lowered.find("a shared A read into 16 registers a thread before the loop"), std::string::npos);

  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  expect_compiles_without_spills(g, "sm_90a");
}

} // namespace
} // namespace kiln_test
