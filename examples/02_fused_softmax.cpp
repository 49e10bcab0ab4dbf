// Tutorial 02: fused softmax. One program per row keeps the whole row in registers: it is read from global
// memory once and written once, where an unfused softmax (max, subtract, exp, sum, divide as separate
// kernels) moves the row five times. f16 in and out, f32 inside. docs/tutorials/02_fused_softmax.md.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

using namespace kiln;

// out[r, :] = softmax(in[r, :]) for one row r = program_id(0). BLOCK is a power of two >= n_cols (a tile's
// shape is static); the lanes past n_cols load -inf, so they add exp(-inf) = 0 to the sum.
Kernel build_softmax(const Config& config) {
  const int64_t BLOCK = config.get("BLOCK");
  const double inf = std::numeric_limits<double>::infinity(), log2e = 1.4426950408889634;
  KernelBuilder kb("row_softmax", config);
  Value out = kb.arg_ptr("out", f16), in = kb.arg_ptr("in", f16);
  Value row_stride = kb.arg("row_stride", i64), n_cols = kb.arg("n_cols", i32);

  Value row = program_id(0).to(i64);
  Value cols = arange(0, BLOCK);                                    // (BLOCK,) i32
  Value mask = cols < n_cols;                                       // (BLOCK,) i1
  Value x = load(in + row * row_stride + cols, mask, -inf).to(f32); // (BLOCK,) f32
  // Subtracting the row max keeps exp from overflowing; exp(z) is computed as exp2(z * log2 e), the
  // hardware's instruction.
  Value num = exp2((x - max(x, 0)) * log2e); // (BLOCK,) f32
  store(out + row * row_stride + cols, (num / sum(num, 0)).to(f16), mask);
  return kb.finish();
}

int main() {
  const int64_t n_rows = 48, n_cols = 781, BLOCK = 1024; // n_cols not a power of two: the tail is masked
  Config config;
  config.set("BLOCK", BLOCK);
  config.num_warps = 4;
  Kernel k = build_softmax(config);
  const Grid grid{n_rows, 1, 1};
  std::printf("%s\n", print_kernel(k).c_str());

  HostBuffer in(f16, n_rows * n_cols, "in"), out(f16, n_rows * n_cols, "out");
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  for (int64_t i = 0; i < in.numel(); ++i) {
    in.set(i, dist(rng)); // rounded to f16
    out.set(i, std::nan(""));
  }

  std::string why;
  if (gpu_available(&why)) {
    std::printf("running on the GPU: %s\n", current_device().name.c_str());
    run_on_gpu(
        *JitKernel::compile(k), grid,
        {InterpArg::ptr(out), InterpArg::ptr(in), InterpArg::of_int(n_cols), InterpArg::of_int(n_cols)});
  } else {
    std::printf("running in the interpreter (no GPU: %s)\n", why.substr(0, why.find(';')).c_str());
    interpret(
        k, grid,
        {InterpArg::ptr(out), InterpArg::ptr(in), InterpArg::of_int(n_cols), InterpArg::of_int(n_cols)});
  }

  // Against a double-precision softmax of the same (f16-rounded) inputs. The output is f16, so an error up
  // to half an f16 ulp of the value (2^-11 relative) is rounding, plus a little for the f32 arithmetic.
  double worst_rel = 0, row_sum_err = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    double mx = -INFINITY, total = 0, got_total = 0;
    for (int64_t c = 0; c < n_cols; ++c)
      mx = std::max(mx, in.get(r * n_cols + c));
    for (int64_t c = 0; c < n_cols; ++c)
      total += std::exp(in.get(r * n_cols + c) - mx);
    for (int64_t c = 0; c < n_cols; ++c) {
      const double ref = std::exp(in.get(r * n_cols + c) - mx) / total, got = out.get(r * n_cols + c);
      const double rel = std::abs(got - ref) / std::max(ref, 6.1e-5); // f16's smallest normal
      worst_rel = std::isnan(rel) ? INFINITY : std::max(worst_rel, rel);
      got_total += got;
    }
    row_sum_err = std::max(row_sum_err, std::abs(got_total - 1));
  }
  const bool ok = worst_rel < 2e-3 && row_sum_err < 1e-2;
  std::printf("%lld rows x %lld columns: max relative error %.2e, max |row sum - 1| %.2e: %s\n",
              static_cast<long long>(n_rows), static_cast<long long>(n_cols), worst_rel, row_sum_err,
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
