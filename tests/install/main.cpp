// A user's own kernel through installed kiln: out[r] = scale * sum_c x[r, c] over an (n_rows, n_cols)
// row-major matrix, BLOCK_R rows per program, columns streamed in BLOCK_C chunks with a loop-carried sum.
// Runs on the GPU where one is usable, in the interpreter otherwise, and checks every output against a
// double-precision sum. Exit status 0 only when every check passes.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

Kernel build_scaled_row_sum(const Config& c) {
  const int64_t BLOCK_R = c.get("BLOCK_R"), BLOCK_C = c.get("BLOCK_C");
  KernelBuilder kb("scaled_row_sum", c);
  Value x = kb.arg_ptr("x", f32), out = kb.arg_ptr("out", f32);
  Value scale = kb.arg("scale", f32);
  Value n_rows = kb.arg("n_rows", i32), n_cols = kb.arg("n_cols", i32);

  Value rows = program_id(0) * BLOCK_R + arange(0, BLOCK_R); // (BLOCK_R,) i32
  Value row_ok = expand_dims(rows, 1) < n_rows;              // (BLOCK_R, 1) i1
  Value acc = zeros({BLOCK_R}, f32);                         // (BLOCK_R,) f32, carried across the loop
  for_range(0, n_cols, BLOCK_C, [&](Value c0) {
    Value cols = c0 + arange(0, BLOCK_C);                              // (BLOCK_C,) i32
    Value offs = expand_dims(rows, 1) * n_cols + expand_dims(cols, 0); // (BLOCK_R, BLOCK_C) i32
    Value tile = load(x + offs, row_ok && (expand_dims(cols, 0) < n_cols), 0.0f);
    acc = acc + sum(tile, 1);
  });
  store(out + rows, acc * scale, rows < n_rows);
  return kb.finish();
}

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  failures += ok ? 0 : 1;
}

} // namespace

int main() {
  std::printf("kiln %s\n", kiln::version());
  const int64_t n_rows = 37, n_cols = 300; // neither a multiple of its block: masks are exercised
  const double scale = 0.5;
  Config config;
  config.set("BLOCK_R", 16).set("BLOCK_C", 64);
  Kernel k = build_scaled_row_sum(config);
  const Grid grid{(n_rows + 15) / 16, 1, 1};

  HostBuffer x(f32, n_rows * n_cols, "x"), out(f32, n_rows, "out");
  std::mt19937 rng(20240611);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.set(i, dist(rng));
  for (int64_t r = 0; r < n_rows; ++r)
    out.set(r, std::nan("")); // poisoned: every row must be written

  std::string why;
  if (gpu_available(&why)) {
    std::printf("running on %s\n", current_device().name.c_str());
    std::shared_ptr<JitKernel> jk = JitKernel::compile(k);
    DeviceBuffer d_x(x.bytes.size()), d_out(out.bytes.size());
    d_x.copy_from_host(x.bytes.data(), x.bytes.size());
    d_out.copy_from_host(out.bytes.data(), out.bytes.size());
    Stream stream = Stream::create();
    jk->launch(grid,
               {LaunchArg::pointer(d_x.ptr()), LaunchArg::pointer(d_out.ptr()), LaunchArg::of_float(scale),
                LaunchArg::of_int(n_rows), LaunchArg::of_int(n_cols)},
               stream);
    stream.synchronize();
    d_out.copy_to_host(out.bytes.data(), out.bytes.size());
  } else {
    std::printf("running in the interpreter (%s)\n", why.c_str());
    interpret(k, grid,
              {InterpArg::ptr(x), InterpArg::ptr(out), InterpArg::of_float(scale), InterpArg::of_int(n_rows),
               InterpArg::of_int(n_cols)});
  }

  double worst = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    double ref = 0;
    for (int64_t c = 0; c < n_cols; ++c)
      ref += x.get(r * n_cols + c);
    ref *= scale;
    const double err = std::abs(out.get(r) - ref);
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  expect(worst < 1e-4,
         "scaled row sums match the double reference (max error " + std::to_string(worst) + ")");

  // Launch arguments are checked against the kernel's signature; a missing one is named.
  try {
    check_launch_args(k, {LaunchArg::pointer(0x1000), LaunchArg::pointer(0x2000), LaunchArg::of_float(scale),
                          LaunchArg::of_int(n_rows)});
    expect(false, "a missing argument is an error");
  } catch (const kiln::Error& e) {
    expect(std::string(e.what()).find("missing 'n_cols'") != std::string::npos,
           std::string("a missing argument is named: ") + e.what());
  }
  return failures == 0 ? 0 : 1;
}
