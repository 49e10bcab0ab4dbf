// A user's own `kiln` command line: kiln::tool_main (kiln/tool_main.h) over a registry that holds this file's
// kernel, a row-wise LayerNorm, and none of kiln's. Built twice by kiln's tests: in kiln's own build (the CLI
// tests of tests/unit/cli_user_kernels_test.cpp run it) and against the installed package by the install test
// (tests/install/run_install_test.cmake), as a user's project would:
//
//   my_kiln list
//   my_kiln emit layernorm --stage ir|lowered|cuda|ptx|sass [--set BLOCK_N=1024] [--arch sm_80]
//   my_kiln model layernorm --shape n_rows=4096,n_cols=1000 --set BLOCK_N=1024
//   my_kiln tune layernorm --shape n_rows=4096,n_cols=1000 --set BLOCK_N=1024      (on a GPU)
//   my_kiln run layernorm --in x=x.npy --in weight=w.npy --in bias=b.npy --out y=y.npy --check [--interpret]
#include <kiln/kiln.h>
#include <kiln/tool_main.h>

#include <cmath>

using namespace kiln;

namespace {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias over an (n_rows, n_cols) row-major f32 matrix:
// ROWS rows a program, each row in one BLOCK_N tile (BLOCK_N >= n_cols).
Kernel build_layernorm(const Config& c) {
  const int64_t ROWS = c.get("ROWS"), BLOCK_N = c.get("BLOCK_N");
  KernelBuilder kb("layernorm", c);
  Value x = kb.arg_ptr("x", f32), weight = kb.arg_ptr("weight", f32), bias = kb.arg_ptr("bias", f32);
  Value y = kb.arg_ptr("y", f32);
  Value n_rows = kb.arg("n_rows", i32), n_cols = kb.arg("n_cols", i32);
  Value eps = kb.arg("eps", f32);

  Value rows = program_id(0) * ROWS + arange(0, ROWS);                  // (ROWS,) i32
  Value cols = arange(0, BLOCK_N);                                      // (BLOCK_N,) i32
  Value col_ok = cols < n_cols;                                         // (BLOCK_N,) i1
  Value mask = expand_dims(rows < n_rows, 1) && expand_dims(col_ok, 0); // (ROWS, BLOCK_N) i1
  Value offs = expand_dims(rows, 1) * n_cols + expand_dims(cols, 0);    // (ROWS, BLOCK_N) i32
  Value xs = load(x + offs, mask, 0.0f);                                // (ROWS, BLOCK_N) f32
  Value n = n_cols.to(f32);
  Value mean = sum(xs, 1) / n;                                   // (ROWS,) f32
  Value centered = where(mask, xs - expand_dims(mean, 1), 0.0f); // masked lanes add nothing
  Value rstd = rsqrt(sum(centered * centered, 1) / n + eps);     // (ROWS,) f32
  Value w = load(weight + cols, col_ok, 0.0f), b = load(bias + cols, col_ok, 0.0f); // (BLOCK_N,) f32
  store(y + offs, centered * expand_dims(rstd, 1) * expand_dims(w, 0) + expand_dims(b, 0), mask);
  return kb.finish();
}

// The same LayerNorm in double, for `my_kiln run layernorm --check`.
ReferenceOutputs layernorm_reference(const ReferenceInputs& in) {
  const int64_t rows = in.size("n_rows"), cols = in.size("n_cols");
  const std::vector<double>& x = in.tensor("x");
  const std::vector<double>& w = in.tensor("weight");
  const std::vector<double>& b = in.tensor("bias");
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += x[static_cast<size_t>(r * cols + c)] / static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c)
      var += std::pow(x[static_cast<size_t>(r * cols + c)] - mean, 2) / static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      y[i] = (x[i] - mean) / std::sqrt(var + in.scalar("eps")) * w[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
    }
  }
  return {{"y", y}};
}

KernelDef layernorm_def() {
  KernelDef d;
  d.name = "layernorm";
  d.summary = "row-wise LayerNorm forward of an [n_rows, n_cols] f32 matrix, ROWS rows a program";
  d.params = {ParamDef::power_of_two("ROWS", 1, "rows a program normalises", 1, 16),
              ParamDef::power_of_two("BLOCK_N", 256, "row tile: a power of two >= n_cols", 16, 8192)};
  d.default_num_stages = 1;
  d.build = build_layernorm;
  d.size_args = {"n_rows", "n_cols"};
  d.tuning_key = {"n_cols"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.grid = [](const Config& c, const SizeArgs& s) {
    if (c.get("BLOCK_N") < s.at("n_cols"))
      fail("layernorm: BLOCK_N={} is smaller than n_cols={}; give --set BLOCK_N=<a power of two >= n_cols>",
           c.get("BLOCK_N"), s.at("n_cols"));
    return Grid{(s.at("n_rows") + c.get("ROWS") - 1) / c.get("ROWS"), 1, 1};
  };
  d.config_space = [] {
    std::vector<Config> space;
    for (int warps : {1, 2, 4, 8})
      for (int64_t rows : {1, 2, 4}) {
        Config c = layernorm_def().default_config();
        c.num_warps = warps;
        c.set("ROWS", rows);
        space.push_back(c);
      }
    return space;
  };
  // For `run`: the buffers' shapes in the size arguments (sizes are read off the .npy files given) and the
  // reference `--check` compares with (the tolerance defaults to f32's).
  d.tensor_dims = {{"x", {"n_rows", "n_cols"}}, {"weight", {"n_cols"}}, {"bias", {"n_cols"}},
                   {"y", {"n_rows", "n_cols"}}};
  d.reference = layernorm_reference;
  return d;
}

} // namespace

int main(int argc, char** argv) {
  KernelRegistry kernels; // this program's kernels only; `= builtin_kernels()` would keep kiln's too
  kernels.add(layernorm_def());
  return tool_main(argc, argv, kernels);
}
