// Every shipped config whose plan reads a wgmma A operand into registers once before its loop
// (codegen/plan_register_operands.h) on the GPU, held to the double-precision reference: the forward's and the
// backward's tuning spaces at head dims 16 to 64 (48: a padded head dim), f16 and bf16, each causal mode, with
// key and query loops of several iterations and cut tails.
//
// Why every config and not a sample: the pass's correctness rests on ptxas keeping the operand's registers for
// the whole loop, and NVRTC 13.0's ptxas does not always do so. On FA2's 64 x 64 warp-specialised tile at two CTAs
// an SM with LAZY_RESCALE=1 it gave the packed P of the loop body the registers that held Q (worklog §104), so
// the second key tile's S = Q Kᵀ read P: O off by 0.1-0.4 at every shape with more than one key tile. What ptxas
// allocates depends on the config and not on the shape, so one multi-iteration shape per config, dtype and
// causal mode covers it; these tests are the check that each config the pass admits is compiled as written.
#include "codegen/planned_kernel.h"
#include "gpu/gpu_skip.h"
#include "interp/attention_bwd_test_cases.h"
#include "interp/attention_test_cases.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_fwd.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

constexpr DType f16 = DType::f16, bf16 = DType::bf16;

bool reads_operands_from_registers(Kernel kernel) {
  return !kiln_test::plan_kernel(std::move(kernel), "sm_90a").plan.register_operands.before.empty();
}

// Several key tiles of 128 in every query tile; tails in both; GQA; D = 48 pads its 64-wide tiles.
std::vector<AttentionCase> forward_cases() {
  return {make_case(300, 777, 64, 0, f16, 3, 1), make_case(200, 520, 64, 2, bf16, 4, 2),
          make_case(640, 640, 64, 1, bf16, 2, 2), make_case(300, 400, 32, 2, f16, 2, 1),
          make_case(257, 600, 48, 0, bf16, 2, 2), make_case(256, 600, 16, 1, f16, 2, 2)};
}

TEST(GpuRegisterOperands, EveryForwardConfigThatTakesThemMatchesTheReference) {
  KILN_REQUIRE_GPU();
  KILN_REQUIRE_SM90("wgmma");
  int ran = 0;
  for (const AttentionCase& c : forward_cases())
    for (const Config& config : fa2_config_space(c.problem)) {
      if (!reads_operands_from_registers(build_fa2_fwd(config)))
        continue;
      SCOPED_TRACE(attention_case_name(c) + " " + config.str());
      check_attention_case(c, run_fa2_interpreted, config, Executor::Gpu);
      ++ran;
    }
  std::cout << ran << " forward runs of configs that read an operand from registers\n";
  EXPECT_GT(ran, 0) << "no forward config of the space takes a register operand: the pass or the space changed";
}

// Several query tiles of 64 in every key tile (dK/dV's loop) and key tiles in every query tile (dQ's).
std::vector<AttentionCase> backward_cases() {
  return {make_case(520, 300, 64, 0, bf16, 2, 1), make_case(333, 333, 64, 2, f16, 2, 2),
          make_case(300, 400, 32, 1, f16, 2, 2), make_case(260, 200, 48, 2, bf16, 2, 2)};
}

TEST(GpuRegisterOperands, EveryBackwardConfigThatTakesThemMatchesTheReference) {
  KILN_REQUIRE_GPU();
  KILN_REQUIRE_SM90("wgmma");
  int ran = 0;
  for (const AttentionCase& c : backward_cases()) {
    for (bool atomic_dq : {false, true}) {
      const AttentionBwdConfigs base = default_bwd_configs(c.problem, atomic_dq);
      for (const Config& dkdv : bwd_dkdv_config_space(c.problem, atomic_dq)) {
        if (!reads_operands_from_registers(build_fa2_bwd_dkdv(dkdv)))
          continue;
        SCOPED_TRACE(attention_case_name(c) + " dkdv " + dkdv.str());
        check_bwd_case(c, AttentionBwdConfigs{dkdv, base.dq}, Executor::Gpu);
        ++ran;
      }
    }
    const AttentionBwdConfigs base = default_bwd_configs(c.problem);
    for (const Config& dq : bwd_dq_config_space(c.problem)) {
      if (!reads_operands_from_registers(build_fa2_bwd_dq(dq)))
        continue;
      SCOPED_TRACE(attention_case_name(c) + " dq " + dq.str());
      check_bwd_case(c, AttentionBwdConfigs{base.dkdv, dq}, Executor::Gpu);
      ++ran;
    }
  }
  std::cout << ran << " backward runs of configs that read an operand from registers\n";
  EXPECT_GT(ran, 0) << "no backward config of the space takes a register operand: the pass or the space changed";
}

} // namespace
