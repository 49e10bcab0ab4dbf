#include "kernels/matmul/matmul_split_k.h"

#include "dsl/dsl.h"
#include "kernels/codegen_params.h"
#include "kernels/dtype_param.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_program.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln {

namespace {

ParamDef split_k_param(int64_t default_value) {
  return ParamDef::count("SPLIT_K", default_value, "ranges the reduction dim K is cut into (one f32 partial each)",
                         1, 16);
}

} // namespace

int64_t split_k_range(int64_t K, int64_t block_k, int64_t split_k) {
  const int64_t k_tiles = (K + block_k - 1) / block_k;
  return (k_tiles + split_k - 1) / split_k * block_k;
}

Kernel build_matmul_split_k(const Config& config) {
  const MatmulTileParams tp = matmul_tile_params(config, "matmul_split_k");
  const int64_t SPLIT_K = config.get("SPLIT_K");
  KernelBuilder kb("matmul_split_k", config);
  MatmulOperands ops;
  ops.a = kb.arg_ptr("A", tp.dtype), ops.b = kb.arg_ptr("B", tp.dtype);
  Value w = kb.arg_ptr("W", f32);
  ops.M = kb.arg("M", i32), ops.N = kb.arg("N", i32), ops.K = kb.arg("K", i32);
  ops.stride_am = kb.arg("stride_am", i64), ops.stride_ak = kb.arg("stride_ak", i64);
  ops.stride_bk = kb.arg("stride_bk", i64), ops.stride_bn = kb.arg("stride_bn", i64);

  Value tiles = (cdiv(ops.M, tp.block_m) * cdiv(ops.N, tp.block_n)).named("tiles");
  Value pid = program_id(0);
  Value split = (pid / tiles).named("split");
  const OutputTile tile = grouped_output_tile(pid % tiles, ops.M, ops.N, tp);
  // Each split's range is a whole number of K tiles, so only the last one meets K's tail.
  Value k_range = (cdiv(cdiv(ops.K, tp.block_k), SPLIT_K) * tp.block_k).named("k_range");
  Value k_lo = (split * k_range).named("k_lo");
  Value k_hi = minimum(ops.K, k_lo + k_range).named("k_hi");
  Value acc = matmul_tile_product(ops, tile, k_lo, k_hi, tp);

  Value w_split = (w + split.to(i64) * ops.M.to(i64) * ops.N.to(i64)).named("w_split");
  Value w_ptr = make_block_ptr(w_split, {ops.M, ops.N}, {ops.N.to(i64), 1},
                               {tile.pid_m * tp.block_m, tile.pid_n * tp.block_n}, {tp.block_m, tp.block_n}, {1, 0});
  store(w_ptr, acc, BoundaryCheck{0, 1});
  return kb.finish();
}

KernelDef matmul_split_k_def() {
  KernelDef d;
  d.name = "matmul_split_k";
  d.summary = "split-K matmul, first kernel: each (split, tile) program writes its f32 partial product to W";
  d.params = matmul_def().params;
  d.params.push_back(split_k_param(2));
  d.default_num_warps = 8;
  d.default_num_stages = 4;
  d.build = build_matmul_split_k;
  d.config_space = [] {
    struct Tile {
      int64_t m, n;
      int warps, stages;
      bool ws;
    };
    // matmul's fastest tiles at K = 16384 (worklog §21), warp-specialised and not, each cut 2, 3 or 4 ways.
    const Tile tiles[] = {{128, 128, 8, 4, true}, {128, 256, 8, 4, true}, {128, 128, 4, 5, true}, {128, 128, 8, 4, false}};
    std::vector<Config> cs;
    for (const Tile& t : tiles)
      for (int64_t split : {2, 3, 4}) {
        Config c = matmul_split_k_def().default_config();
        c.set("BLOCK_M", t.m).set("BLOCK_N", t.n).set("BLOCK_K", 64).set("SPLIT_K", split);
        c.set("MIN_BLOCKS_PER_SM", 1).set("WARP_SPECIALIZE", t.ws ? 1 : 0);
        c.num_warps = t.warps;
        c.num_stages = t.stages;
        cs.push_back(c);
      }
    return cs;
  };
  d.size_args = {"M", "N", "K"};
  d.tuning_key = {"M", "N", "K"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  // A split shorter than the ring (num_stages K tiles) never reaches the steady state the split is for.
  d.prune = [](const Config& c, const SizeArgs& s) -> std::string {
    const int64_t steps = split_k_range(s.at("K"), c.get("BLOCK_K"), c.get("SPLIT_K")) / c.get("BLOCK_K");
    if (steps < 2 * c.num_stages)
      return fmt::format("SPLIT_K={} leaves {} K tiles of {} a split, fewer than twice the {} stages",
                         c.get("SPLIT_K"), steps, c.get("BLOCK_K"), c.num_stages);
    return "";
  };
  d.grid = [](const Config& c, const SizeArgs& s) {
    return Grid{c.get("SPLIT_K") * matmul_output_tiles(c, s.at("M"), s.at("N")), 1, 1};
  };
  return d;
}

Kernel build_matmul_split_k_reduce(const Config& config) {
  const int64_t BM = config.get("BLOCK_M"), BN = config.get("BLOCK_N"), SPLIT_K = config.get("SPLIT_K");
  const DType dt = dtype_from_param(config.get("DTYPE"), "matmul_split_k_reduce");
  KernelBuilder kb("matmul_split_k_reduce", config);
  Value w = kb.arg_ptr("W", f32), c_base = kb.arg_ptr("C", dt);
  Value M = kb.arg("M", i32), N = kb.arg("N", i32);
  Value stride_cm = kb.arg("stride_cm", i64), stride_cn = kb.arg("stride_cn", i64);

  Value pid = program_id(0);
  Value num_pid_n = cdiv(N, BN);
  Value pid_m = (pid / num_pid_n).named("pid_m"), pid_n = (pid % num_pid_n).named("pid_n");
  // W as one (SPLIT_K * M, N) matrix: the tile of split s is M rows below split s - 1's. Its rows past M
  // belong to the next split (or lie past the end, read as zero) and are never stored.
  Value w_ptr = make_block_ptr(w, {M * SPLIT_K, N}, {N.to(i64), 1}, {pid_m * BM, pid_n * BN}, {BM, BN}, {1, 0})
                    .named("w_ptr");
  Value acc = zeros({BM, BN}, f32).named("acc");
  for_range(0, SPLIT_K, 1, [&](Value) {
    acc = acc + load(w_ptr, BoundaryCheck{0, 1});
    w_ptr = advance(w_ptr, {M, 0});
  });
  Value c_ptr = make_block_ptr(c_base, {M, N}, {stride_cm, stride_cn}, {pid_m * BM, pid_n * BN}, {BM, BN}, {1, 0});
  store(c_ptr, acc.to(dt), BoundaryCheck{0, 1});
  return kb.finish();
}

KernelDef matmul_split_k_reduce_def() {
  KernelDef d;
  d.name = "matmul_split_k_reduce";
  d.summary = "split-K matmul, second kernel: C = the sum of the f32 partials in W, in split order";
  d.params = {ParamDef::power_of_two("BLOCK_M", 32, "rows of C per program", 1, 256),
              ParamDef::power_of_two("BLOCK_N", 128, "columns of C per program", 16, 256), split_k_param(2),
              ParamDef::choice("DTYPE", 0, "element type of C: 0 f16, 1 bf16, 2 f32", 0, 2)};
  d.default_num_warps = 4;
  d.default_num_stages = 1;
  d.build = build_matmul_split_k_reduce;
  // A stream of W: tiles of 16 KiB a split or more, so that each program has bytes in flight.
  d.config_space = [] {
    std::vector<Config> cs;
    for (auto [bm, bn, warps] : {std::tuple<int64_t, int64_t, int>{32, 128, 4}, {64, 128, 8}, {16, 256, 4}}) {
      Config c = matmul_split_k_reduce_def().default_config();
      c.set("BLOCK_M", bm).set("BLOCK_N", bn);
      c.num_warps = warps;
      cs.push_back(c);
    }
    return cs;
  };
  d.size_args = {"M", "N"};
  d.tuning_key = {"M", "N"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.grid = [](const Config& c, const SizeArgs& s) { return Grid{matmul_output_tiles(c, s.at("M"), s.at("N")), 1, 1}; };
  return d;
}

std::vector<double> run_matmul_split_k_interpreted(const MatmulProblem& p, const Config& partial,
                                                   const Config& reduce, const MatmulInputs& in, Executor executor) {
  const int64_t split_k = partial.get("SPLIT_K");
  if (reduce.get("SPLIT_K") != split_k)
    throw Error(fmt::format("run_matmul_split_k_interpreted: the partial kernel's SPLIT_K={} but the reduce's is {}",
                            split_k, reduce.get("SPLIT_K")));
  HostBuffer a = in.a, b = in.b, w(DType::f32, split_k * p.M * p.N, "W"), c(p.dtype, p.M * p.N, "C");
  for (HostBuffer* poisoned : {&w, &c})
    for (int64_t i = 0; i < poisoned->numel(); ++i)
      poisoned->set(i, std::nan(""));
  const MatmulStrides st = MatmulStrides::packed(p);
  const SizeArgs sizes = {{"M", p.M}, {"N", p.N}, {"K", p.K}};
  execute(executor, build_matmul_split_k(partial), matmul_split_k_def().grid(partial, sizes),
          {InterpArg::ptr(a), InterpArg::ptr(b), InterpArg::ptr(w), InterpArg::of_int(p.M), InterpArg::of_int(p.N),
           InterpArg::of_int(p.K), InterpArg::of_int(st.am), InterpArg::of_int(st.ak), InterpArg::of_int(st.bk),
           InterpArg::of_int(st.bn)});
  execute(executor, build_matmul_split_k_reduce(reduce), matmul_split_k_reduce_def().grid(reduce, sizes),
          {InterpArg::ptr(w), InterpArg::ptr(c), InterpArg::of_int(p.M), InterpArg::of_int(p.N),
           InterpArg::of_int(st.cm), InterpArg::of_int(st.cn)});
  std::vector<double> out(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i)
    out[static_cast<size_t>(i)] = c.get(i);
  return out;
}

} // namespace kiln
