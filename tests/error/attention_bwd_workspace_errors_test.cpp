// The attention backward's caller-provided workspace: its size for a problem (backward_workspace_bytes), and the
// checks backward_with_workspace makes on it before touching the GPU (too small, misaligned, overlapping a
// tensor), each a kiln::Error starting "attention::backward:" that names what was expected and what came.
#include "error/attention_bwd_call.h"
#include "error/error_test_support.h"
#include "kernels/attention/attention_bwd_problem.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::attention;
using kiln_test::BwdCall;
using kiln_test::expect_mentions;
using kiln_test::user_error;
using kiln_test::valid_bwd_call;

namespace {

constexpr uint64_t kRows = 2 * 4 * 64; // B * H * N_Q of valid_bwd_call()

std::string workspace_error(const BwdCall& c, BackwardWorkspace ws) {
  std::string msg = user_error([&] {
    backward_with_workspace(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, ws, c.options);
  });
  expect_mentions(msg, {"attention::backward: "});
  return msg;
}

TEST(AttentionBwdWorkspace, DeltaOnlyWhenDeterministic) {
  BwdCall c = valid_bwd_call();
  EXPECT_EQ(backward_workspace_bytes(c.q, c.options), kRows * 4);
}

TEST(AttentionBwdWorkspace, AccumulatorWhenAtomicDqMayRun) {
  BwdCall c = valid_bwd_call();
  c.options.deterministic = false; // the tuner may pick ATOMIC_DQ=1: room for the f32 accumulator
  EXPECT_EQ(backward_workspace_bytes(c.q, c.options), 2048 + kRows * 64 * 4);
  c.options.dq_config = default_bwd_configs(validate_attention_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq,
                                                                        c.dk, c.dv)
                                                .fwd.problem)
                            .dq; // a dQ kernel config keeps the deterministic variant
  EXPECT_EQ(backward_workspace_bytes(c.q, c.options), kRows * 4);
  c.options.dq_config.reset();
  c.options.config = Config{};
  c.options.config->set("ATOMIC_DQ", 1);
  EXPECT_EQ(backward_workspace_bytes(c.q, c.options), 2048 + kRows * 64 * 4);
}

TEST(AttentionBwdWorkspace, LayoutReadsTheSequenceDim) {
  BwdCall c = valid_bwd_call();
  c.q = TensorRef::contiguous(0x10000000, DType::f16, {2, 100, 4, 64}); // bshd: N_Q = 100
  c.options.layout = "bshd";
  EXPECT_EQ(backward_workspace_bytes(c.q, c.options), 2 * 4 * 100 * 4u);
}

TEST(AttentionBwdWorkspace, EmptyProblemsNeedNone) {
  BwdCall c = valid_bwd_call(/*n_q=*/0);
  EXPECT_EQ(backward_workspace_bytes(c.q, c.options), 0u);
}

TEST(AttentionBwdWorkspace, SizeQueryChecksItsArguments) {
  BwdCall c = valid_bwd_call();
  c.q.shape.pop_back();
  c.q.strides.pop_back();
  expect_mentions(user_error([&] { backward_workspace_bytes(c.q, c.options); }),
                  {"attention::backward_workspace_bytes: q must have rank 4"});
  c = valid_bwd_call();
  c.q.shape[2] = -1;
  expect_mentions(user_error([&] { backward_workspace_bytes(c.q, c.options); }), {"q has a negative size -1 in dim 2"});
  c = valid_bwd_call();
  c.options.layout = "sbhd";
  expect_mentions(user_error([&] { backward_workspace_bytes(c.q, c.options); }), {"sbhd"});
  c = valid_bwd_call();
  c.q.shape = {1LL << 31, 1LL << 31, 1LL << 31, 256};
  expect_mentions(user_error([&] { backward_workspace_bytes(c.q, c.options); }), {"does not fit in 64 bits"});
}

TEST(AttentionBwdWorkspace, TooSmall) {
  BwdCall c = valid_bwd_call();
  expect_mentions(workspace_error(c, {0xA0000000, kRows * 4 - 1}),
                  {"the workspace has 2047 bytes; expected at least backward_workspace_bytes() = 2048"});
}

TEST(AttentionBwdWorkspace, NullOrMisaligned) {
  BwdCall c = valid_bwd_call();
  expect_mentions(workspace_error(c, {0, 4096}), {"the workspace's address 0x0 is null"});
  expect_mentions(workspace_error(c, {0xA0000008, 4096}),
                  {"0xa0000008 is not 16-byte aligned; expected a 16-byte aligned device address"});
}

TEST(AttentionBwdWorkspace, OverlapsATensor) {
  BwdCall c = valid_bwd_call();
  expect_mentions(workspace_error(c, {c.dq.data + 1024, 4096}), {"the workspace (bytes", "overlaps dq"});
  expect_mentions(workspace_error(c, {c.lse.data, 4096}), {"overlaps lse"});
}

TEST(AttentionBwdWorkspace, ArgumentsAreCheckedBeforeTheWorkspace) {
  BwdCall c = valid_bwd_call();
  c.dk.data = c.k.data;
  expect_mentions(workspace_error(c, {0, 0}), {"dk (bytes", "overlaps k"});
}

} // namespace
