#include "examples/kernels/layernorm_fwd.h"

#include <cmath>

using namespace kiln;

namespace tutorial {

// ITERS blocks of ROWS rows a program, each row in one BLOCK_N tile (BLOCK_N >= n_cols): x is read once,
// statistics in f32. The row blocks come through a block pointer advanced by ROWS rows each iteration, so that
// with num_stages >= 2 the code generator stages the next blocks' rows in shared memory (cp.async) while this
// block is normalised: a program always has rows in flight, without holding them in registers.
Kernel build_layernorm_fwd(const Config& c) {
  const int64_t ROWS = c.get("ROWS"), BLOCK_N = c.get("BLOCK_N"), ITERS = c.get("ITERS");
  KernelBuilder kb("layernorm_fwd", c);
  Value x = kb.arg_ptr("x", f16), weight = kb.arg_ptr("weight", f16), bias = kb.arg_ptr("bias", f16);
  Value y = kb.arg_ptr("y", f16);
  Value n_rows = kb.arg("n_rows", i32), n_cols = kb.arg("n_cols", i32);
  Value eps = kb.arg("eps", f32);

  Value first = program_id(0) * (ROWS * ITERS);                             // this program's first row
  Value blocks = minimum(cdiv(n_rows - first, ROWS), ITERS);                // its row blocks
  Value inv_n = 1.0f / n_cols.to(f32); // one division a program; the means multiply by it
  // The row loop, written once and built twice: `whole_rows` when a row fills the tile (n_cols == BLOCK_N),
  // so that nothing along a row needs a check or a mask; otherwise the columns past n_cols are read as 0 and
  // kept out of the statistics.
  auto normalize_rows = [&](bool whole_rows) {
    Value x_blk = make_block_ptr(x, {n_rows, n_cols}, {n_cols, 1}, {first, 0}, {ROWS, BLOCK_N}, {1, 0});
    Value y_blk = make_block_ptr(y, {n_rows, n_cols}, {n_cols, 1}, {first, 0}, {ROWS, BLOCK_N}, {1, 0});
    // weight and bias through block pointers too: their 16-byte pieces are checked against n_cols a piece at
    // a time, where a pointer tile's mask costs a predicate an element (worklog §38: 0.1168 -> 0.1147 ms).
    Value w_blk = make_block_ptr(weight, {n_cols}, {1}, {0}, {BLOCK_N}, {0});
    Value b_blk = make_block_ptr(bias, {n_cols}, {1}, {0}, {BLOCK_N}, {0});
    const BoundaryCheck tile_check = whole_rows ? BoundaryCheck{0} : BoundaryCheck{0, 1};
    const BoundaryCheck row_check = whole_rows ? BoundaryCheck{} : BoundaryCheck{0};
    Value col_ok = expand_dims(arange(0, BLOCK_N) < n_cols, 0);             // (1, BLOCK_N) i1
    for_range(0, blocks, 1, [&](Value) {
      Value xs = load(x_blk, tile_check).to(f32);                           // (ROWS, BLOCK_N) f32, 0 outside
      // weight and bias are read here, beside x, rather than where they are used: their reads then wait for
      // memory together with x's instead of after the statistics (worklog §58: 0.0747 -> 0.0704 ms on an H200).
      Value w = load(w_blk, row_check);                                     // (BLOCK_N,) f16, 0 outside
      Value b = load(b_blk, row_check);                                     // (BLOCK_N,) f16, 0 outside
      Value mean = sum(xs, 1) * inv_n;                                      // (ROWS,) f32
      Value centered = xs - expand_dims(mean, 1);
      if (!whole_rows)
        centered = where(col_ok, centered, 0.0f);                           // columns past n_cols add nothing
      Value rstd = rsqrt(sum(centered * centered, 1) * inv_n + eps);        // (ROWS,) f32
      Value out = centered * expand_dims(rstd, 1) * expand_dims(w.to(f32), 0) + expand_dims(b.to(f32), 0);
      store(y_blk, out.to(f16), tile_check);
      x_blk = advance(x_blk, {ROWS, 0});
      y_blk = advance(y_blk, {ROWS, 0});
    });
  };
  if_(n_cols == BLOCK_N, [&] { normalize_rows(true); }, [&] { normalize_rows(false); });
  return kb.finish();
}

ReferenceOutputs layernorm_fwd_reference(const ReferenceInputs& in) {
  const int64_t rows = in.size("n_rows"), cols = in.size("n_cols");
  const std::vector<double>& x = in.tensor("x");
  const std::vector<double>& w = in.tensor("weight");
  const std::vector<double>& b = in.tensor("bias");
  const double eps = in.scalar("eps");
  std::vector<double> y(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * cols;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += row[c];
    mean /= static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c)
      var += (row[c] - mean) * (row[c] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c)
      y[static_cast<size_t>(r * cols + c)] =
          (row[c] - mean) * rstd * w[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
  }
  return {{"y", y}};
}

KernelDef layernorm_fwd_def() {
  KernelDef d;
  d.name = "layernorm_fwd";
  d.summary =
      "row-wise LayerNorm forward of an [n_rows, n_cols] f16 matrix (f32 statistics), ITERS blocks of ROWS rows "
      "a program";
  d.params = {ParamDef::power_of_two("ROWS", 1, "rows normalised together (a block)", 1, 16),
              ParamDef::power_of_two("BLOCK_N", 1024, "row tile: a power of two >= n_cols", 16, 16384),
              ParamDef::power_of_two("ITERS", 1, "row blocks a program normalises, one after the other", 1, 64),
              ParamDef::count("MIN_BLOCKS_PER_SM", 1, "CTAs that must fit on one SM (caps registers)", 1, 16)};
  d.default_num_warps = 4;
  d.default_num_stages = 1;
  d.build = build_layernorm_fwd;
  d.size_args = {"n_rows", "n_cols"};
  d.tuning_key = {"n_cols"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.grid = [](const Config& c, const SizeArgs& s) {
    if (c.get("BLOCK_N") < s.at("n_cols"))
      fail("layernorm_fwd: BLOCK_N={} is smaller than n_cols={}; give --set BLOCK_N=<a power of two >= "
           "n_cols>",
           c.get("BLOCK_N"), s.at("n_cols"));
    const int64_t rows_a_program = c.get("ROWS") * c.get("ITERS");
    return Grid{(s.at("n_rows") + rows_a_program - 1) / rows_a_program, 1, 1};
  };
  d.prune = [](const Config& c, const SizeArgs& s) -> std::string {
    return c.get("BLOCK_N") < s.at("n_cols") ? "BLOCK_N is shorter than a row" : "";
  };
  // MIN_BLOCKS_PER_SM is read by kiln's code generator from any kernel's config (the second
  // __launch_bounds__ argument): it caps a thread's registers so that that many CTAs fit an SM, and the rows they
  // read at once are what keeps memory busy. On an H200 (worklog §58), 16384 x 4096 f16 runs fastest at 4 warps
  // and 7 CTAs an SM (72 registers, 32 elements a thread: 0.070 ms, against 0.075 at 8 warps and 6 CTAs and 0.088
  // at 16 warps and 4 CTAs). ITERS > 1 with num_stages >= 2 is the row loop the code generator pipelines through
  // shared memory (worklog §38: 0.139 ms on an H100, against 0.180 for the same loop unpipelined).
  d.config_space = [] {
    struct Shape {
      int warps;
      int64_t rows, min_blocks, iters;
      int stages;
    };
    const Shape shapes[] = {{4, 1, 1, 1, 1},  {4, 2, 1, 1, 1},  {4, 1, 6, 1, 1},  {4, 1, 7, 1, 1},
                            {4, 1, 8, 1, 1},  {8, 1, 1, 1, 1},  {8, 1, 5, 1, 1},  {8, 1, 6, 1, 1},
                            {16, 1, 1, 1, 1}, {16, 1, 4, 1, 1}, {8, 1, 1, 16, 3}, {16, 1, 2, 16, 3}};
    std::vector<Config> space;
    for (int64_t block_n : {1024, 2048, 4096, 8192})
      for (const Shape& sh : shapes) {
        Config c = layernorm_fwd_def().default_config();
        c.num_warps = sh.warps;
        c.num_stages = sh.stages;
        c.set("BLOCK_N", block_n).set("ROWS", sh.rows).set("MIN_BLOCKS_PER_SM", sh.min_blocks);
        c.set("ITERS", sh.iters);
        space.push_back(c);
      }
    return space;
  };
  d.tensor_dims = {
      {"x", {"n_rows", "n_cols"}}, {"weight", {"n_cols"}}, {"bias", {"n_cols"}}, {"y", {"n_rows", "n_cols"}}};
  d.reference = layernorm_fwd_reference;
  return d;
}

} // namespace tutorial

