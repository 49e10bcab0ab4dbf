// Tutorial 04: flash attention forward. O = softmax(Q Kᵀ · sm_scale) V without ever storing the (N, N) score
// matrix: each program owns BLOCK_M query rows, streams K and V in BLOCK_N tiles through block pointers, and
// keeps a running max and sum per row (the online softmax) so that earlier partial results can be rescaled.
// Causal masking skips the tiles above the diagonal entirely and masks only the diagonal tile.
// Checked against a double-precision reference, causal and not. docs/tutorials/04_flash_attention.md.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

using namespace kiln;

// Q, K, V, O: [B·H, N, HEAD_DIM] f16, contiguous. Grid: (cdiv(N, BLOCK_M), B·H, 1).
Kernel build_attention(const Config& config) {
  const int64_t BM = config.get("BLOCK_M"), BN = config.get("BLOCK_N"), D = config.get("HEAD_DIM");
  const bool causal = config.get("CAUSAL") != 0; // a C++ bool: two different kernels, no run-time branch
  const double inf = std::numeric_limits<double>::infinity(), log2e = 1.4426950408889634;
  KernelBuilder kb("tutorial_attention", config);
  Value q_base = kb.arg_ptr("Q", f16), k_base = kb.arg_ptr("K", f16), v_base = kb.arg_ptr("V", f16);
  Value o_base = kb.arg_ptr("O", f16);
  Value sm_scale = kb.arg("sm_scale", f32), N = kb.arg("N", i32);

  Value start_m = program_id(0) * BM;
  Value head = program_id(1).to(i64) * N * D; // this (batch, head)'s [N, D] slice, in elements
  // Block pointers know the tensor's shape: rows past N read as zero (BoundaryCheck) and are not stored.
  Value q_ptr = make_block_ptr(q_base + head, {N, D}, {D, 1}, {start_m, 0}, {BM, D}, {1, 0});
  // Kᵀ viewed in place: shape (D, N), strides (1, D); order (0, 1) says dim 0 is the contiguous one.
  Value kt_ptr = make_block_ptr(k_base + head, {D, N}, {1, D}, {0, 0}, {D, BN}, {0, 1});
  Value v_ptr = make_block_ptr(v_base + head, {N, D}, {D, 1}, {0, 0}, {BN, D}, {1, 0});
  Value o_ptr = make_block_ptr(o_base + head, {N, D}, {D, 1}, {start_m, 0}, {BM, D}, {1, 0});

  Value q = load(q_ptr, BoundaryCheck{0}); // (BM, D) f16, loaded once
  Value offs_m = start_m + arange(0, BM);  // (BM,) i32
  Value qk_scale = sm_scale * log2e;       // scores in the log2 domain: exp2 is one instruction
  Value m_i = full({BM}, -inf, f32);       // (BM,) running row max
  Value l_i = zeros({BM}, f32);            // (BM,) running row sum of exp2(s - m_i)
  Value acc = zeros({BM, D}, f32);         // (BM, D) running P·V
  // Causal (top-left: query i sees key j iff j <= i): keys at or past start_m + BM are invisible to every
  // row of this program, so the loop stops there instead of masking whole tiles.
  Value hi = causal ? minimum(start_m + BM, N) : N;
  for_range(0, hi, BN, [&](Value start_n) {
    Value kt = load(kt_ptr, BoundaryCheck{1});  // (D, BN) f16
    Value v = load(v_ptr, BoundaryCheck{0});    // (BN, D) f16
    Value offs_n = start_n + arange(0, BN);     // (BN,) i32
    Value visible = expand_dims(offs_n, 0) < N; // (1, BN): keys past N padded the tile
    if (causal)
      visible = visible && (expand_dims(offs_m, 1) >= expand_dims(offs_n, 0)); // (BM, BN)
    Value s = where(visible, dot(q, kt) * qk_scale, -inf);                     // (BM, BN) f32
    Value m_new = maximum(m_i, max(s, 1));                                     // (BM,)
    Value p = exp2(s - expand_dims(m_new, 1));                                 // (BM, BN) f32
    Value alpha = exp2(m_i - m_new); // (BM,) rescales what came before
    l_i = l_i * alpha + sum(p, 1);
    acc = dot(p.to(f16), v, acc * expand_dims(alpha, 1)); // (BM, D) f32
    m_i = m_new;
    kt_ptr = advance(kt_ptr, {0, BN});
    v_ptr = advance(v_ptr, {BN, 0});
  });
  store(o_ptr, (acc / expand_dims(l_i, 1)).to(f16), BoundaryCheck{0});
  return kb.finish();
}

// Max |O - reference| over every element, the reference in double from the f16 inputs.
double max_error(const HostBuffer& q, const HostBuffer& k, const HostBuffer& v, const HostBuffer& o,
                 int64_t BH, int64_t N, int64_t D, double sm_scale, bool causal) {
  double worst = 0;
  std::vector<double> s(N);
  for (int64_t h = 0; h < BH; ++h)
    for (int64_t i = 0; i < N; ++i) {
      const int64_t last = causal ? i : N - 1;
      double mx = -INFINITY, total = 0;
      for (int64_t j = 0; j <= last; ++j) {
        double dotp = 0;
        for (int64_t d = 0; d < D; ++d)
          dotp += q.get((h * N + i) * D + d) * k.get((h * N + j) * D + d);
        s[j] = dotp * sm_scale;
        mx = std::max(mx, s[j]);
      }
      for (int64_t j = 0; j <= last; ++j)
        total += (s[j] = std::exp(s[j] - mx));
      for (int64_t d = 0; d < D; ++d) {
        double ref = 0;
        for (int64_t j = 0; j <= last; ++j)
          ref += s[j] / total * v.get((h * N + j) * D + d);
        const double err = std::abs(o.get((h * N + i) * D + d) - ref);
        worst = std::isnan(err) ? INFINITY : std::max(worst, err);
      }
    }
  return worst;
}

int main() {
  const int64_t B = 1, H = 2, N = 200, D = 64, BM = 64, BN = 64; // N not a multiple of the tiles
  const double sm_scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::string why;
  const bool gpu = gpu_available(&why);
  std::printf("B=%lld H=%lld N=%lld D=%lld, BLOCK_M=%lld BLOCK_N=%lld, on %s\n", static_cast<long long>(B),
              static_cast<long long>(H), static_cast<long long>(N), static_cast<long long>(D),
              static_cast<long long>(BM), static_cast<long long>(BN),
              gpu ? current_device().name.c_str()
                  : ("the interpreter (no GPU: " + why.substr(0, why.find(';')) + ")").c_str());

  HostBuffer q(f16, B * H * N * D, "Q"), k(f16, B * H * N * D, "K"), v(f16, B * H * N * D, "V");
  std::mt19937 rng(4);
  std::normal_distribution<double> dist(0.0, 1.0);
  for (HostBuffer* t : {&q, &k, &v})
    for (int64_t i = 0; i < t->numel(); ++i)
      t->set(i, dist(rng));

  bool ok = true;
  for (int causal : {0, 1}) {
    Config config;
    config.set("BLOCK_M", BM).set("BLOCK_N", BN).set("HEAD_DIM", D).set("CAUSAL", causal);
    config.num_warps = 4;
    config.num_stages = 2;
    Kernel kernel = build_attention(config);
    HostBuffer o(f16, q.numel(), "O");
    for (int64_t i = 0; i < o.numel(); ++i)
      o.set(i, std::nan(""));
    const Grid grid{(N + BM - 1) / BM, B * H, 1};
    const std::vector<InterpArg> args{InterpArg::ptr(q),
                                      InterpArg::ptr(k),
                                      InterpArg::ptr(v),
                                      InterpArg::ptr(o),
                                      InterpArg::of_float(sm_scale),
                                      InterpArg::of_int(N)};
    if (gpu)
      run_on_gpu(*JitKernel::compile(kernel), grid, args);
    else
      interpret(kernel, grid, args);
    const double err = max_error(q, k, v, o, B * H, N, D, sm_scale, causal != 0);
    // P is rounded to f16 before P·V and O is f16: errors of a few 1e-3 are rounding.
    const bool good = err < 1e-2;
    ok = ok && good;
    std::printf("causal=%d: max |O - reference| = %.2e: %s\n", causal, err, good ? "ok" : "FAILED");
  }
  return ok ? 0 : 1;
}
