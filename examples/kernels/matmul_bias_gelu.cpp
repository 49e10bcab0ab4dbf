#include "examples/kernels/matmul_bias_gelu.h"

#include <cmath>

using namespace kiln;

namespace tutorial {

// One (BLOCK_M, BLOCK_N) tile of C a program, tiles visited in groups of GROUP_M rows (L2 reuse of B).
Kernel build_matmul_bias_gelu(const Config& c) {
  const int64_t BM = c.get("BLOCK_M"), BN = c.get("BLOCK_N"), BK = c.get("BLOCK_K"),
                GROUP_M = c.get("GROUP_M");
  KernelBuilder kb("matmul_bias_gelu", c);
  Value A = kb.arg_ptr("A", f16), B = kb.arg_ptr("B", f16), bias = kb.arg_ptr("bias", f16);
  Value C = kb.arg_ptr("C", f16);
  Value M = kb.arg("M", i32), N = kb.arg("N", i32), K = kb.arg("K", i32);
  Value stride_am = kb.arg("stride_am", i64), stride_ak = kb.arg("stride_ak", i64);
  Value stride_bk = kb.arg("stride_bk", i64), stride_bn = kb.arg("stride_bn", i64);
  Value stride_cm = kb.arg("stride_cm", i64), stride_cn = kb.arg("stride_cn", i64);

  // Grouped ordering: GROUP_M rows of tiles share the columns of B they read.
  Value pid = program_id(0);
  Value num_pid_m = cdiv(M, BM), num_pid_n = cdiv(N, BN);
  Value in_group = GROUP_M * num_pid_n;
  Value first_m = pid / in_group * GROUP_M;
  Value group_size = minimum(num_pid_m - first_m, GROUP_M);
  Value pid_m = first_m + (pid % in_group) % group_size;
  Value pid_n = (pid % in_group) / group_size;

  Value a_ptr = make_block_ptr(A, {M, K}, {stride_am, stride_ak}, {pid_m * BM, 0}, {BM, BK}, {1, 0});
  Value b_ptr = make_block_ptr(B, {K, N}, {stride_bk, stride_bn}, {0, pid_n * BN}, {BK, BN}, {1, 0});
  Value acc = zeros({BM, BN}, f32); // (BM, BN) f32
  for_range(0, K, BK, [&](Value) {
    acc = dot(load(a_ptr, BoundaryCheck{0, 1}), load(b_ptr, BoundaryCheck{0, 1}), acc);
    a_ptr = advance(a_ptr, {0, BK});
    b_ptr = advance(b_ptr, {BK, 0});
  });

  // The epilogue, on the accumulator in registers: + bias, then GELU, then one rounding to f16.
  // bias through a 1-D block pointer: the code generator loads it straight into the accumulator's column
  // layout (no conversion through shared memory), its pieces checked against N.
  Value bias_ptr = make_block_ptr(bias, {N}, {1}, {pid_n * BN}, {BN}, {0});
  Value bias_row = load(bias_ptr, BoundaryCheck{0}).to(f32);     // (BN,) f32, 0 past N
  Value z = acc + expand_dims(bias_row, 0);                      // (BM, BN) f32
  Value gelu = 0.5f * z * (1.0f + erf(z * 0.7071067811865476f)); // (BM, BN) f32
  Value c_ptr = make_block_ptr(C, {M, N}, {stride_cm, stride_cn}, {pid_m * BM, pid_n * BN}, {BM, BN}, {1, 0});
  store(c_ptr, gelu.to(f16), BoundaryCheck{0, 1});
  return kb.finish();
}

ReferenceOutputs matmul_bias_gelu_reference(const ReferenceInputs& in) {
  const int64_t M = in.size("M"), N = in.size("N"), K = in.size("K");
  const std::vector<double>& a = in.tensor("A");
  const std::vector<double>& b = in.tensor("B");
  const std::vector<double>& bias = in.tensor("bias");
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m) {
    double* row = c.data() + m * N;
    for (int64_t k = 0; k < K; ++k) {
      const double av = a[static_cast<size_t>(m * K + k)];
      const double* brow = b.data() + k * N;
      for (int64_t n = 0; n < N; ++n)
        row[n] += av * brow[n];
    }
    for (int64_t n = 0; n < N; ++n) {
      const double z = row[n] + bias[static_cast<size_t>(n)];
      row[n] = 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
    }
  }
  return {{"C", c}};
}

KernelDef matmul_bias_gelu_def() {
  KernelDef d;
  d.name = "matmul_bias_gelu";
  d.summary = "C = GELU(A @ B + bias), f16 in and out, f32 accumulation, the epilogue fused";
  d.params = {ParamDef::power_of_two("BLOCK_M", 128, "rows of C per program", 16, 256),
              ParamDef::power_of_two("BLOCK_N", 128, "columns of C per program", 16, 256),
              ParamDef::power_of_two("BLOCK_K", 32, "depth of each A/B tile", 16, 128),
              ParamDef::count("GROUP_M", 8, "rows of tiles per program group (L2 reuse)", 1, 64),
              // kiln's code generator reads these three from any kernel's config (codegen/codegen.h): declaring
              // them lets the autotuner try Hopper's schedules on this kernel as on kiln's own matmul.
              ParamDef::count("MIN_BLOCKS_PER_SM", 1, "CTAs that must fit on one SM (caps registers)", 1, 4),
              ParamDef::flag("WARP_SPECIALIZE", 0, "1: a producer warpgroup issues the loop's TMA copies (sm_90a)"),
              ParamDef::flag("PERSISTENT", 0, "1: one wave of CTAs walks every program id")};
  d.default_num_warps = 8;
  d.default_num_stages = 3;
  d.build = build_matmul_bias_gelu;
  d.size_args = {"M", "N", "K"};
  d.tuning_key = {"M", "N", "K"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.grid = [](const Config& c, const SizeArgs& s) {
    const int64_t bm = c.get("BLOCK_M"), bn = c.get("BLOCK_N");
    return Grid{((s.at("M") + bm - 1) / bm) * ((s.at("N") + bn - 1) / bn), 1, 1};
  };
  d.config_space = [] {
    struct Tile {
      int64_t m, n, k;
      int warps, stages;
      bool ws = false;         // a producer warpgroup beside the warps (sm_90a; the tuner prunes it elsewhere)
      bool persistent = false; // one wave of CTAs walks the tiles, the next tile's loads under this epilogue
    };
    // Triton tutorial 03's candidates, the deeper rings kiln's own matmul tunes on sm_90a, and its
    // warp-specialised and persistent schedules.
    const Tile tiles[] = {{128, 256, 64, 8, 3},        {64, 256, 32, 4, 4},         {128, 128, 32, 4, 4},
                          {128, 64, 32, 4, 4},         {64, 128, 32, 4, 4},         {128, 128, 64, 8, 3},
                          {256, 128, 64, 8, 3},        {128, 256, 64, 8, 4},        {128, 128, 64, 8, 4},
                          {128, 128, 64, 4, 4},        {128, 128, 64, 8, 4, true},  {128, 256, 64, 8, 4, true},
                          {256, 128, 64, 8, 4, true},  {128, 128, 64, 8, 4, true, true},
                          {128, 256, 64, 8, 4, true, true}, {256, 128, 64, 8, 4, true, true}};
    std::vector<Config> space;
    for (const Tile& t : tiles) {
      Config c = matmul_bias_gelu_def().default_config();
      c.set("BLOCK_M", t.m).set("BLOCK_N", t.n).set("BLOCK_K", t.k);
      c.set("WARP_SPECIALIZE", t.ws ? 1 : 0).set("PERSISTENT", t.persistent ? 1 : 0);
      // Two resident CTAs hide each k step's barrier where the registers allow it (as kiln's matmul does).
      c.set("MIN_BLOCKS_PER_SM", t.ws || (t.k == 64 && (t.warps == 8 || t.stages == 4)) ? 1 : 2);
      c.num_warps = t.warps;
      c.num_stages = t.stages;
      space.push_back(c);
    }
    return space;
  };
  d.tensor_dims = {{"A", {"M", "K"}}, {"B", {"K", "N"}}, {"bias", {"N"}}, {"C", {"M", "N"}}};
  d.reference = matmul_bias_gelu_reference;
  return d;
}

} // namespace tutorial
