// The device prelude (codegen/prelude/kiln_prelude.cuh) compiles with NVRTC and no include path for every
// supported arch, together with a kernel that calls every function it offers; the cubin has no stack frame
// and no spills; the PTX keeps the instructions the wrappers promise; swizzle_chunk's bank-conflict
// property holds (checked by static_assert inside NVRTC); misuse fails at compile time with a clear message.
#include "codegen/prelude.h"
#include "runtime/compiler.h"
#include "runtime/nvrtc.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

#define KILN_SKIP_WITHOUT_NVRTC()                                                                          \
  do {                                                                                                     \
    std::string why_;                                                                                      \
    if (!::kiln::rt::nvrtc_available(&why_))                                                               \
      GTEST_SKIP() << "NVRTC not available: " << why_;                                                     \
  } while (0)

// Calls every prelude function once, and writes every result to memory so nothing is dead code.
const char* kEveryFunctionKernel = R"(
// swizzle_chunk's contract, checked exhaustively at compile time: within a row it permutes the chunks,
// and 8 consecutive rows (starting at any multiple of 8) read at one logical chunk hit 8 distinct 16-byte
// positions of a 128-byte shared-memory wavefront.
template <int CPR> __device__ constexpr bool swizzle_is_conflict_free() {
  for (int row = 0; row < 64; ++row) {
    bool seen[64] = {};
    for (int c = 0; c < CPR; ++c) {
      int p = kiln::swizzle_chunk<CPR>(row, c);
      if (p < 0 || p >= CPR || seen[p])
        return false;
      seen[p] = true;
    }
  }
  for (int row0 = 0; row0 < 64; row0 += 8)
    for (int c = 0; c < CPR; ++c) {
      bool bank_group[8] = {};
      for (int r = row0; r < row0 + 8; ++r) {
        int g = (r * CPR + kiln::swizzle_chunk<CPR>(r, c)) % 8;
        if (bank_group[g])
          return false;
        bank_group[g] = true;
      }
    }
  return true;
}
static_assert(swizzle_is_conflict_free<1>(), "swizzle_chunk<1>");
static_assert(swizzle_is_conflict_free<2>(), "swizzle_chunk<2>");
static_assert(swizzle_is_conflict_free<4>(), "swizzle_chunk<4>");
static_assert(swizzle_is_conflict_free<8>(), "swizzle_chunk<8>");
static_assert(swizzle_is_conflict_free<16>(), "swizzle_chunk<16>");
static_assert(kiln::swizzle_chunk<8>(3, 5) == (5 ^ 3), "128-byte rows: phase = row % 8");
static_assert(kiln::swizzle_chunk<4>(5, 1) == (1 ^ 2), "64-byte rows: phase = (row / 2) % 4");
static_assert(kiln::swizzle_chunk<1>(7, 0) == 0, "16-byte rows are never swizzled");
static_assert(sizeof(kiln::f16) == 2 && alignof(kiln::f16) == 2, "f16 is 2 bytes, 2-aligned");
static_assert(sizeof(kiln::bf16) == 2 && alignof(kiln::bf16) == 2, "bf16 is 2 bytes, 2-aligned");
static_assert(sizeof(kiln::u32) == 4 && sizeof(kiln::u64) == 8 && sizeof(kiln::i64) == 8, "integer typedefs");

struct Sources {
  float f;
  double d;
  int i;
  long long l;
  bool b;
  unsigned char u;
  kiln::f16 h;
  kiln::bf16 bh;
};

// out[0..7] = the 8 sources converted to To.
template <class To> __device__ void convert_all(To* out, const Sources& s) {
  out[0] = kiln::cvt<To>(s.f);
  out[1] = kiln::cvt<To>(s.d);
  out[2] = kiln::cvt<To>(s.i);
  out[3] = kiln::cvt<To>(s.l);
  out[4] = kiln::cvt<To>(s.b);
  out[5] = kiln::cvt<To>(s.u);
  out[6] = kiln::cvt<To>(s.h);
  out[7] = kiln::cvt<To>(s.bh);
}

extern "C" __global__ void prelude_every_function(const float* fin, float* fo, double* dout, int* io,
                                                  long long* lo, bool* zo, unsigned char* uo, kiln::f16* ho,
                                                  kiln::bf16* bo, kiln::u32* wo, const float4* gin,
                                                  float4* gout, kiln::BlockPtr<float, 2> bp) {
  __shared__ __align__(16) unsigned char tile[2048];
  const int tid = threadIdx.x;
  const float x = fin[tid];
  const double xd = static_cast<double>(fin[tid + 32]);

  // conversions: all 64 pairs
  Sources s{x, xd, tid - 7, 1ll << 40, (tid & 1) != 0, static_cast<unsigned char>(tid), kiln::cvt<kiln::f16>(x),
            kiln::cvt<kiln::bf16>(x)};
  const int base = tid * 8;
  convert_all<float>(fo + base, s);
  convert_all<double>(dout + base, s);
  convert_all<int>(io + base, s);
  convert_all<long long>(lo + base, s);
  convert_all<bool>(zo + base, s);
  convert_all<unsigned char>(uo + base, s);
  convert_all<kiln::f16>(ho + base, s);
  convert_all<kiln::bf16>(bo + base, s);
  wo[tid * 8 + 0] = kiln::pack_f16x2(x, x + 1.f);
  wo[tid * 8 + 1] = kiln::pack_bf16x2(x, x + 1.f);
  wo[tid * 8 + 2] = kiln::pack2(s.h, s.h);
  wo[tid * 8 + 3] = kiln::pack2(s.bh, s.bh);
  wo[tid * 8 + 4] = kiln::to_tf32(x);

  // math
  float m = kiln::ex2(x) + kiln::lg2(x) + kiln::exp_fast(x) + kiln::log_fast(x) + kiln::rsqrt_fast(x) +
            kiln::sqrt_rn(x);
  m += kiln::max_propagate_nan(x, m) + kiln::min_propagate_nan(x, m) + kiln::max_ignore_nan(x, m) +
       kiln::min_ignore_nan(x, m) + kiln::fmax_nan(x, m) + kiln::fmin_nan(x, m);
  double md = kiln::ex2(xd) + kiln::lg2(xd) + kiln::exp_fast(xd) + kiln::log_fast(xd) + kiln::rsqrt_fast(xd) +
              kiln::sqrt_rn(xd);
  md += kiln::max_propagate_nan(xd, md) + kiln::min_propagate_nan(xd, md) + kiln::max_ignore_nan(xd, md) +
        kiln::min_ignore_nan(xd, md) + kiln::fmax_nan(xd, md) + kiln::fmin_nan(xd, md);

  // threads and shuffles
  m += kiln::shfl_xor(m, 1);
  md += kiln::shfl_xor(md, 2);
  int si = kiln::shfl_xor(kiln::lane_id() + kiln::warp_id(), 4);
  long long sl = kiln::shfl_xor(static_cast<long long>(si) << 33, 8);
  bool sb = kiln::shfl_xor(x > 0.f, 16);
  kiln::f16 sh = kiln::shfl_xor(s.h, 1);
  kiln::bf16 sbh = kiln::shfl_xor(s.bh, 1);

  // cp.async into shared memory, then ldmatrix and mma from it
  const kiln::u32 t = kiln::smem_u32(tile);
  kiln::cp_async_16(t + tid * 16, gin + tid, tid < 20);
  kiln::cp_async_8(t + 512 + tid * 8, gin + tid, tid < 20);
  kiln::cp_async_4(t + 768 + tid * 4, gin + tid, tid < 20);
  kiln::cp_async_commit();
  kiln::cp_async_wait<1>();
  kiln::cp_async_wait<0>();
  kiln::cp_async_wait_all();
  __syncthreads();
  const kiln::u32 row_addr = t + (tid % 16) * 32 + kiln::swizzle_chunk<2>(tid % 16, tid / 16) * 16;
  kiln::u32 a[4], bt[4], b[2], b2[2];
  kiln::ldmatrix_x4(row_addr, a);
  kiln::ldmatrix_x4_trans(row_addr, bt);
  kiln::ldmatrix_x2(row_addr, b);
  kiln::ldmatrix_x2_trans(row_addr, b2);
  float acc[4] = {m, m, m, m};
  kiln::mma_m16n8k16_f16(acc, a, b);
  kiln::mma_m16n8k16_bf16(acc, a, b2);
  const kiln::u32 ta[4] = {kiln::to_tf32(acc[0]), kiln::to_tf32(acc[1]), bt[0], bt[1]};
  kiln::mma_m16n8k8_tf32(acc, ta, b);
  fo[512 + tid] = acc[0] + acc[1] + acc[2] + acc[3];
  dout[512 + tid] = md;
  lo[512 + tid] = sl + si + (sb ? 1 : 0);
  ho[512 + tid] = sh;
  bo[512 + tid] = sbh;

  // vector global memory
  unsigned char v16[16], v8[8], v4[4], v2[2];
  kiln::ld_global<16>(gin + tid, v16);
  kiln::ld_global<8>(gin + tid, v8);
  kiln::ld_global<4>(gin + tid, v4);
  kiln::ld_global<2>(gin + tid, v2);
  kiln::st_global<16>(gout + tid, v16);
  kiln::st_global<8>(gout + 32 + tid, v8);
  kiln::st_global<4>(gout + 64 + tid, v4);
  kiln::st_global<2>(gout + 96 + tid, v2);

  // atomics
  kiln::atomic_add(fo + 600, x);
  kiln::atomic_add(dout + 600, xd);
  kiln::atomic_add(io + 600, tid);
  kiln::atomic_add(lo + 600, static_cast<long long>(tid));
  kiln::atomic_add(ho + 600, s.h);
#if __CUDA_ARCH__ >= 900
  kiln::atomic_add(bo + 600, s.bh);
#endif

  // block pointer
  const kiln::i64 delta[2] = {tid, 64};
  kiln::BlockPtr<float, 2> moved = bp.advanced(delta);
  lo[700 + tid] = moved.off[0] + moved.off[1] + moved.shape[0] + moved.stride[1];
  moved.base[moved.off[0] * moved.stride[0] + moved.off[1] * moved.stride[1]] = x;
}
)";

std::string every_function_source() { return std::string(prelude_source()) + kEveryFunctionKernel; }

rt::CompiledKernel compile_every_function(const std::string& arch, bool fast_math = false) {
  rt::CompileRequest req;
  req.source = every_function_source();
  req.kernel_name = "prelude_every_function";
  req.arch = arch;
  req.fast_math = fast_math;
  req.want_ptx = true;
  return rt::compile_cuda(req);
}

TEST(PreludeSource, IsSelfContained) {
  std::string_view text = prelude_source();
  EXPECT_GT(text.size(), 1000u) << "the embedded prelude looks truncated";
  EXPECT_EQ(text.find("#include"), std::string_view::npos) << "NVRTC gets no include path";
  EXPECT_NE(text.find("namespace kiln"), std::string_view::npos);
  EXPECT_NE(text.find("} // namespace kiln"), std::string_view::npos) << "the embedded text ends early";
}

class PreludeCompiles : public ::testing::TestWithParam<std::string> {};

TEST_P(PreludeCompiles, EveryFunctionWithoutStackOrSpills) {
  KILN_SKIP_WITHOUT_NVRTC();
  const std::string& arch = GetParam();
  rt::CompiledKernel k = compile_every_function(arch);
  ASSERT_GE(k.cubin.size(), 4u);
  EXPECT_EQ(k.cubin.compare(0, 4, "\x7f" "ELF"), 0) << "the cubin is an ELF image";
  EXPECT_GT(k.usage.registers, 0) << k.log;
  EXPECT_EQ(k.log.find("warning"), std::string::npos) << "the prelude compiles without warnings\n" << k.log;
  EXPECT_EQ(k.usage.stack_frame_bytes, 0) << "fragments must stay in registers\n" << k.log;
  // ptxas reports spills only when NVRTC's log carries its -v report (-1 otherwise).
  EXPECT_LE(k.usage.spill_store_bytes, 0) << k.log;
  EXPECT_LE(k.usage.spill_load_bytes, 0) << k.log;

  // The wrappers' instructions survive into the PTX (none was folded away or replaced).
  for (const char* insn :
       {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", "cp.async.cg.shared.global", "cp.async.ca.shared.global",
        "cp.async.commit_group", "cp.async.wait_group 1", "cp.async.wait_group 0", "cp.async.wait_all",
        "cvt.rn.f16.f32", "cvt.rn.bf16.f32", "cvt.rn.f16x2.f32", "cvt.rn.bf16x2.f32", "cvt.rna.tf32.f32",
        "ex2.approx.ftz.f32", "lg2.approx.ftz.f32", "rsqrt.approx.ftz.f32", "sqrt.rn.f32", "max.NaN.f32",
        "min.NaN.f32", "shfl.sync.bfly.b32", "ld.global.v4.b32", "ld.global.v2.b32", "st.global.v4.b32",
        "st.global.b16", "atom.add.noftz.f16", "atom.add.f64", "atom.add.u64"})
    EXPECT_NE(k.ptx.find(insn), std::string::npos) << arch << ": no " << insn << " in the PTX";
  if (arch.rfind("sm_90", 0) == 0)
    EXPECT_NE(k.ptx.find("atom.add.noftz.bf16"), std::string::npos) << "bf16 atomics exist from sm_90";
  else
    EXPECT_EQ(k.ptx.find("atom.add.noftz.bf16"), std::string::npos) << "bf16 atomics need sm_90";
}

INSTANTIATE_TEST_SUITE_P(AllArchs, PreludeCompiles, ::testing::ValuesIn(rt::supported_archs()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(PreludeCompile, FastMathDoesNotBreakIt) {
  KILN_SKIP_WITHOUT_NVRTC();
  rt::CompiledKernel k = compile_every_function("sm_80", /*fast_math=*/true);
  EXPECT_FALSE(k.cubin.empty());
  EXPECT_EQ(k.usage.stack_frame_bytes, 0) << k.log;
  // The NaN rules are explicit instructions, so --use_fast_math cannot change them.
  EXPECT_NE(k.ptx.find("max.NaN.f32"), std::string::npos);
}

// Compiling `body` inside a kernel after the prelude fails, and the error mentions `expected`.
void expect_compile_error(const std::string& body, const std::string& expected) {
  rt::CompileRequest req;
  req.source = std::string(prelude_source()) + "extern \"C\" __global__ void prelude_misuse(float* p) {\n" + body +
               "\n}\n";
  req.kernel_name = "prelude_misuse";
  req.arch = "sm_80";
  try {
    rt::compile_cuda(req);
    ADD_FAILURE() << "expected a compile error for: " << body;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(PreludeCompile, MisuseFailsAtCompileTimeWithTheRule) {
  KILN_SKIP_WITHOUT_NVRTC();
  expect_compile_error("p[0] = kiln::swizzle_chunk<3>(0, 0);", "CHUNKS_PER_ROW must be a power of two");
  expect_compile_error("float v[3]; kiln::ld_global<12>(p, v); p[1] = v[0];", "ld_global moves 2, 4, 8 or 16 bytes");
  expect_compile_error("float v[3] = {}; kiln::st_global<3>(p, v);", "st_global moves 2, 4, 8 or 16 bytes");
}

} // namespace
} // namespace kiln
