#include "kernels/matmul/matmul.h"

#include "dsl/dsl.h"
#include "kernels/codegen_params.h"
#include "kernels/dtype_param.h"
#include "kernels/matmul/matmul_program.h"

#include <cmath>
#include <random>

namespace kiln {

Kernel build_matmul(const Config& config) {
  const MatmulTileParams tp = matmul_tile_params(config, "matmul");
  KernelBuilder kb("matmul", config);
  MatmulOperands ops;
  ops.a = kb.arg_ptr("A", tp.dtype), ops.b = kb.arg_ptr("B", tp.dtype);
  Value c_base = kb.arg_ptr("C", tp.dtype);
  ops.M = kb.arg("M", i32), ops.N = kb.arg("N", i32), ops.K = kb.arg("K", i32);
  ops.stride_am = kb.arg("stride_am", i64), ops.stride_ak = kb.arg("stride_ak", i64);
  ops.stride_bk = kb.arg("stride_bk", i64), ops.stride_bn = kb.arg("stride_bn", i64);
  Value stride_cm = kb.arg("stride_cm", i64), stride_cn = kb.arg("stride_cn", i64);

  const OutputTile tile = grouped_output_tile(program_id(0), ops.M, ops.N, tp);
  Value acc = matmul_tile_product(ops, tile, 0, ops.K, tp);
  Value c_ptr = make_block_ptr(c_base, {ops.M, ops.N}, {stride_cm, stride_cn},
                               {tile.pid_m * tp.block_m, tile.pid_n * tp.block_n}, {tp.block_m, tp.block_n}, {1, 0});
  store(c_ptr, acc.to(tp.dtype), BoundaryCheck{0, 1});
  return kb.finish();
}

KernelDef matmul_def() {
  KernelDef d;
  d.name = "matmul";
  d.summary = "C = A @ B with block pointers, f32 accumulation and grouped program ordering";
  // Tiles from 16 (an mma tile) to 256 (what a program's registers and shared memory can hold).
  d.params = {ParamDef::power_of_two("BLOCK_M", 128, "rows of C per program", 16, 256),
              ParamDef::power_of_two("BLOCK_N", 128, "columns of C per program", 16, 256),
              ParamDef::power_of_two("BLOCK_K", 32, "depth of each A/B tile", 16, 256),
              ParamDef::count("GROUP_M", 8, "rows of tiles per program group (L2 reuse)", 1, 1024),
              ParamDef::choice("DTYPE", 0, "element type of A, B and C: 0 f16, 1 bf16, 2 f32", 0, 2),
              ParamDef::flag("TF32", 0, "f32 only: 1 multiplies on tensor cores in tf32"),
              ParamDef::flag("A_COL_MAJOR", 0, "1 when A's M dim is the contiguous one"),
              ParamDef::flag("B_COL_MAJOR", 0, "1 when B's K dim is the contiguous one"),
              min_blocks_per_sm_param(2), warp_specialize_param(0), persistent_param(0)};
  d.default_num_warps = 8;
  d.default_num_stages = 3;
  d.build = build_matmul;
  d.config_space = [] {
    struct Tile {
      int64_t m, n, k;
      int warps, stages;
      bool ws = false;         // a producer warpgroup beside the warps (sm_90a; pruned elsewhere)
      bool persistent = false; // one wave of CTAs walks the tiles
    };
    // Triton tutorial 03's candidates for sm_80+, then deeper rings of the large tiles for sm_90a, where
    // wgmma keeps one product in flight and loads run num_stages - 2 tiles ahead (worklog §8).
    const Tile tiles[] = {{128, 256, 64, 8, 3}, {64, 256, 32, 4, 4}, {128, 128, 32, 4, 4}, {128, 64, 32, 4, 4},
                          {64, 128, 32, 4, 4},  {128, 32, 32, 4, 4}, {64, 32, 32, 2, 5},   {128, 128, 64, 8, 3},
                          {256, 128, 64, 8, 3}, {128, 256, 64, 8, 4}, {256, 128, 64, 8, 4}, {128, 128, 64, 8, 4},
                          {128, 128, 64, 4, 4},
                          // Warp-specialised (worklog §20): the producer fills every slot of the ring.
                          {128, 128, 64, 4, 5, true}, {128, 128, 64, 8, 4, true}, {256, 128, 64, 8, 4, true},
                          {128, 256, 64, 8, 3, true}, {128, 256, 64, 8, 4, true},
                          // ... on a persistent grid, the producer filling the next tile's ring under the epilogue
                          {128, 128, 64, 8, 4, true, true}, {256, 128, 64, 8, 4, true, true},
                          {128, 256, 64, 8, 4, true, true}};
    std::vector<Config> cs;
    for (const Tile& t : tiles) {
      Config c = matmul_def().default_config();
      c.set("BLOCK_M", t.m).set("BLOCK_N", t.n).set("BLOCK_K", t.k);
      c.num_warps = t.warps;
      c.num_stages = t.stages;
      // Two resident CTAs hide the barrier of each k step (ncu: one 8-warp CTA per SM issued every
      // 5 cycles); 8 warps with 64-deep tiles need more than the 128 registers that leaves.
      c.set("MIN_BLOCKS_PER_SM", t.ws || (t.k == 64 && (t.warps == 8 || t.stages == 4)) ? 1 : 2);
      c.set("WARP_SPECIALIZE", t.ws ? 1 : 0);
      c.set("PERSISTENT", t.persistent ? 1 : 0);
      cs.push_back(c);
    }
    return cs;
  };
  d.size_args = {"M", "N", "K"};
  d.tuning_key = {"M", "N", "K"};
  // Sizes share a pick with the next power of two at or above them (as Triton users key on rounded sizes):
  // a 4000-row product runs the tiles tuned for 4096.
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.grid = [](const Config& c, const SizeArgs& s) { return Grid{matmul_output_tiles(c, s.at("M"), s.at("N")), 1, 1}; };
  return d;
}

Config default_matmul_config(const MatmulProblem& p) {
  Config c = matmul_def().default_config();
  c.set("DTYPE", dtype_param(p.dtype, "matmul"));
  c.set("TF32", p.tf32 ? 1 : 0);
  c.set("A_COL_MAJOR", p.a_col_major ? 1 : 0);
  c.set("B_COL_MAJOR", p.b_col_major ? 1 : 0);
  if (p.dtype == DType::f32) // f32 tiles take twice the shared memory
    c.set("BLOCK_K", 16);
  return c;
}

MatmulStrides MatmulStrides::packed(const MatmulProblem& p) {
  MatmulStrides s;
  s.am = p.a_col_major ? 1 : p.K, s.ak = p.a_col_major ? p.M : 1;
  s.bk = p.b_col_major ? 1 : p.N, s.bn = p.b_col_major ? p.K : 1;
  s.cm = p.N, s.cn = 1;
  return s;
}

namespace {
// Element (r, c) of a rows x cols matrix stored row- or column-major.
int64_t index_of(int64_t r, int64_t c, int64_t rows, int64_t cols, bool col_major) {
  return col_major ? c * rows + r : r * cols + c;
}
} // namespace

MatmulInputs make_matmul_inputs(const MatmulProblem& p, uint64_t seed, double scale) {
  MatmulInputs in{HostBuffer(p.dtype, p.M * p.K, "A"), HostBuffer(p.dtype, p.K * p.N, "B")};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  for (HostBuffer* b : {&in.a, &in.b})
    for (int64_t i = 0; i < b->numel(); ++i)
      b->set(i, dist(rng));
  return in;
}

std::vector<double> matmul_reference(const MatmulProblem& p, const MatmulInputs& in) {
  std::vector<double> c(static_cast<size_t>(p.M * p.N), 0.0);
  for (int64_t m = 0; m < p.M; ++m)
    for (int64_t k = 0; k < p.K; ++k) {
      double a = in.a.get(index_of(m, k, p.M, p.K, p.a_col_major));
      for (int64_t n = 0; n < p.N; ++n)
        c[static_cast<size_t>(m * p.N + n)] += a * in.b.get(index_of(k, n, p.K, p.N, p.b_col_major));
    }
  return c;
}

std::vector<double> run_matmul_interpreted(const MatmulProblem& p, const Config& config, const MatmulInputs& in,
                                           Executor executor) {
  HostBuffer a = in.a, b = in.b, c(p.dtype, p.M * p.N, "C");
  for (int64_t i = 0; i < c.numel(); ++i)
    c.set(i, std::nan(""));
  const MatmulStrides st = MatmulStrides::packed(p);
  std::vector<InterpArg> args = {InterpArg::ptr(a),       InterpArg::ptr(b),       InterpArg::ptr(c),
                                 InterpArg::of_int(p.M),  InterpArg::of_int(p.N),  InterpArg::of_int(p.K),
                                 InterpArg::of_int(st.am), InterpArg::of_int(st.ak), InterpArg::of_int(st.bk),
                                 InterpArg::of_int(st.bn), InterpArg::of_int(st.cm), InterpArg::of_int(st.cn)};
  execute(executor, build_matmul(config), matmul_def().grid(config, {{"M", p.M}, {"N", p.N}, {"K", p.K}}), args);
  std::vector<double> out(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i)
    out[static_cast<size_t>(i)] = c.get(i);
  return out;
}

} // namespace kiln
