// Attention mods over packed variable-length batches on a GPU (attention_varlen_mods.h): the interpreter's
// varlen mod cases through the JIT at the default configs, forward and backward (deterministic and atomic
// dQ), and a few through the host API (forward_varlen then backward_varlen with options.mods and device mod
// tensors), each against the per-sequence double-precision reference with the same mods. Skips without a
// driver. GpuVarlenMods.* runs the kernels, GpuVarlenModsApi.* the host API.
#include "gpu/gpu_skip.h"
#include "interp/attention_varlen_mods_cases.h"
#include "kernels/attention/attention_varlen_bwd_api.h"
#include "runtime/device.h"
#include "scoped_env.h"

#include <gtest/gtest.h>

#include <list>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::testing_support;

namespace {

class GpuVarlenMods : public ::testing::TestWithParam<VarlenModCase> {};

TEST_P(GpuVarlenMods, ForwardMatchesThePerSequenceReference) {
  KILN_REQUIRE_GPU();
  const VarlenModCase& c = GetParam();
  check_varlen_mod_case(c, default_fa2_varlen_config(c.base.problem), Executor::Gpu);
  SCOPED_TRACE("the case's tiles, at least 64 x 32");
  Config config = varlen_case_config(c.base);
  config.set("BLOCK_M", std::max<int64_t>(c.base.block_m, 64))
      .set("BLOCK_N", std::max<int64_t>(c.base.block_n, 32));
  check_varlen_mod_case(c, config, Executor::Gpu);
}

TEST_P(GpuVarlenMods, BackwardMatchesThePerSequenceGradients) {
  KILN_REQUIRE_GPU();
  const VarlenModCase& c = GetParam();
  check_varlen_mod_bwd_case(c, default_varlen_bwd_configs(c.base.problem, false), Executor::Gpu);
  SCOPED_TRACE("atomic dQ");
  check_varlen_mod_bwd_case(c, default_varlen_bwd_configs(c.base.problem, true), Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(varlen_mods, GpuVarlenMods, ::testing::ValuesIn(varlen_mod_cases()),
                         [](const auto& info) { return info.param.name; });

rt::DeviceBuffer upload_padded(const HostBuffer& b) {
  rt::DeviceBuffer d(std::max<size_t>(b.bytes.size(), 16)); // an empty tensor still gets an address
  d.copy_from_host(b.bytes.data(), b.bytes.size());
  return d;
}

// forward_varlen, then backward_varlen, with the case's mods on device copies; O, LSE and the gradients
// against the per-sequence reference with the mods.
void check_api(const VarlenModCase& c) {
  const VarlenProblem& p = c.base.problem;
  const uint64_t seed = varlen_mod_case_seed(c) + 0xb4c4;
  const AttentionInputs in = make_varlen_inputs(p, seed, c.base.input_scale);
  const HostBuffer dout = make_varlen_dout(p, seed + 1, 1.0);
  AttentionBwdBuffers host = make_varlen_bwd_buffers(p, in, dout); // O, LSE overwritten by the forward
  poison(host.o);
  poison(host.lse);
  rt::DeviceBuffer q = upload_padded(in.q), k = upload_padded(in.k), v = upload_padded(in.v),
                   o = upload_padded(host.o), lse = upload_padded(host.lse), d_out = upload_padded(dout),
                   dq = upload_padded(host.dq), dk = upload_padded(host.dk), dv = upload_padded(host.dv);
  rt::DeviceBuffer cu_q = rt::DeviceBuffer::from_host(p.cu_seqlens_q()),
                   cu_k = rt::DeviceBuffer::from_host(p.cu_seqlens_k());
  const VarlenStrides s = varlen_strides(p);
  auto packed = [&](const rt::DeviceBuffer& b, int64_t total, int64_t heads, const PackedStrides& st) {
    return TensorRef{b.ptr(), p.dtype, {total, heads, p.D}, {st.token, st.head, 1}};
  };
  VarlenBatch batch;
  batch.cu_seqlens_q = TensorRef::contiguous(cu_q.ptr(), DType::i32, {p.batch() + 1});
  batch.cu_seqlens_k = TensorRef::contiguous(cu_k.ptr(), DType::i32, {p.batch() + 1});
  batch.max_seqlen_q = p.max_seqlen_q();
  batch.max_seqlen_k = p.max_seqlen_k();
  BackwardOptions opts;
  opts.causal = static_cast<Causal>(p.causal);
  opts.k_transposed = p.k_transposed;
  opts.mods = c.mods;
  std::list<rt::DeviceBuffer> mod_buffers;
  for (const auto& [name, t] : c.tensors) {
    mod_buffers.push_back(upload_padded(t.data));
    opts.mod_tensors[name] = TensorRef{mod_buffers.back().ptr(), t.data.dtype,
                                       llvm::SmallVector<int64_t, 4>(t.shape.begin(), t.shape.end()),
                                       llvm::SmallVector<int64_t, 4>(t.strides.begin(), t.strides.end())};
  }
  const TensorRef tq = packed(q, p.total_q(), p.H, s.q), tk = packed(k, p.total_k(), p.H_KV, s.k),
                  tv = packed(v, p.total_k(), p.H_KV, s.v), to = packed(o, p.total_q(), p.H, s.o),
                  tlse = TensorRef::contiguous(lse.ptr(), DType::f32, {p.H, p.total_q()});
  forward_varlen(tq, tk, tv, to, tlse, batch, opts);
  backward_varlen(tq, tk, tv, to, tlse, packed(d_out, p.total_q(), p.H, s.q),
                  packed(dq, p.total_q(), p.H, s.q), packed(dk, p.total_k(), p.H_KV, s.k),
                  packed(dv, p.total_k(), p.H_KV, s.v), batch, opts);
  AttentionOutputs fwd{HostBuffer(p.dtype, host.o.numel(), "O"),
                       HostBuffer(DType::f32, host.lse.numel(), "LSE")};
  o.copy_to_host(fwd.o.bytes.data(), fwd.o.bytes.size());
  lse.copy_to_host(fwd.lse.bytes.data(), fwd.lse.bytes.size());
  dq.copy_to_host(host.dq.bytes.data(), host.dq.bytes.size());
  dk.copy_to_host(host.dk.bytes.data(), host.dk.bytes.size());
  dv.copy_to_host(host.dv.bytes.data(), host.dv.bytes.size());

  const AttentionResult ref_fwd = varlen_reference_with_mods(p, in, c.mods, c.tensors);
  const AttentionResult got_fwd = gather_varlen_outputs(p, fwd);
  const double fwd_tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref_fwd));
  const Comparison co = compare_to_reference(got_fwd.o, ref_fwd.o),
                   cl = compare_to_reference(got_fwd.lse, ref_fwd.lse);
  EXPECT_TRUE(co.ok(fwd_tol)) << "O: " << co.str() << ", tolerance " << fwd_tol;
  EXPECT_TRUE(cl.ok(fwd_tol)) << "LSE: " << cl.str() << ", tolerance " << fwd_tol;
  // The backward read the kernel's O and LSE, within the forward's tolerance of the reference's.
  const AttentionGrads got = gather_varlen_grads(p, host),
                       ref = varlen_reference_backward_with_mods(p, in, dout, c.mods, c.tensors);
  const double tol = attention_grad_tolerance(p.dtype, p.tf32, max_abs_lse(ref_fwd));
  for (const auto& [name, cmp] : compare_grads(got, ref))
    EXPECT_TRUE(cmp.ok(tol)) << name << ": " << cmp.str() << ", tolerance " << tol;
}

TEST(GpuVarlenModsApi, ForwardAndBackwardVarlenWithMods) {
  KILN_REQUIRE_GPU();
  ScopedEnv off("KILN_AUTOTUNE", "off");
  for (const VarlenModCase& c : varlen_mod_cases()) {
    if (c.name != "document_window_softcap_gqa" && c.name != "sinks_causal_br_gqa" &&
        c.name != "bias_full_f32" && c.name != "alibi_nq_ne_nk_gqa")
      continue;
    SCOPED_TRACE(c.name);
    check_api(c);
  }
}

} // namespace
