// Split-KV decoding on the GPU (kernels/attention/decode_split.h, decode_combine.h, decode_api.h): the
// interpreter's sweep (interp/decode_test_cases.h) at D = 64 and 128 through run_decode on the GPU (outputs
// and workspace poisoned with NaN, cache rows past each sequence NaN), then decode() end to end on device
// tensors: paged and contiguous caches, a caller's workspace or none, no LSE, chosen and forced split counts,
// and issue 19's decoding shape (64 sequences, 1 query, 8192 keys in pages of 64, GQA 32/8, D = 128) for
// correctness (its timing is the bench's). Each held to the double reference.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "interp/decode_test_cases.h"
#include "kernels/attention/decode_api.h"

#include <cmath>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class GpuDecode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(GpuDecode, MatchesReference) {
  KILN_REQUIRE_GPU();
  const DecodeCase& c = GetParam();
  check_decode_case(c, decode_case_split_config(c), default_decode_combine_config(c.problem), Executor::Gpu);
}

std::vector<DecodeCase> gpu_sweep() {
  std::vector<DecodeCase> cs = decode_sweep(64);
  for (const DecodeCase& c : decode_sweep(128))
    cs.push_back(c);
  return cs;
}

INSTANTIATE_TEST_SUITE_P(decode, GpuDecode, ::testing::ValuesIn(gpu_sweep()),
                         [](const auto& info) { return decode_case_name(info.param); });

// The GPU-sized tiles too: the default key tile of 64 (or the page) with 4 and 8 warps and 2-4 stages.
TEST(GpuDecodeKernels, DefaultTilesMatchTheReference) {
  KILN_REQUIRE_GPU();
  for (int warps : {4, 8})
    for (int stages : {2, 4}) {
      DecodeCase c = decode_case(3, 32, 8, 1, 2000, 128, 2, 4, 64, 64, {2000, 1, 1500});
      Config split = default_decode_split_config(c.problem);
      split.num_warps = warps;
      split.num_stages = stages;
      SCOPED_TRACE(decode_case_name(c) + " w" + std::to_string(warps) + " s" + std::to_string(stages));
      check_decode_case(c, split, default_decode_combine_config(c.problem), Executor::Gpu);
    }
}

// decode() on device tensors described as the caller would: q/o [B, N_Q, H, D], the cache paged or not.
struct ApiRun {
  AttentionResult out;
  AttentionResult ref;
};

ApiRun run_api(const DecodeProblem& p, attention::DecodeOptions options, bool with_lse, bool with_workspace,
               int64_t num_splits) {
  const DecodeInputs in = make_decode_inputs(p, 1234 + static_cast<uint64_t>(p.N_K), 1.0);
  rt::DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v), table = upload(in.block_table),
                   lens = upload(in.seqlens_k);
  HostBuffer o_host(p.dtype, in.q.numel(), "O"), lse_host(DType::f32, p.B * p.H * p.N_Q, "LSE");
  poison(o_host);
  poison(lse_host);
  rt::DeviceBuffer o = upload(o_host), lse = upload(lse_host);
  const int64_t cache_b = p.paged() ? p.num_pages() : p.B, cache_n = p.paged() ? p.page_size : p.N_K;
  const auto q_ref = attention::TensorRef::contiguous(q.ptr(), p.dtype, {p.B, p.N_Q, p.H, p.D});
  const auto k_ref = attention::TensorRef::contiguous(k.ptr(), p.dtype, {cache_b, cache_n, p.H_KV, p.D});
  const auto v_ref = attention::TensorRef::contiguous(v.ptr(), p.dtype, {cache_b, cache_n, p.H_KV, p.D});
  const auto o_ref = attention::TensorRef::contiguous(o.ptr(), p.dtype, {p.B, p.N_Q, p.H, p.D});
  std::optional<attention::TensorRef> lse_ref;
  if (with_lse)
    lse_ref = attention::TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q});
  if (p.paged())
    options.block_table = attention::TensorRef::contiguous(table.ptr(), DType::i32, {p.B, p.max_pages()});
  if (!p.seqlens_k.empty())
    options.seqlens_k = attention::TensorRef::contiguous(lens.ptr(), DType::i32, {p.B});
  options.causal = static_cast<attention::Causal>(p.causal);
  options.num_splits = num_splits;
  std::optional<rt::DeviceBuffer> workspace;
  if (with_workspace) {
    const uint64_t bytes =
        attention::decode_workspace_bytes(p.B, p.H, p.N_Q, p.D, num_splits ? num_splits : 1024);
    HostBuffer nan(DType::f32, static_cast<int64_t>(bytes / 4));
    poison(nan);
    workspace.emplace(upload(nan));
    options.workspace =
        attention::TensorRef::contiguous(workspace->ptr(), DType::f32, {static_cast<int64_t>(bytes / 4)});
  }
  attention::decode(q_ref, k_ref, v_ref, o_ref, lse_ref, options);
  rt::Stream().synchronize();
  ApiRun r;
  const HostBuffer o_out = download(o, p.dtype, in.q.numel()),
                   lse_out = download(lse, DType::f32, lse_host.numel());
  for (int64_t b = 0; b < p.B; ++b) // [B, N_Q, H, D] -> logical [B, H, N_Q, D]
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.N_Q; ++i)
        for (int64_t d = 0; d < p.D; ++d)
          r.out.o.push_back(o_out.get(((b * p.N_Q + i) * p.H + h) * p.D + d));
  r.out.lse = to_doubles(lse_out);
  r.ref = decode_reference(p, in);
  return r;
}

void expect_matches(const DecodeProblem& p, const ApiRun& r, bool with_lse) {
  const double tol = attention_tolerance(p.dtype, false, max_abs_lse(r.ref));
  const Comparison o = compare_to_reference(r.out.o, r.ref.o);
  EXPECT_TRUE(o.ok(tol)) << "O: " << o.str() << " (" << p.str() << ")";
  if (with_lse) {
    const Comparison lse = compare_to_reference(r.out.lse, r.ref.lse);
    EXPECT_TRUE(lse.ok(tol)) << "LSE: " << lse.str() << " (" << p.str() << ")";
  }
}

DecodeProblem api_problem(int64_t B, int64_t H, int64_t H_KV, int64_t N_Q, int64_t N_K, int64_t D, int causal,
                          int64_t page_size, std::vector<int64_t> seqlens, DType dt = DType::f16) {
  return decode_case(B, H, H_KV, N_Q, N_K, D, causal, 1, 16, page_size, std::move(seqlens), dt).problem;
}

TEST(GpuDecodeApi, PagedWithSeqlensChosenSplits) {
  KILN_REQUIRE_GPU();
  const DecodeProblem p = api_problem(3, 16, 2, 4, 4096, 128, 2, 64, {4096, 0, 1777});
  for (bool workspace : {false, true}) {
    SCOPED_TRACE(workspace ? "caller's workspace" : "own workspace");
    expect_matches(p, run_api(p, {}, true, workspace, 0), true);
  }
}

TEST(GpuDecodeApi, SmallAndLargePagesForcedSplits) {
  KILN_REQUIRE_GPU();
  for (int64_t page : {16, 256}) {
    const DecodeProblem p = api_problem(2, 8, 1, 16, 2048, 64, 2, page, {1, 2048}, DType::bf16);
    SCOPED_TRACE(p.str());
    expect_matches(p, run_api(p, {}, true, true, 7), true);
  }
}

TEST(GpuDecodeApi, ContiguousCacheWithoutLse) {
  KILN_REQUIRE_GPU();
  const DecodeProblem p = api_problem(4, 8, 8, 1, 1000, 128, 0, 0, {});
  expect_matches(p, run_api(p, {}, false, false, 0), false);
  expect_matches(p, run_api(p, {}, false, true, 3), false);
}

// Issue 19's decoding shape per sequence (1 query, 8192 keys in pages of 64, GQA 32/8, D = 128), 16 sequences
// rather than 64 to keep the double reference quick, with the split count chosen for this GPU.
TEST(GpuDecodeApi, Issue19DecodingShape) {
  KILN_REQUIRE_GPU();
  const DecodeProblem p = api_problem(16, 32, 8, 1, 8192, 128, 2, 64, std::vector<int64_t>(16, 8192));
  expect_matches(p, run_api(p, {}, true, false, 0), true);
}

} // namespace
