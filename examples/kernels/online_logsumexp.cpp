#include "examples/kernels/online_logsumexp.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace kiln;

namespace tutorial {

// ROWS rows a program; each row streamed in BLOCK_N chunks. After a chunk, m is the row's maximum so far and
// s the sum of exp(x - m) so far: a new maximum rescales s by exp(m_old - m_new), as FlashAttention's softmax
// does.
Kernel build_online_logsumexp(const Config& c) {
  const int64_t ROWS = c.get("ROWS"), BLOCK_N = c.get("BLOCK_N");
  constexpr double kLog2e = 1.4426950408889634, kLn2 = 0.6931471805599453;
  KernelBuilder kb("online_logsumexp", c);
  Value x = kb.arg_ptr("x", f16), out = kb.arg_ptr("out", f32);
  Value n_rows = kb.arg("n_rows", i32), n_cols = kb.arg("n_cols", i32);

  Value rows = program_id(0) * ROWS + arange(0, ROWS); // (ROWS,) i32
  Value row_ok = rows < n_rows;                        // (ROWS,) i1
  Value row_offs = expand_dims(rows, 1) * n_cols;      // (ROWS, 1) i32
  const double neg_inf = -std::numeric_limits<double>::infinity();
  Value m = full({ROWS}, neg_inf, f32); // (ROWS,) f32, in log2 units
  Value s = zeros({ROWS}, f32);         // (ROWS,) f32
  // The chunk loop, written once and built twice: without masks where every chunk is whole and every row of
  // every program exists (n_cols a multiple of BLOCK_N, n_rows of ROWS), else with them.
  auto stream_rows = [&](bool whole) {
    for_range(0, n_cols, BLOCK_N, [&](Value start) {
      Value cols = start + arange(0, BLOCK_N);  // (BLOCK_N,) i32
      Value ptrs = x + (row_offs + expand_dims(cols, 0));
      Value xs = whole ? load(ptrs)
                       : load(ptrs, expand_dims(row_ok, 1) && expand_dims(cols < n_cols, 0), neg_inf); // f16
      Value t = xs.to(f32) * static_cast<float>(kLog2e);                     // (ROWS, BLOCK_N) f32
      Value m_new = maximum(m, max(t, 1));                                   // (ROWS,) f32
      // A row whose every element so far is -inf (or a row past n_rows) keeps m = -inf: shift by 0 instead.
      Value shift = where(m_new == neg_inf, 0.0f, m_new); // (ROWS,) f32
      s = s * exp2(m - shift) + sum(exp2(t - expand_dims(shift, 1)), 1);
      m = m_new;
    });
  };
  if_((n_cols % BLOCK_N == 0) && (n_rows % ROWS == 0), [&] { stream_rows(true); }, [&] { stream_rows(false); });
  store(out + rows, (m + log2(s)) * static_cast<float>(kLn2), row_ok);
  return kb.finish();
}

ReferenceOutputs online_logsumexp_reference(const ReferenceInputs& in) {
  const int64_t rows = in.size("n_rows"), cols = in.size("n_cols");
  const std::vector<double>& x = in.tensor("x");
  std::vector<double> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * cols;
    const double m = *std::max_element(row, row + cols);
    if (std::isinf(m) && m < 0) {
      out[static_cast<size_t>(r)] = m; // every element -inf: log(0)
      continue;
    }
    double s = 0;
    for (int64_t c = 0; c < cols; ++c)
      s += std::exp(row[c] - m);
    out[static_cast<size_t>(r)] = m + std::log(s);
  }
  return {{"out", out}};
}

KernelDef online_logsumexp_def() {
  KernelDef d;
  d.name = "online_logsumexp";
  d.summary =
      "out[r] = logsumexp(x[r, :]) of an [n_rows, n_cols] f16 matrix, rows streamed in BLOCK_N chunks";
  d.params = {ParamDef::power_of_two("ROWS", 1, "rows a program reduces", 1, 16),
              ParamDef::power_of_two("BLOCK_N", 1024, "columns a chunk", 16, 8192)};
  d.default_num_warps = 4;
  d.default_num_stages = 1;
  d.build = build_online_logsumexp;
  d.size_args = {"n_rows", "n_cols"};
  d.tuning_key = {"n_rows", "n_cols"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.grid = [](const Config& c, const SizeArgs& s) {
    return Grid{(s.at("n_rows") + c.get("ROWS") - 1) / c.get("ROWS"), 1, 1};
  };
  // One warp a row (ROWS == num_warps) keeps both reductions of a chunk inside the warp: shuffles, no shared
  // memory, no barrier. On the H200 that took the masked loop from 0.77 to 0.90 of copy, and the unmasked one
  // runs at 2 rows of 2 warps in chunks of 1024, at 0.98 of copy (worklog §55, §57). num_stages stays 1: the
  // -inf padded load is not staged through shared memory (cp.async can only zero-fill), so 2 measured the same.
  d.config_space = [] {
    struct Shape {
      int warps;
      int64_t rows;
    };
    const Shape shapes[] = {{4, 1}, {8, 1}, {4, 2}, {8, 2}, {2, 2}, {4, 4}, {8, 8}, {16, 16}};
    std::vector<Config> space;
    for (int64_t block_n : {256, 512, 1024, 2048, 4096})
      for (const Shape& sh : shapes) {
        Config c = online_logsumexp_def().default_config();
        c.num_warps = sh.warps;
        c.set("BLOCK_N", block_n).set("ROWS", sh.rows);
        space.push_back(c);
      }
    return space;
  };
  d.tensor_dims = {{"x", {"n_rows", "n_cols"}}, {"out", {"n_rows"}}};
  d.reference = online_logsumexp_reference;
  return d;
}

} // namespace tutorial
