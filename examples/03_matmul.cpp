// Tutorial 03: matrix multiply with block pointers, tensor cores and autotuning. C = A @ B, A (M, K) and
// B (K, N) f16 row-major, accumulated in f32. The kernel is declared as a KernelDef with its own config space
// and tuning key, so that KernelTuner picks the fastest tile sizes on the GPU and remembers the pick on disk.
// Tuning needs a GPU: in the interpreter this program prints the config space and checks the default config.
// docs/tutorials/03_matmul.md.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <random>

using namespace kiln;

// One program computes one (BLOCK_M, BLOCK_N) tile of C, walking K in BLOCK_K steps. Block pointers carry
// the tensor's shape and strides, so loads past M, N or K read zeros (boundary_check) without index math,
// and the code generator stages them through shared memory with cp.async, num_stages deep.
Kernel build_matmul(const Config& config) {
  const int64_t BM = config.get("BLOCK_M"), BN = config.get("BLOCK_N"), BK = config.get("BLOCK_K");
  KernelBuilder kb("tutorial_matmul", config);
  Value a_base = kb.arg_ptr("A", f16), b_base = kb.arg_ptr("B", f16), c_base = kb.arg_ptr("C", f16);
  Value M = kb.arg("M", i32), N = kb.arg("N", i32), K = kb.arg("K", i32);

  Value pid_m = program_id(0), pid_n = program_id(1);
  // Row-major: order (1, 0) says dim 1 is contiguous; strides are in elements.
  Value a_ptr = make_block_ptr(a_base, {M, K}, {K, 1}, {pid_m * BM, 0}, {BM, BK}, {1, 0});
  Value b_ptr = make_block_ptr(b_base, {K, N}, {N, 1}, {0, pid_n * BN}, {BK, BN}, {1, 0});
  Value acc = zeros({BM, BN}, f32); // (BM, BN) f32, carried through the loop
  for_range(0, K, BK, [&](Value) {
    Value a = load(a_ptr, BoundaryCheck{0, 1}); // (BM, BK) f16
    Value b = load(b_ptr, BoundaryCheck{0, 1}); // (BK, BN) f16
    acc = dot(a, b, acc);                       // tensor cores on f16, f32 accumulate
    a_ptr = advance(a_ptr, {0, BK});
    b_ptr = advance(b_ptr, {BK, 0});
  });
  Value c_ptr = make_block_ptr(c_base, {M, N}, {N, 1}, {pid_m * BM, pid_n * BN}, {BM, BN}, {1, 0});
  store(c_ptr, acc.to(f16), BoundaryCheck{0, 1});
  return kb.finish();
}

// The kernel as the autotuner sees it: parameters with defaults, the candidates, the grid rule, and the key
// (sizes that change the best choice). Sizes are bucketed to powers of two, so 4000 and 4096 share a pick.
KernelDef matmul_def() {
  KernelDef d;
  d.name = "tutorial_matmul";
  // Each parameter says what it takes, so that a bad value is refused (naming it) before any work.
  d.params = {ParamDef::power_of_two("BLOCK_M", 64, "rows of C per program", 16, 256),
              ParamDef::power_of_two("BLOCK_N", 64, "columns of C per program", 16, 256),
              ParamDef::power_of_two("BLOCK_K", 32, "depth of each A/B tile", 16, 256)};
  d.default_num_warps = 4;
  d.default_num_stages = 3;
  d.build = build_matmul;
  d.config_space = [] {
    std::vector<Config> space;
    for (auto [bm, bn, bk, warps, stages] :
         {std::tuple{128, 128, 32, 4, 4}, std::tuple{128, 64, 32, 4, 4}, std::tuple{64, 128, 32, 4, 4},
          std::tuple{128, 256, 64, 8, 3}, std::tuple{64, 64, 32, 4, 3}}) {
      Config c;
      c.set("BLOCK_M", bm).set("BLOCK_N", bn).set("BLOCK_K", bk);
      c.num_warps = warps;
      c.num_stages = stages;
      space.push_back(c);
    }
    return space;
  };
  d.size_args = {"M", "N", "K"};
  d.tuning_key = {"M", "N", "K"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.grid = [](const Config& c, const SizeArgs& s) {
    return Grid{(s.at("M") + c.get("BLOCK_M") - 1) / c.get("BLOCK_M"),
                (s.at("N") + c.get("BLOCK_N") - 1) / c.get("BLOCK_N"), 1};
  };
  return d;
}

// max |C - A@B| / (|A|·|B| row-column norm bound) over the whole C, in double.
double check(const HostBuffer& a, const HostBuffer& b, const HostBuffer& c, int64_t M, int64_t N, int64_t K) {
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        ref += a.get(i * K + k) * b.get(k * N + j);
        mag += std::abs(a.get(i * K + k) * b.get(k * N + j));
      }
      // f16 output: half an ulp of the result, plus f32 accumulation error over K terms.
      const double err = std::abs(c.get(i * N + j) - ref) / (std::abs(ref) * 4.9e-4 + mag * 1e-6 * K + 1e-6);
      worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    }
  return worst; // <= 1: within tolerance
}

int main() {
  const KernelDef def = matmul_def();
  std::printf("config space of %s (%zu candidates):\n", def.name.c_str(), def.config_space().size());
  for (const Config& c : def.config_space())
    std::printf("  %s\n", c.str().c_str());

  std::string why;
  const bool gpu = gpu_available(&why);
  // On the GPU a size worth tuning; in the interpreter a small one with partial tiles in every dim.
  const int64_t M = gpu ? 4096 : 100, N = gpu ? 4096 : 72, K = gpu ? 4096 : 80;
  HostBuffer a(f16, M * K, "A"), b(f16, K * N, "B"), c(f16, M * N, "C");
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t i = 0; i < a.numel(); ++i)
    a.set(i, dist(rng));
  for (int64_t i = 0; i < b.numel(); ++i)
    b.set(i, dist(rng));
  for (int64_t i = 0; i < c.numel(); ++i)
    c.set(i, std::nan(""));
  const SizeArgs sizes{{"M", M}, {"N", N}, {"K", K}};

  if (gpu) {
    std::printf("\ntuning on %s at M=N=K=%lld (KILN_AUTOTUNE=%s)\n", current_device().name.c_str(),
                static_cast<long long>(M), autotune_mode_name(autotune_mode_from_env()));
    DeviceBuffer da = DeviceBuffer::from_host(a.bytes), db = DeviceBuffer::from_host(b.bytes);
    DeviceBuffer dc = DeviceBuffer::from_host(c.bytes);
    const std::vector<LaunchArg> args{LaunchArg::pointer(da.ptr()), LaunchArg::pointer(db.ptr()),
                                      LaunchArg::pointer(dc.ptr()), LaunchArg::of_int(M),
                                      LaunchArg::of_int(N),         LaunchArg::of_int(K)};
    TuneOptions options;
    options.flops = 2.0 * M * N * K; // for TFLOP/s in the table
    KernelTuner tuner;
    // C (argument 2) is the output: tuning runs write a scratch copy, never the caller's buffer.
    TunedLaunch tuned = tuner.launch(def, def.default_config(), sizes, args, {{2, dc.bytes()}}, options);
    std::printf("picked %s (%s)\n%s\n", tuned.config.str().c_str(), tune_source_name(tuned.result->source),
                format_tune_table(tuned.result->table).c_str());
    Stream().synchronize();
    dc.copy_to_host(c.bytes.data(), c.bytes.size());
    // Checking all of C in double takes M·N·K work: check a 16-row band instead.
    const int64_t rows = 16;
    HostBuffer band(f16, rows * N, "C rows");
    std::copy(c.bytes.begin(), c.bytes.begin() + band.bytes.size(), band.bytes.begin());
    const double err = check(a, b, band, rows, N, K);
    std::printf("first %lld rows of C: worst error %.3f of tolerance: %s\n", static_cast<long long>(rows),
                err, err <= 1 ? "ok" : "FAILED");
    return err <= 1 ? 0 : 1;
  }

  std::printf("\nno GPU (%s): tuning needs one, so the default config runs in the interpreter\n",
              why.substr(0, why.find(';')).c_str());
  const Config config = def.default_config();
  const Grid grid = def.grid(config, sizes);
  interpret(build_matmul(config), grid,
            {InterpArg::ptr(a), InterpArg::ptr(b), InterpArg::ptr(c), InterpArg::of_int(M),
             InterpArg::of_int(N), InterpArg::of_int(K)});
  const double err = check(a, b, c, M, N, K);
  std::printf("%s, grid %lldx%lld, M=%lld N=%lld K=%lld: worst error %.3f of tolerance: %s\n",
              config.str().c_str(), static_cast<long long>(grid[0]), static_cast<long long>(grid[1]),
              static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K), err,
              err <= 1 ? "ok" : "FAILED");
  return err <= 1 ? 0 : 1;
}
