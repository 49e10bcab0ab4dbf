// Error tests of the sink logits' gradient in the backward API (BackwardOptions::dsink): each test breaks one
// thing in an otherwise valid backward call with the library's sinks and asserts a kiln::Error that starts
// "attention::backward:" and names what was expected and what came (no GPU: the addresses are fake).
#include "error/attention_bwd_call.h"
#include "error/error_test_support.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_varlen_bwd_api.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::attention;
using kiln_test::BwdCall;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

// valid_bwd_call() (B=2, H=4, N_Q=64) with attention_sinks() and its [H] logits, and an [H] dsink.
BwdCall sink_call() {
  BwdCall c = kiln_test::valid_bwd_call();
  c.options.mods.sink = {attention_sinks()};
  c.options.mod_tensors = {{"sinks", TensorRef::contiguous(0xa0000000, DType::f32, {4})}};
  c.options.dsink = TensorRef::contiguous(0xb0000000, DType::f32, {4});
  return c;
}

std::string validation_error(const BwdCall& c) {
  std::string msg = user_error(
      [&] { validate_attention_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.options); });
  expect_mentions(msg, {"attention::backward: "});
  return msg;
}

TEST(AttentionSinkGradErrors, PerHeadAndPerRowGradientsPass) {
  BwdCall c = sink_call();
  EXPECT_NO_THROW(
      validate_attention_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.options));
  c.options.dsink = TensorRef::contiguous(0xb0000000, DType::f32, {2, 4, 64});
  EXPECT_NO_THROW(
      validate_attention_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.options));
}

TEST(AttentionSinkGradErrors, NeedsASink) {
  BwdCall c = kiln_test::valid_bwd_call();
  c.options.dsink = TensorRef::contiguous(0xb0000000, DType::f32, {4});
  expect_mentions(validation_error(c),
                  {"options.dsink", "options.mods (none) have no sink", "expected a SinkMod"});
}

TEST(AttentionSinkGradErrors, DtypeShapeAndStrides) {
  BwdCall c = sink_call();
  c.options.dsink = TensorRef::contiguous(0xb0000000, DType::f16, {4});
  expect_mentions(validation_error(c), {"options.dsink has dtype f16; expected f32"});
  c.options.dsink = TensorRef::contiguous(0xb0000000, DType::f32, {2, 4});
  expect_mentions(validation_error(c),
                  {"options.dsink has shape [2, 4]", "expected [B, H, N_Q] = [2, 4, 64]", "or [H] = [4]"});
  TensorRef strided = TensorRef::contiguous(0xb0000000, DType::f32, {2, 4, 64});
  strided.strides = {4 * 128, 128, 1};
  c.options.dsink = strided;
  expect_mentions(validation_error(c), {"options.dsink has strides [512, 128, 1]", "dense row-major"});
}

TEST(AttentionSinkGradErrors, PerHeadNeedsAPerHeadSink) {
  BwdCall c = sink_call();
  SinkMod per_row = attention_sinks();
  per_row.name = "my_sink";
  per_row.per_head = false;
  c.options.mods.sink = {per_row};
  expect_mentions(validation_error(c), {"options.dsink is [H]", "the sink 'my_sink' is not per head",
                                        "expected [B, H, N_Q] = [2, 4, 64]"});
}

TEST(AttentionSinkGradErrors, AddressAndOverlaps) {
  BwdCall c = sink_call();
  c.options.dsink->data = 0;
  expect_mentions(validation_error(c), {"options.dsink's address 0x0 is null", "expected a 4-byte aligned"});
  c.options.dsink->data = c.dq.data;
  expect_mentions(validation_error(c), {"options.dsink (bytes", "overlaps dq"});
  c.options.dsink->data = c.options.mod_tensors.at("sinks").data;
  expect_mentions(validation_error(c), {"options.dsink (bytes", "overlaps mod tensor 'sinks'"});
}

// Sinks run in the packed backward (through lse), but their own gradient is not built for packed batches.
TEST(AttentionSinkGradErrors, VariableLengthBatchesTakeNoDsink) {
  TensorRef q = TensorRef::contiguous(0x10000000, DType::f16, {45, 4, 64});
  TensorRef kv = TensorRef::contiguous(0x20000000, DType::f16, {37, 2, 64});
  VarlenBatch batch;
  batch.cu_seqlens_q = TensorRef::contiguous(0x60000000, DType::i32, {4});
  batch.cu_seqlens_k = TensorRef::contiguous(0x70000000, DType::i32, {4});
  batch.max_seqlen_q = 40, batch.max_seqlen_k = 30;
  BackwardOptions options;
  options.mods.sink = {attention_sinks()};
  options.mod_tensors["sinks"] = TensorRef::contiguous(0xd0000000, DType::f32, {4});
  options.dsink = TensorRef::contiguous(0xc0000000, DType::f32, {4});
  TensorRef lse = TensorRef::contiguous(0x50000000, DType::f32, {4, 45});
  TensorRef v = kv, o = q, dout = q, dq = q, dk = kv, dv = kv;
  v.data = 0x30000000, o.data = 0x40000000, dout.data = 0x80000000, dq.data = 0x90000000;
  dk.data = 0xa0000000, dv.data = 0xb0000000;
  expect_mentions(
      user_error([&] { validate_varlen_bwd_args(q, kv, v, o, lse, dout, dq, dk, dv, batch, options); }),
      {"attention::backward_varlen", "options.dsink", "not built for variable-length batches yet",
       "expected no dsink"});
}

} // namespace
