// kiln device prelude: the small CUDA tile library that every generated kernel starts with.
//
// Owns: 16-bit float types, dtype conversions with the interpreter's rounding rules, fast f32 math,
// NaN-aware max/min, warp shuffles, shared-memory addressing and swizzling, ldmatrix, mma.sync,
// cp.async, vector global loads/stores, atomics and the device-side block pointer.
//
// NVRTC compiles this text with no include path and no CUDA header, so everything it needs is defined
// here; the instructions the compiler would not pick by itself are inline PTX. Targets: sm_80, sm_86,
// sm_89, sm_90a. Every function is __device__ __forceinline__ so that it costs nothing to call.
//
// PTX fragment notation used below: in a warp, lane = threadIdx.x % 32, g = lane / 4 ("groupID") and
// t = lane % 4 ("threadID_in_group").
//
// (This file is embedded by CMake's configure_file: never write two at-signs around a word here.)

namespace kiln {

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// IEEE binary16 and bfloat16 as raw bits: trivial, 2 bytes, 2-byte aligned, so that tiles of them can
// live in shared memory and be moved as u32 pairs. Arithmetic happens in f32 after cvt<float>.
struct f16 {
  unsigned short bits;
};
struct bf16 {
  unsigned short bits;
};

namespace detail {

template <class A, class B> struct is_same {
  static constexpr bool value = false;
};
template <class A> struct is_same<A, A> {
  static constexpr bool value = true;
};

template <class T> struct is_floating {
  static constexpr bool value = false;
};
template <> struct is_floating<float> {
  static constexpr bool value = true;
};
template <> struct is_floating<double> {
  static constexpr bool value = true;
};

__device__ __forceinline__ float float_from_bits(u32 b) {
  float f;
  asm("mov.b32 %0, %1;" : "=f"(f) : "r"(b));
  return f;
}
__device__ __forceinline__ u32 bits_from_float(float f) {
  u32 b;
  asm("mov.b32 %0, %1;" : "=r"(b) : "f"(f));
  return b;
}

// Step 1 of every conversion: 16-bit floats become f32, exactly; everything else passes through.
template <class T> __device__ __forceinline__ T widen(T x) { return x; }
__device__ __forceinline__ float widen(f16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
// bf16 is the top half of an f32, so widening is a shift (cvt.f32.bf16 needs sm_90).
__device__ __forceinline__ float widen(bf16 x) { return float_from_bits(static_cast<u32>(x.bits) << 16); }

// Step 2: from a widened value S (never f16/bf16) to To, with the interpreter's rules
// (support/half.cpp round_to_dtype): to 16-bit floats through f32, round to nearest even; to integers
// from floating point truncating toward zero through i64 and then wrapping; to bool by "nonzero".
template <class To> struct Narrow {
  template <class S> __device__ __forceinline__ static To from(S x) {
    if constexpr (is_floating<S>::value && !is_floating<To>::value)
      return static_cast<To>(static_cast<i64>(x));
    else
      return static_cast<To>(x);
  }
};
template <> struct Narrow<bool> {
  template <class S> __device__ __forceinline__ static bool from(S x) { return x != static_cast<S>(0); }
};
template <> struct Narrow<f16> {
  template <class S> __device__ __forceinline__ static f16 from(S x) {
    f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(static_cast<float>(x)));
    return h;
  }
};
template <> struct Narrow<bf16> {
  template <class S> __device__ __forceinline__ static bf16 from(S x) {
    bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(static_cast<float>(x)));
    return h;
  }
};

} // namespace detail

// ---- conversions ------------------------------------------------------------------------------------

// x as a To, for every pair among float, double, int, long long, bool, unsigned char, f16, bf16.
// float/double -> f16/bf16 round to nearest even (a double is first rounded to f32, as the interpreter
// does); f16/bf16 -> float is exact; f16 <-> bf16 goes through f32; float -> int truncates toward zero
// (wrapping through i64 when out of range, like the interpreter); int -> float rounds to nearest;
// bool is "x != 0" (NaN counts as nonzero).
template <class To, class From> __device__ __forceinline__ To cvt(From x) {
  if constexpr (detail::is_same<To, From>::value)
    return x;
  else
    return detail::Narrow<To>::from(detail::widen(x));
}

// Two f32 rounded (nearest even) to f16 and packed: lo in bits 0..15, hi in bits 16..31, the order an
// mma fragment register holds consecutive elements in. cvt.rn.f16x2.f32 d, a, b puts a in the upper half.
__device__ __forceinline__ u32 pack_f16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// As pack_f16x2 for bf16 (cvt.rn.bf16x2.f32, sm_80+).
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// Two 16-bit values packed into one register, lo in the low half.
__device__ __forceinline__ u32 pack2(f16 lo, f16 hi) {
  return static_cast<u32>(lo.bits) | (static_cast<u32>(hi.bits) << 16);
}
__device__ __forceinline__ u32 pack2(bf16 lo, bf16 hi) {
  return static_cast<u32>(lo.bits) | (static_cast<u32>(hi.bits) << 16);
}
// x rounded to tf32 (10-bit mantissa, round to nearest, ties away: cvt.rna.tf32.f32), as the b32 operand
// mma.m16n8k8.tf32 takes (the mma reads the top 19 bits; rounding first beats the mma's truncation).
__device__ __forceinline__ u32 to_tf32(float x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// ---- math -------------------------------------------------------------------------------------------

// 2^x (ex2.approx.ftz.f32: max 2 ulp error, subnormal results flushed to zero).
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// log2(x) (lg2.approx.ftz.f32).
__device__ __forceinline__ float lg2(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// e^x as 2^(x * log2(e)): one FMUL and one MUFU, what softmax and attention use.
__device__ __forceinline__ float exp_fast(float x) { return ex2(x * 1.4426950408889634f); }
// ln(x) as log2(x) * ln(2).
__device__ __forceinline__ float log_fast(float x) { return lg2(x) * 0.6931471805599453f; }
// 1/sqrt(x) (rsqrt.approx.ftz.f32).
__device__ __forceinline__ float rsqrt_fast(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// sqrt(x), correctly rounded (sqrt.rn.f32).
__device__ __forceinline__ float sqrt_rn(float x) {
  float r;
  asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// f64 versions: full-precision CUDA math functions (NVRTC declares them without a header); there is no
// fast f64 hardware path worth having.
__device__ __forceinline__ double ex2(double x) { return ::exp2(x); }
__device__ __forceinline__ double lg2(double x) { return ::log2(x); }
__device__ __forceinline__ double exp_fast(double x) { return ::exp(x); }
__device__ __forceinline__ double log_fast(double x) { return ::log(x); }
__device__ __forceinline__ double rsqrt_fast(double x) { return ::rsqrt(x); }
__device__ __forceinline__ double sqrt_rn(double x) {
  double r;
  asm("sqrt.rn.f64 %0, %1;" : "=d"(r) : "d"(x));
  return r;
}

// max/min with two NaN rules; the generator picks the one that matches the IR's semantics.
// *_propagate_nan: NaN when either operand is NaN (max.NaN.f32, sm_80+).
// *_ignore_nan: the other operand when one is NaN, NaN only when both are (fmaxf/fminf; max.f32).
__device__ __forceinline__ float max_propagate_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float min_propagate_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float max_ignore_nan(float a, float b) {
  float r;
  asm("max.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float min_ignore_nan(float a, float b) {
  float r;
  asm("min.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ double max_ignore_nan(double a, double b) {
  double r;
  asm("max.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b));
  return r;
}
__device__ __forceinline__ double min_ignore_nan(double a, double b) {
  double r;
  asm("min.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b));
  return r;
}
// PTX has no max.NaN.f64: a NaN operand is returned as is (a + b would also do, but keeps the payload less
// predictably).
__device__ __forceinline__ double max_propagate_nan(double a, double b) {
  return a != a ? a : (b != b ? b : max_ignore_nan(a, b));
}
__device__ __forceinline__ double min_propagate_nan(double a, double b) {
  return a != a ? a : (b != b ? b : min_ignore_nan(a, b));
}
// The interpreter's rule (dsl/interpreter.h: max/min ignore NaN unless every operand is NaN).
__device__ __forceinline__ float fmax_nan(float a, float b) { return max_ignore_nan(a, b); }
__device__ __forceinline__ float fmin_nan(float a, float b) { return min_ignore_nan(a, b); }
__device__ __forceinline__ double fmax_nan(double a, double b) { return max_ignore_nan(a, b); }
__device__ __forceinline__ double fmin_nan(double a, double b) { return min_ignore_nan(a, b); }

// ---- threads ----------------------------------------------------------------------------------------

// Generated kernels use 1-D blocks, so lane and warp follow from threadIdx.x alone.
__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x & 31u); }
__device__ __forceinline__ int warp_id() { return static_cast<int>(threadIdx.x >> 5); }

namespace detail {
// shfl.sync.bfly over the full warp; c = 0x1f is "clamp at lane 31, one 32-lane segment".
__device__ __forceinline__ u32 shfl_xor_b32(u32 v, int lane_mask) {
  u32 r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(lane_mask));
  return r;
}
__device__ __forceinline__ u64 shfl_xor_b64(u64 v, int lane_mask) {
  u32 lo = shfl_xor_b32(static_cast<u32>(v), lane_mask);
  u32 hi = shfl_xor_b32(static_cast<u32>(v >> 32), lane_mask);
  return (static_cast<u64>(hi) << 32) | lo;
}
} // namespace detail

// The value of v held by lane (lane_id() ^ lane_mask); all 32 lanes must take part (mask 0xffffffff).
__device__ __forceinline__ int shfl_xor(int v, int lane_mask) {
  return static_cast<int>(detail::shfl_xor_b32(static_cast<u32>(v), lane_mask));
}
__device__ __forceinline__ float shfl_xor(float v, int lane_mask) {
  return detail::float_from_bits(detail::shfl_xor_b32(detail::bits_from_float(v), lane_mask));
}
__device__ __forceinline__ long long shfl_xor(long long v, int lane_mask) {
  return static_cast<long long>(detail::shfl_xor_b64(static_cast<u64>(v), lane_mask));
}
__device__ __forceinline__ double shfl_xor(double v, int lane_mask) {
  u64 bits;
  asm("mov.b64 %0, %1;" : "=l"(bits) : "d"(v));
  bits = detail::shfl_xor_b64(bits, lane_mask);
  double r;
  asm("mov.b64 %0, %1;" : "=d"(r) : "l"(bits));
  return r;
}
__device__ __forceinline__ bool shfl_xor(bool v, int lane_mask) {
  return detail::shfl_xor_b32(v ? 1u : 0u, lane_mask) != 0u;
}

// One exchange of a register bit with the lane bit `lane_mask` (codegen/layout.h, widen_register_run): x0 and
// x1 are the registers that differ in that register bit. Afterwards a lane whose lane bit is clear holds its
// own x0 and its partner's x0 (as x1); a lane whose bit is set holds its partner's x1 (as x0) and its own x1.
template <typename T> __device__ __forceinline__ void exchange_lane_bit(T& x0, T& x1, int lane_mask) {
  const bool high = (lane_id() & lane_mask) != 0;
  const T got = shfl_xor(high ? x0 : x1, lane_mask);
  const T new_x0 = high ? got : x0, new_x1 = high ? x1 : got;
  x0 = new_x0;
  x1 = new_x1;
}
// The same for 16-bit values, which cross lanes in packed pairs: (a0, a1) is x0, (b0, b1) is x1.
template <typename H>
__device__ __forceinline__ void exchange_lane_bit_pair(H& a0, H& a1, H& b0, H& b1, int lane_mask) {
  const bool high = (lane_id() & lane_mask) != 0;
  const u32 a = static_cast<u32>(a0.bits) | (static_cast<u32>(a1.bits) << 16);
  const u32 b = static_cast<u32>(b0.bits) | (static_cast<u32>(b1.bits) << 16);
  const u32 got = detail::shfl_xor_b32(high ? a : b, lane_mask);
  const u32 new_a = high ? got : a, new_b = high ? b : got; // selects, not references: stays in registers
  a0.bits = static_cast<unsigned short>(new_a & 0xffffu);
  a1.bits = static_cast<unsigned short>(new_a >> 16);
  b0.bits = static_cast<unsigned short>(new_b & 0xffffu);
  b1.bits = static_cast<unsigned short>(new_b >> 16);
}
__device__ __forceinline__ f16 shfl_xor(f16 v, int lane_mask) {
  return f16{static_cast<unsigned short>(detail::shfl_xor_b32(v.bits, lane_mask))};
}
__device__ __forceinline__ bf16 shfl_xor(bf16 v, int lane_mask) {
  return bf16{static_cast<unsigned short>(detail::shfl_xor_b32(v.bits, lane_mask))};
}

// ---- shared memory ----------------------------------------------------------------------------------

// The 32-bit shared-window address of a generic pointer into shared memory (cvta.to.shared), the address
// form ldmatrix and cp.async take.
__device__ __forceinline__ u32 smem_u32(const void* p) {
  u32 r;
  asm("{\n\t.reg .u64 s;\n\tcvta.to.shared.u64 s, %1;\n\tcvt.u32.u64 %0, s;\n\t}" : "=r"(r) : "l"(p));
  return r;
}

// Stores to a 32-bit shared-window address: one register for the address where a generic pointer takes two (NVRTC
// keeps pointers into shared memory 64-bit), and the per-store constants fold into the instruction's offset.
__device__ __forceinline__ void st_shared_f32(u32 addr, float x) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(x) : "memory");
}
__device__ __forceinline__ void st_shared_f32x2(u32 addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

// The physical 16-byte chunk that holds logical chunk `chunk` of row `row` in a shared-memory tile whose
// rows are CHUNKS_PER_ROW chunks (a power of two) long. ldmatrix has 8 lanes read 8 consecutive rows at
// the same logical chunk; shared memory serves 128 bytes (8 chunks) per wavefront, so those 8 reads must
// land in 8 distinct chunk positions modulo 8. A row spans CHUNKS_PER_ROW of the 8 positions, so
// rows_per_phase = max(1, 8 / CHUNKS_PER_ROW) consecutive rows already differ; every further group of
// rows is XORed with the next phase, and phases cycle over min(CHUNKS_PER_ROW, 8) values.
template <int CHUNKS_PER_ROW> __device__ __forceinline__ constexpr int swizzle_chunk(int row, int chunk) {
  static_assert(CHUNKS_PER_ROW >= 1 && (CHUNKS_PER_ROW & (CHUNKS_PER_ROW - 1)) == 0,
                "CHUNKS_PER_ROW must be a power of two");
  constexpr int rows_per_phase = CHUNKS_PER_ROW >= 8 ? 1 : 8 / CHUNKS_PER_ROW;
  constexpr int phases = CHUNKS_PER_ROW < 8 ? CHUNKS_PER_ROW : 8;
  return chunk ^ ((row / rows_per_phase) % phases);
}

// ---- ldmatrix ---------------------------------------------------------------------------------------
// ldmatrix.sync.aligned.m8n8.xN.shared.b16 loads N 8x8 matrices of 16-bit elements from shared memory.
// Lanes 8i..8i+7 give the addresses of rows 0..7 of matrix i (16 contiguous bytes each, 16-byte aligned;
// with x2 only lanes 0..15 are read, but every lane must pass a valid address). Lane l receives in r[i]
// row l/4, elements 2*(l%4) and 2*(l%4)+1 of matrix i (low half first) -- exactly one register of an
// mma A/B/C fragment. With .trans the matrix is transposed on the way: r[i] holds column l/4, rows
// 2*(l%4) and 2*(l%4)+1, which turns a K x N row-major tile into an mma "col" B operand.

__device__ __forceinline__ void ldmatrix_x4(u32 smem_addr, u32 (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 smem_addr, u32 (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(u32 smem_addr, u32 (&r)[2]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2_trans(u32 smem_addr, u32 (&r)[2]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr)
               : "memory");
}

// ---- mma.sync ---------------------------------------------------------------------------------------
// D (16x8, f32) += A (16xK, row-major) * B (Kx8, "col": each lane holds a column). Accumulator d[4]:
// d[0], d[1] = D[g][2t], D[g][2t+1]; d[2], d[3] = D[g+8][2t], D[g+8][2t+1].

// m16n8k16 with f16 inputs. A: a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1], a[2] = A[g][2t+8..2t+9],
// a[3] = A[g+8][2t+8..2t+9]. B: b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]. Each register holds its
// two elements low half first. ldmatrix_x4 of A (lane l addressing row l%16, column 8*(l/16)) and
// ldmatrix_x2_trans of a K x N row-major B (lane l addressing row l%16) produce exactly these.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// The same with bf16 inputs (identical fragment layout).
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// m16n8k8 with tf32 inputs (one element per register, from to_tf32). A: a[0] = A[g][t], a[1] = A[g+8][t],
// a[2] = A[g][t+4], a[3] = A[g+8][t+4]. B: b[0] = B[t][g], b[1] = B[t+4][g]. (ldmatrix_x4 of a 16x8 f32
// row-major A, treating each f32 as two b16, yields this A fragment.)
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- cp.async ---------------------------------------------------------------------------------------
// cp.async copies global -> shared without passing through registers. With src-size 0 the destination is
// zero-filled and the source is not read, which is how out-of-bounds elements of a tile become zeros;
// callers still pass a valid address (e.g. the tensor base) when in_bounds is false. Addresses must be
// aligned to the copy size. The global operand is converted with cvta.to.global as PTX requires.

// 16 bytes, cached in L2 only (.cg: tiles are streamed once through shared memory).
__device__ __forceinline__ void cp_async_16(u32 smem_addr, const void* gmem, bool in_bounds) {
  asm volatile("{\n\t.reg .u64 g;\n\tcvta.to.global.u64 g, %1;\n\t"
               "cp.async.cg.shared.global [%0], [g], 16, %2;\n\t}"
               :
               : "r"(smem_addr), "l"(gmem), "r"(in_bounds ? 16u : 0u)
               : "memory");
}
// 8 and 4 bytes (.ca: .cg only exists for 16).
__device__ __forceinline__ void cp_async_8(u32 smem_addr, const void* gmem, bool in_bounds) {
  asm volatile("{\n\t.reg .u64 g;\n\tcvta.to.global.u64 g, %1;\n\t"
               "cp.async.ca.shared.global [%0], [g], 8, %2;\n\t}"
               :
               : "r"(smem_addr), "l"(gmem), "r"(in_bounds ? 8u : 0u)
               : "memory");
}
__device__ __forceinline__ void cp_async_4(u32 smem_addr, const void* gmem, bool in_bounds) {
  asm volatile("{\n\t.reg .u64 g;\n\tcvta.to.global.u64 g, %1;\n\t"
               "cp.async.ca.shared.global [%0], [g], 4, %2;\n\t}"
               :
               : "r"(smem_addr), "l"(gmem), "r"(in_bounds ? 4u : 0u)
               : "memory");
}
// Closes the group of cp.async issued by this thread since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight (N = stages - 1 in a
// pipeline). Other threads' copies become visible only after a following __syncthreads().
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// ---- vector global memory ---------------------------------------------------------------------------

// BYTES (2, 4, 8 or 16) bytes from global p to dst (registers or local), in one ld.global of
// .b16/.b32/.v2.b32/.v4.b32. p must be aligned to BYTES; dst to min(BYTES, 4).
template <int BYTES> __device__ __forceinline__ void ld_global(const void* p, void* dst) {
  static_assert(BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16, "ld_global moves 2, 4, 8 or 16 bytes");
  if constexpr (BYTES == 2) {
    unsigned short v;
    asm volatile("ld.global.b16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
    *static_cast<unsigned short*>(dst) = v;
  } else if constexpr (BYTES == 4) {
    u32 v;
    asm volatile("ld.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    *static_cast<u32*>(dst) = v;
  } else if constexpr (BYTES == 8) {
    u32* w = static_cast<u32*>(dst);
    asm volatile("ld.global.v2.b32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p) : "memory");
  } else {
    u32* w = static_cast<u32*>(dst);
    asm volatile("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(p)
                 : "memory");
  }
}
// BYTES bytes from src to global p in one st.global; same alignment rules as ld_global.
template <int BYTES> __device__ __forceinline__ void st_global(void* p, const void* src) {
  static_assert(BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16, "st_global moves 2, 4, 8 or 16 bytes");
  if constexpr (BYTES == 2) {
    asm volatile("st.global.b16 [%0], %1;" ::"l"(p), "h"(*static_cast<const unsigned short*>(src)) : "memory");
  } else if constexpr (BYTES == 4) {
    asm volatile("st.global.b32 [%0], %1;" ::"l"(p), "r"(*static_cast<const u32*>(src)) : "memory");
  } else if constexpr (BYTES == 8) {
    const u32* w = static_cast<const u32*>(src);
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
  } else {
    const u32* w = static_cast<const u32*>(src);
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  }
}

// ---- atomics ----------------------------------------------------------------------------------------
// *p += v atomically (relaxed, gpu scope, generic address: global or shared); returns the old value.

__device__ __forceinline__ float atomic_add(float* p, float v) {
  float old;
  asm volatile("atom.add.f32 %0, [%1], %2;" : "=f"(old) : "l"(p), "f"(v) : "memory");
  return old;
}
__device__ __forceinline__ double atomic_add(double* p, double v) {
  double old;
  asm volatile("atom.add.f64 %0, [%1], %2;" : "=d"(old) : "l"(p), "d"(v) : "memory");
  return old;
}
__device__ __forceinline__ int atomic_add(int* p, int v) {
  int old;
  asm volatile("atom.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ long long atomic_add(long long* p, long long v) {
  long long old;
  asm volatile("atom.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
// f16: atom.add.noftz.f16 (sm_70+; the sum is rounded to f16, subnormals kept).
__device__ __forceinline__ f16 atomic_add(f16* p, f16 v) {
  f16 old;
  asm volatile("atom.add.noftz.f16 %0, [%1], %2;" : "=h"(old.bits) : "l"(p), "h"(v.bits) : "memory");
  return old;
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// bf16: atom.add.noftz.bf16 exists from sm_90 only.
__device__ __forceinline__ bf16 atomic_add(bf16* p, bf16 v) {
  bf16 old;
  asm volatile("atom.add.noftz.bf16 %0, [%1], %2;" : "=h"(old.bits) : "l"(p), "h"(v.bits) : "memory");
  return old;
}
#endif

// *p += v with no value returned (red): nothing waits for the old value, so updates pipeline.
__device__ __forceinline__ void red_add(float* p, float v) {
  asm volatile("red.add.f32 [%0], %1;" : : "l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ void red_add(double* p, double v) {
  asm volatile("red.add.f64 [%0], %1;" : : "l"(p), "d"(v) : "memory");
}
__device__ __forceinline__ void red_add(int* p, int v) {
  asm volatile("red.add.s32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void red_add(long long* p, long long v) {
  asm volatile("red.add.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void red_add(f16* p, f16 v) {
  asm volatile("red.add.noftz.f16 [%0], %1;" : : "l"(p), "h"(v.bits) : "memory");
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void red_add(bf16* p, bf16 v) {
  asm volatile("red.add.noftz.bf16 [%0], %1;" : : "l"(p), "h"(v.bits) : "memory");
}
// Two or four consecutive f32 in global memory, 8- or 16-byte aligned, in one reduction (sm_90).
__device__ __forceinline__ void red_add_v2(float* p, float a, float b) {
  asm volatile("red.add.v2.f32 [%0], {%1, %2};" : : "l"(p), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ void red_add_v4(float* p, float a, float b, float c, float d) {
  asm volatile("red.add.v4.f32 [%0], {%1, %2, %3, %4};" : : "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

// ---- the async proxy and bulk groups (sm_90) ----
// Makes this thread's generic-proxy shared-memory writes (st.shared, cp.async) visible to the async proxy, through
// which warpgroup products, TMA stores and bulk reductions read; issued before the barrier that publishes the data.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Adds `bytes` (a multiple of 16) of f32 at shared address `src` to global memory at `dst`, both 16-byte
// aligned, element by element and atomically, by the TMA unit: the issuing thread goes on at once. Tracked by
// this thread's bulk groups: commit them, and wait for their reads before `src` is written again.
__device__ __forceinline__ void bulk_reduce_add(float* dst, u32 src, u32 bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed bulk groups still read their shared-memory source.
template <int N> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Waits until at most N of this thread's committed bulk groups are incomplete (their global writes done).
template <int N> __device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
#endif

// ---- block pointer ----------------------------------------------------------------------------------

// The device side of a DSL block pointer: an R-dimensional view of `base` (shape and strides in
// elements) and the offset of the current block. The block shape, order and boundary checks are static
// and live in the generated code; only what can change at run time is here.
template <class T, int R> struct BlockPtr {
  T* base;
  i64 shape[R];
  i64 stride[R];
  i64 off[R];

  // A copy moved by delta along every dimension (the DSL's advance).
  __device__ __forceinline__ BlockPtr advanced(const i64 (&delta)[R]) const {
    BlockPtr moved = *this;
    for (int i = 0; i < R; ++i)
      moved.off[i] += delta[i];
    return moved;
  }
};

} // namespace kiln
