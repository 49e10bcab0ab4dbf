// Unit tests of the attention host API's validation: valid descriptions (bhsd, bshd, views into packed QKV,
// GQA/MQA, empty calls) produce the AttentionProblem, strides and addresses the kernels are given. No GPU:
// the addresses are never dereferenced.
#include "kernels/attention/attention_api.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::attention;

namespace {

void expect_strides(const TensorStrides& got, const TensorStrides& want, const char* name) {
  EXPECT_EQ(got.b, want.b) << name << " batch stride";
  EXPECT_EQ(got.h, want.h) << name << " head stride";
  EXPECT_EQ(got.n, want.n) << name << " sequence stride";
}

void expect_strides(const AttentionStrides& got, const AttentionStrides& want) {
  expect_strides(got.q, want.q, "q");
  expect_strides(got.k, want.k, "k");
  expect_strides(got.v, want.v, "v");
  expect_strides(got.o, want.o, "o");
}

TEST(AttentionApi, ContiguousStridesAreRowMajor) {
  TensorRef t = TensorRef::contiguous(0x1000, DType::bf16, {3, 5, 7, 16});
  EXPECT_EQ(t.strides, (llvm::SmallVector<int64_t, 4>{5 * 7 * 16, 7 * 16, 16, 1}));
  EXPECT_EQ(t.str(), "bf16 [3, 5, 7, 16] strides [560, 112, 16, 1] at 0x1000");
}

TEST(AttentionApi, BhsdDescriptionGivesProblemAndStrides) {
  const int64_t B = 3, H = 8, H_KV = 2, N_Q = 100, N_K = 37, D = 96;
  TensorRef q = TensorRef::contiguous(0x10000000, DType::f16, {B, H, N_Q, D});
  TensorRef k = TensorRef::contiguous(0x20000000, DType::f16, {B, H_KV, N_K, D});
  TensorRef v = TensorRef::contiguous(0x30000000, DType::f16, {B, H_KV, N_K, D});
  TensorRef o = TensorRef::contiguous(0x40000000, DType::f16, {B, H, N_Q, D});
  TensorRef lse = TensorRef::contiguous(0x50000000, DType::f32, {B, H, N_Q});
  ValidatedAttention a = validate_attention_args(q, k, v, o, lse);
  const AttentionProblem& p = a.problem;
  EXPECT_EQ(p.B, B);
  EXPECT_EQ(p.H, H);
  EXPECT_EQ(p.H_KV, H_KV);
  EXPECT_EQ(p.N_Q, N_Q);
  EXPECT_EQ(p.N_K, N_K);
  EXPECT_EQ(p.D, D);
  EXPECT_EQ(p.dtype, DType::f16);
  EXPECT_EQ(p.causal, 0);
  EXPECT_FALSE(p.bshd_layout);
  EXPECT_EQ(p.sm_scale, 0);
  EXPECT_TRUE(p.k_transposed);
  EXPECT_FALSE(p.tf32);
  EXPECT_FALSE(a.empty);
  // A dense bhsd description has exactly the strides the reference and the interpreter use.
  expect_strides(a.strides, attention_strides(p));
  EXPECT_EQ(a.q, 0x10000000u);
  EXPECT_EQ(a.k, 0x20000000u);
  EXPECT_EQ(a.v, 0x30000000u);
  EXPECT_EQ(a.o, 0x40000000u);
  ASSERT_TRUE(a.lse.has_value());
  EXPECT_EQ(*a.lse, 0x50000000u);
}

TEST(AttentionApi, BshdDescriptionGivesProblemAndStrides) {
  const int64_t B = 2, H = 6, H_KV = 3, N_Q = 33, N_K = 129, D = 128;
  AttentionOptions opts;
  opts.layout = "bshd";
  TensorRef q = TensorRef::contiguous(0x10000000, DType::bf16, {B, N_Q, H, D});
  TensorRef k = TensorRef::contiguous(0x20000000, DType::bf16, {B, N_K, H_KV, D});
  TensorRef v = TensorRef::contiguous(0x30000000, DType::bf16, {B, N_K, H_KV, D});
  TensorRef o = TensorRef::contiguous(0x40000000, DType::bf16, {B, N_Q, H, D});
  ValidatedAttention a = validate_attention_args(q, k, v, o, std::nullopt, opts);
  const AttentionProblem& p = a.problem;
  EXPECT_EQ(p.B, B);
  EXPECT_EQ(p.H, H);
  EXPECT_EQ(p.H_KV, H_KV);
  EXPECT_EQ(p.N_Q, N_Q);
  EXPECT_EQ(p.N_K, N_K);
  EXPECT_EQ(p.D, D);
  EXPECT_EQ(p.dtype, DType::bf16);
  EXPECT_TRUE(p.bshd_layout);
  EXPECT_FALSE(a.lse.has_value());
  expect_strides(a.strides, attention_strides(p));
  EXPECT_EQ(a.strides.q.h, D);     // heads are adjacent within a row
  EXPECT_EQ(a.strides.q.n, H * D); // a sequence step passes all heads
  EXPECT_EQ(a.strides.k.n, H_KV * D);
}

TEST(AttentionApi, BhsdViewOfBshdMemoryEqualsBshdDescription) {
  // The same memory described both ways: [B, N, H, D] storage read as a permuted [B, H, N, D] view.
  const int64_t B = 2, H = 4, N = 50, D = 64;
  TensorRef bshd[4], bhsd[4];
  for (int i = 0; i < 4; ++i) {
    bshd[i] = TensorRef::contiguous(0x10000000ull * static_cast<uint64_t>(i + 1), DType::f16, {B, N, H, D});
    bhsd[i] = bshd[i];
    bhsd[i].shape = {B, H, N, D};
    bhsd[i].strides = {bshd[i].strides[0], bshd[i].strides[2], bshd[i].strides[1], 1};
  }
  AttentionOptions as_bshd;
  as_bshd.layout = "bshd";
  ValidatedAttention x = validate_attention_args(bshd[0], bshd[1], bshd[2], bshd[3], std::nullopt, as_bshd);
  ValidatedAttention y = validate_attention_args(bhsd[0], bhsd[1], bhsd[2], bhsd[3], std::nullopt);
  for (auto [got, want] : {std::pair{y.problem.B, x.problem.B},
                           {y.problem.H, x.problem.H},
                           {y.problem.N_Q, x.problem.N_Q},
                           {y.problem.D, x.problem.D}})
    EXPECT_EQ(got, want);
  EXPECT_EQ(x.problem.H, H);
  EXPECT_EQ(x.problem.N_K, N);
  expect_strides(y.strides, x.strides);
  EXPECT_TRUE(x.problem.bshd_layout);
  EXPECT_FALSE(y.problem.bshd_layout);
}

TEST(AttentionApi, ViewsIntoPackedQkvAreAccepted) {
  // One projection output [B, N, 3, H, D]: q, k and v are interleaved views of it (inputs may share memory;
  // only outputs must not), and o is a buffer of its own.
  const int64_t B = 2, N = 40, H = 4, D = 64;
  const uint64_t base = 0x10000000, row = static_cast<uint64_t>(H * D * 2); // bytes of one of q/k/v per token
  auto view = [&](uint64_t offset) {
    return TensorRef{base + offset, DType::f16, {B, N, H, D}, {N * 3 * H * D, 3 * H * D, D, 1}};
  };
  TensorRef q = view(0), k = view(row), v = view(2 * row);
  TensorRef o = TensorRef::contiguous(0x40000000, DType::f16, {B, N, H, D});
  AttentionOptions opts;
  opts.layout = "bshd";
  ValidatedAttention a = validate_attention_args(q, k, v, o, std::nullopt, opts);
  EXPECT_EQ(a.problem.H_KV, H);
  expect_strides(a.strides.q, TensorStrides{N * 3 * H * D, D, 3 * H * D}, "q");
  expect_strides(a.strides.k, TensorStrides{N * 3 * H * D, D, 3 * H * D}, "k");
  expect_strides(a.strides.o, TensorStrides{N * H * D, D, H * D}, "o");
  EXPECT_EQ(a.k - a.q, row);
  EXPECT_EQ(a.v - a.q, 2 * row);
}

TEST(AttentionApi, MultiQueryAndOptionsCarryThrough) {
  const int64_t B = 1, H = 16, N_Q = 1, N_K = 4096, D = 256;
  TensorRef q = TensorRef::contiguous(0x10000000, DType::f32, {B, H, N_Q, D});
  TensorRef k = TensorRef::contiguous(0x20000000, DType::f32, {B, 1, N_K, D});
  TensorRef v = TensorRef::contiguous(0x30000000, DType::f32, {B, 1, N_K, D});
  TensorRef o = TensorRef::contiguous(0x40000000, DType::f32, {B, H, N_Q, D});
  AttentionOptions opts;
  opts.causal = Causal::BottomRight;
  opts.sm_scale = 0.125;
  opts.k_transposed = false;
  opts.tf32 = true;
  ValidatedAttention a = validate_attention_args(q, k, v, o, std::nullopt, opts);
  EXPECT_EQ(a.problem.H_KV, 1);
  EXPECT_EQ(a.problem.causal, 2);
  EXPECT_EQ(a.problem.sm_scale, 0.125);
  EXPECT_EQ(a.problem.scale(), 0.125);
  EXPECT_FALSE(a.problem.k_transposed);
  EXPECT_TRUE(a.problem.tf32);
  EXPECT_EQ(a.problem.dtype, DType::f32);
  opts.causal = Causal::TopLeft;
  EXPECT_EQ(validate_attention_args(q, k, v, o, std::nullopt, opts).problem.causal, 1);
}

TEST(AttentionApi, DefaultConfigOverrideIsAccepted) {
  TensorRef q = TensorRef::contiguous(0x10000000, DType::f16, {1, 2, 64, 40});
  TensorRef k = TensorRef::contiguous(0x20000000, DType::f16, {1, 2, 64, 40});
  TensorRef v = TensorRef::contiguous(0x30000000, DType::f16, {1, 2, 64, 40});
  TensorRef o = TensorRef::contiguous(0x40000000, DType::f16, {1, 2, 64, 40});
  AttentionOptions opts;
  opts.causal = Causal::TopLeft;
  const AttentionProblem p = validate_attention_args(q, k, v, o, std::nullopt, opts).problem;
  EXPECT_EQ(p.head_dim_tile(), 64); // D = 40 pads to a 64-wide tile
  opts.config = default_fa2_config(p);
  opts.config->set("BLOCK_M", 64).set("BLOCK_N", 32);
  EXPECT_NO_THROW(validate_attention_args(q, k, v, o, std::nullopt, opts));
}

TEST(AttentionApi, EmptyQueriesOrBatchAreANoOp) {
  // Nothing to compute: addresses (here null) and strides are not looked at, and forward() returns at once,
  // with or without a GPU.
  for (auto [b, n_q] : {std::pair<int64_t, int64_t>{0, 16}, {2, 0}}) {
    TensorRef q = TensorRef::contiguous(0, DType::f16, {b, 4, n_q, 64});
    TensorRef k = TensorRef::contiguous(0, DType::f16, {b, 4, 32, 64});
    TensorRef v = TensorRef::contiguous(0, DType::f16, {b, 4, 32, 64});
    TensorRef o = TensorRef::contiguous(0, DType::f16, {b, 4, n_q, 64});
    ValidatedAttention a = validate_attention_args(q, k, v, o, std::nullopt);
    EXPECT_TRUE(a.empty) << "B=" << b << " N_Q=" << n_q;
    EXPECT_EQ(a.problem.B, b);
    EXPECT_EQ(a.problem.N_Q, n_q);
    EXPECT_NO_THROW(forward(q, k, v, o));
    EXPECT_NO_THROW(fa1_forward(q, k, v, o));
  }
}

TEST(AttentionApi, SingletonDimsMayHaveAnyStride) {
  // A size-1 dim is never stepped along, so its stride (as frameworks often leave it) does not matter.
  TensorRef q{0x10000000, DType::f16, {1, 1, 64, 64}, {7, 3, 64, 1}};
  TensorRef k{0x20000000, DType::f16, {1, 1, 64, 64}, {0, 0, 64, 1}};
  TensorRef v = TensorRef::contiguous(0x30000000, DType::f16, {1, 1, 64, 64});
  TensorRef o{0x40000000, DType::f16, {1, 1, 64, 64}, {0, 5, 64, 1}};
  TensorRef lse{0x50000000, DType::f32, {1, 1, 64}, {9, 9, 1}};
  EXPECT_NO_THROW(validate_attention_args(q, k, v, o, lse));
}

} // namespace
