#include "kernels/softmax/softmax.h"

#include "dsl/dsl.h"
#include "kernels/codegen_params.h"
#include "kernels/dtype_param.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace kiln {

namespace {
constexpr double kLog2e = 1.4426950408889634;
constexpr double kInf = std::numeric_limits<double>::infinity();
// The longest row one program holds: 2^16 elements, 128 a thread at 16 warps.
constexpr int64_t kMaxRowTile = int64_t{1} << 16;

int64_t next_power_of_two(int64_t x) {
  int64_t p = 1;
  while (p < x)
    p *= 2;
  return p;
}
} // namespace

Kernel build_softmax(const Config& config) {
  const int64_t BLOCK = config.get("BLOCK"), ROWS = config.get("ROWS");
  const DType dt = dtype_from_param(config.get("DTYPE"), "softmax");
  KernelBuilder kb("softmax", config);
  Value out = kb.arg_ptr("out", dt), in = kb.arg_ptr("in", dt);
  Value in_row_stride = kb.arg("in_row_stride", i64), out_row_stride = kb.arg("out_row_stride", i64);
  Value n_rows = kb.arg("n_rows", i32), n_cols = kb.arg("n_cols", i32);

  // ROWS rows a program: more bytes in flight for each of the reductions' barriers.
  Value rows = (program_id(0) * ROWS + arange(0, ROWS)).named("rows"); // (ROWS,) i32
  Value cols = arange(0, BLOCK).named("cols");                         // (BLOCK,) i32
  Value mask = (rows < n_rows).expand_dims(1) & (cols < n_cols).expand_dims(0); // (ROWS, BLOCK)
  Value row_offs = rows.to(i64).expand_dims(1);                        // (ROWS, 1) i64
  Value x = load(in + row_offs * in_row_stride + cols.expand_dims(0), mask, -kInf).to(f32).named("x");
  // exp(x - max) as exp2(x·log2 e - max·log2 e): one fused multiply-add an element (each row's max scaled
  // once), and exp2 is the hardware instruction. Rows past n_rows compute NaN and are never stored.
  Value shifted = x * kLog2e - (max(x, 1) * kLog2e).expand_dims(1);
  Value num = exp2(shifted).named("num"); // masked lanes: exp2(-inf) = 0
  Value y = num * (1.0 / sum(num, 1)).expand_dims(1); // one division a row, then a multiply an element
  store(out + row_offs * out_row_stride + cols.expand_dims(0), y.to(dt), mask);
  return kb.finish();
}

KernelDef softmax_def() {
  KernelDef d;
  d.name = "softmax";
  d.summary = "row softmax of an [n_rows, n_cols] tensor, ROWS rows a program";
  d.params = {ParamDef::power_of_two("BLOCK", 1024, "row tile: a power of two >= n_cols", 1, kMaxRowTile),
              ParamDef::power_of_two("ROWS", 1, "rows a program normalises (a power of two)", 1, 64),
              ParamDef::choice("DTYPE", 2, "element type: 0 f16, 1 bf16, 2 f32 (the encoding of every shipped kernel)",
                               0, 2),
              min_blocks_per_sm_param(1)};
  d.build = build_softmax;
  d.config_space = [] {
    // BLOCK is set by the host to the row length; the autotuner varies the warps and whether registers are
    // capped so that an SM holds its full 64 warps (a program's loads are all it has in flight before its
    // reductions wait: more resident programs, more bytes in flight). Two or four rows a program are tried
    // with 8 and 16 warps only: with fewer warps their registers grow past the cap (and spill under it);
    // on an H200 they were never the fastest (worklog §12).
    std::vector<Config> cs;
    auto add = [&](int warps, int64_t rows, int64_t min_blocks) {
      Config c = softmax_def().default_config();
      c.num_warps = warps;
      c.num_stages = 1;
      c.set("ROWS", rows).set("MIN_BLOCKS_PER_SM", min_blocks);
      cs.push_back(c);
    };
    for (int w : {1, 2, 4, 8, 16})
      for (int64_t min_blocks : {int64_t{1}, std::min<int64_t>(32, 64 / w)}) // at most 32 CTAs an SM
        add(w, 1, min_blocks);
    for (int w : {8, 16})
      for (int64_t rows : {2, 4})
        add(w, rows, 1);
    return cs;
  };
  d.size_args = {"n_rows", "n_cols"};
  d.tuning_key = {"n_cols"};
  d.grid = [](const Config& c, const SizeArgs& s) {
    int64_t block = c.get("BLOCK"), n_cols = s.at("n_cols");
    if (block < n_cols)
      fail("softmax: BLOCK={} is smaller than n_cols={}; one program holds a whole row, so BLOCK must be a power "
           "of two >= n_cols",
           block, n_cols);
    const int64_t rows = c.get("ROWS");
    return Grid{(s.at("n_rows") + rows - 1) / rows, 1, 1};
  };
  return d;
}

Config softmax_config(const SoftmaxProblem& p) {
  Config c = softmax_def().default_config();
  c.set("BLOCK", next_power_of_two(p.n_cols));
  c.set("DTYPE", dtype_param(p.dtype, "softmax"));
  int64_t block = c.get("BLOCK");
  c.num_warps = block >= 8192 ? 16 : block >= 2048 ? 8 : 4;
  c.num_stages = 1;
  return c;
}

HostBuffer make_softmax_input(const SoftmaxProblem& p, uint64_t seed, double scale) {
  HostBuffer in(p.dtype, (p.n_rows - 1) * p.in_stride() + p.n_cols, "in");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  for (int64_t i = 0; i < in.numel(); ++i)
    in.set(i, dist(rng));
  return in;
}

std::vector<double> softmax_reference(const SoftmaxProblem& p, const HostBuffer& in) {
  std::vector<double> out(static_cast<size_t>(p.n_rows * p.n_cols));
  for (int64_t r = 0; r < p.n_rows; ++r) {
    double m = -kInf;
    for (int64_t c = 0; c < p.n_cols; ++c)
      m = std::max(m, in.get(r * p.in_stride() + c));
    double s = 0;
    for (int64_t c = 0; c < p.n_cols; ++c)
      s += std::exp(in.get(r * p.in_stride() + c) - m);
    for (int64_t c = 0; c < p.n_cols; ++c)
      out[static_cast<size_t>(r * p.n_cols + c)] = std::exp(in.get(r * p.in_stride() + c) - m) / s;
  }
  return out;
}

std::vector<double> run_softmax_interpreted(const SoftmaxProblem& p, const Config& config, const HostBuffer& in,
                                            Executor executor) {
  HostBuffer out(p.dtype, (p.n_rows - 1) * p.out_stride() + p.n_cols, "out");
  for (int64_t i = 0; i < out.numel(); ++i)
    out.set(i, std::nan(""));
  Kernel k = build_softmax(config);
  HostBuffer input = in;
  std::vector<InterpArg> args = {InterpArg::ptr(out),          InterpArg::ptr(input),
                                 InterpArg::of_int(p.in_stride()), InterpArg::of_int(p.out_stride()),
                                 InterpArg::of_int(p.n_rows),  InterpArg::of_int(p.n_cols)};
  execute(executor, k, softmax_def().grid(config, {{"n_rows", p.n_rows}, {"n_cols", p.n_cols}}), args);
  std::vector<double> dense(static_cast<size_t>(p.n_rows * p.n_cols));
  for (int64_t r = 0; r < p.n_rows; ++r)
    for (int64_t c = 0; c < p.n_cols; ++c)
      dense[static_cast<size_t>(r * p.n_cols + c)] = out.get(r * p.out_stride() + c);
  return dense;
}

} // namespace kiln
