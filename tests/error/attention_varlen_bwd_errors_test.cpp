// Error tests of the varlen attention backward (backward_varlen): each test breaks one thing in an otherwise
// valid call and asserts that validate_varlen_bwd_args (no GPU needed) or backward_varlen raises a
// kiln::Error naming the entry point, what was expected and what came.
#include "error/error_test_support.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_varlen_bwd_api.h"
#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/fa2_bwd_varlen.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::attention;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

struct Call {
  TensorRef q, k, v, o, lse, dout, dq, dk, dv;
  VarlenBatch batch;
  BackwardOptions options;
};

// Three sequences, total_q 45, total_k 37, H=4, H_KV=2, D=64, f16, contiguous, at fake addresses far apart.
Call valid_call() {
  Call c;
  c.q = TensorRef::contiguous(0x10000000, DType::f16, {45, 4, 64});
  c.k = TensorRef::contiguous(0x20000000, DType::f16, {37, 2, 64});
  c.v = TensorRef::contiguous(0x30000000, DType::f16, {37, 2, 64});
  c.o = TensorRef::contiguous(0x40000000, DType::f16, {45, 4, 64});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {4, 45});
  c.dout = TensorRef::contiguous(0x80000000, DType::f16, {45, 4, 64});
  c.dq = TensorRef::contiguous(0x90000000, DType::f16, {45, 4, 64});
  c.dk = TensorRef::contiguous(0xa0000000, DType::f16, {37, 2, 64});
  c.dv = TensorRef::contiguous(0xb0000000, DType::f16, {37, 2, 64});
  c.batch.cu_seqlens_q = TensorRef::contiguous(0x60000000, DType::i32, {4});
  c.batch.cu_seqlens_k = TensorRef::contiguous(0x70000000, DType::i32, {4});
  c.batch.max_seqlen_q = 40;
  c.batch.max_seqlen_k = 30;
  return c;
}

std::string validation_error(const Call& c) {
  return user_error([&] {
    validate_varlen_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options);
  });
}

TEST(AttentionVarlenBwdErrors, ValidCallPasses) {
  const Call c = valid_call();
  const ValidatedVarlenBackward b =
      validate_varlen_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options);
  EXPECT_EQ(b.fwd.sizes.total_q, 45);
  EXPECT_EQ(b.dk.token, 128);
}

TEST(AttentionVarlenBwdErrors, ForwardChecksNameTheBackward) {
  Call c = valid_call();
  c.batch.cu_seqlens_q.dtype = DType::i64;
  const unsigned line = __LINE__ + 2;
  const std::string msg = user_error([&] {
    validate_varlen_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options);
  });
  expect_mentions(msg, {"attention::backward_varlen:", "batch.cu_seqlens_q has dtype i64"});
  expect_call_site(msg, line);
}

TEST(AttentionVarlenBwdErrors, GradientShapesAndDtypes) {
  Call c = valid_call();
  c.dk = TensorRef::contiguous(c.dk.data, DType::f16, {37, 4, 64});
  expect_mentions(validation_error(c), {"dk has shape [37, 4, 64]; expected k's shape [37, 2, 64]"});
  c = valid_call();
  c.dout.dtype = DType::bf16;
  expect_mentions(validation_error(c), {"dout has dtype bf16 but q has f16"});
  c = valid_call();
  c.dq = TensorRef::contiguous(c.dq.data, DType::f16, {1, 45, 4, 64});
  expect_mentions(validation_error(c), {"dq must have rank 3 [total, heads, D]"});
}

TEST(AttentionVarlenBwdErrors, GradientsOverlapInputsOrEachOther) {
  Call c = valid_call();
  c.dq.data = c.dout.data;
  expect_mentions(validation_error(c), {"dq (bytes", "overlaps dout", "while it is read"});
  c = valid_call();
  c.dv.data = c.dk.data + 64;
  expect_mentions(validation_error(c), {"dv (bytes", "overlaps dk", "written to the same memory"});
  c = valid_call();
  c.dk.data = c.batch.cu_seqlens_q.data;
  expect_mentions(validation_error(c), {"dk (bytes", "overlaps cu_seqlens_q"});
}

TEST(AttentionVarlenBwdErrors, InterleavedKvGradientViewsAreAccepted) {
  // dK and dV interleaved per token in one [total_k, 2, H_KV, D] buffer, as a fused KV projection's gradient.
  Call c = valid_call();
  c.dk = TensorRef{0xa0000000, DType::f16, {37, 2, 64}, {256, 64, 1}};
  c.dv = TensorRef{0xa0000000 + 128 * 2, DType::f16, {37, 2, 64}, {256, 64, 1}};
  EXPECT_NO_THROW(
      validate_varlen_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options));
}

TEST(AttentionVarlenBwdErrors, AtomicDqNeedsNondeterminismAndNoDqConfig) {
  Call c = valid_call();
  const ValidatedVarlenBackward b =
      validate_varlen_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options);
  const AttentionBwdConfigs dense = default_bwd_configs(b.fwd.shape, true);
  c.options.config = varlen_config_of(fa2_bwd_dkdv_varlen_def(), dense.dkdv);
  expect_mentions(validation_error(c), {"ATOMIC_DQ=1", "options.deterministic is true"});
  c.options.deterministic = false;
  c.options.dq_config = varlen_config_of(fa2_bwd_dq_varlen_def(), dense.dq);
  expect_mentions(validation_error(c), {"options.dq_config", "never runs the dQ kernel"});
}

// The workspace holds Delta f32 [H, total_q], and the dQ accumulator f32 [H, total_q, D] after it (at 256 bytes)
// wherever the atomic pair may run: an ATOMIC_DQ=1 config, or deterministic = false with no config, where the
// tuner picks the faster pair as backward() does; a dQ kernel config keeps the deterministic pair.
TEST(AttentionVarlenBwdErrors, WorkspaceHoldsTheAccumulatorWhereTheAtomicPairMayRun) {
  Call c = valid_call();
  constexpr uint64_t kDelta = 4 * 45 * 4, kAcc = 4 * 45 * 64 * 4, kAccOffset = (kDelta + 255) / 256 * 256;
  EXPECT_EQ(varlen_backward_workspace_bytes(c.q, c.options), kDelta);
  c.options.deterministic = false;
  EXPECT_EQ(varlen_backward_workspace_bytes(c.q, c.options), kAccOffset + kAcc);
  const ValidatedVarlenBackward b =
      validate_varlen_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options);
  c.options.dq_config = varlen_config_of(fa2_bwd_dq_varlen_def(), default_bwd_configs(b.fwd.shape).dq);
  EXPECT_EQ(varlen_backward_workspace_bytes(c.q, c.options), kDelta);
  c.options.dq_config.reset();
  c.options.config = varlen_config_of(fa2_bwd_dkdv_varlen_def(), default_bwd_configs(b.fwd.shape).dkdv);
  EXPECT_EQ(varlen_backward_workspace_bytes(c.q, c.options), kDelta); // ATOMIC_DQ=0 given
  c.options.config = varlen_config_of(fa2_bwd_dkdv_varlen_def(), default_bwd_configs(b.fwd.shape, true).dkdv);
  EXPECT_EQ(varlen_backward_workspace_bytes(c.q, c.options), kAccOffset + kAcc);
}

TEST(AttentionVarlenBwdErrors, ConfigsMustBeVarlenBackwardConfigs) {
  Call c = valid_call();
  const ValidatedVarlenBackward b =
      validate_varlen_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options);
  Config dq = varlen_config_of(fa2_bwd_dq_varlen_def(), default_bwd_configs(b.fwd.shape).dq);
  dq.set("HEAD_DIM", 128);
  c.options.dq_config = dq;
  expect_mentions(validation_error(c), {"options.dq_config", "HEAD_DIM=128", "fa2_bwd_dq_varlen"});
  c = valid_call();
  c.options.config = Config{};
  expect_mentions(validation_error(c), {"options.config (the dK/dV kernel's)", "has no BLOCK_M"});
}

TEST(AttentionVarlenBwdErrors, BackwardValidatesBeforeTouchingTheGpu) {
  Call c = valid_call();
  c.dq.data = c.q.data;
  expect_mentions(user_error([&] {
                    backward_varlen(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options);
                  }),
                  {"attention::backward_varlen", "dq (bytes", "overlaps q"});
}

// Mods in the packed backward: the forward's checks (per-sequence tensor sizes), and the mods' tensors apart
// from the gradients, which are written while they are read.
TEST(AttentionVarlenBwdErrors, ModTensorsSizedPerSequenceAndApartFromTheGradients) {
  Call c = valid_call();
  c.options.mods.score.push_back(additive_bias());
  c.options.mod_tensors["bias"] = TensorRef::contiguous(0xc0000000, DType::f32, {1, 4, 40, 30});
  const ValidatedVarlenBackward b =
      validate_varlen_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options);
  ASSERT_EQ(b.fwd.mod_tensors.size(), 1u);
  c.options.mod_tensors["bias"] = TensorRef::contiguous(0xc0000000, DType::f32, {1, 4, 45, 37});
  expect_mentions(validation_error(c), {"attention::backward_varlen",
                                        "mod tensor 'bias' has extent 45 in dim 2", "expected 40 or 1"});
  c.options.mod_tensors["bias"] = TensorRef::contiguous(c.dk.data, DType::f32, {1, 4, 40, 30});
  expect_mentions(validation_error(c), {"mod tensor 'bias'", "overlaps dk", "apart from the gradients"});
  // o and lse are read by the backward: a mod tensor beside them is fine.
  c.options.mod_tensors["bias"] = TensorRef::contiguous(c.lse.data, DType::f32, {1, 4, 40, 30});
  EXPECT_NO_THROW(
      validate_varlen_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.batch, c.options));
}

} // namespace
