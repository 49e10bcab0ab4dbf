#include "kernels/vector_add/vector_add.h"

#include "dsl/dsl.h"

namespace kiln {

Kernel build_vector_add(const Config& config) {
  const int64_t BLOCK = config.get("BLOCK");
  KernelBuilder kb("vector_add", config);
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), out = kb.arg_ptr("out", f32);
  Value n = kb.arg("n", i32);
  Value offs = (program_id(0) * BLOCK + arange(0, BLOCK)).named("offs"); // (BLOCK,) i32
  Value mask = offs < n;
  store(out + offs, load(x + offs, mask, 0.0f) + load(y + offs, mask, 0.0f), mask);
  return kb.finish();
}

KernelDef vector_add_def() {
  KernelDef d;
  d.name = "vector_add";
  d.summary = "out = x + y over f32 vectors of length n";
  d.params = {ParamDef::power_of_two("BLOCK", 1024, "elements per program", 1, int64_t{1} << 16)};
  d.build = build_vector_add;
  d.config_space = [] {
    std::vector<Config> cs;
    for (int64_t b : {512, 1024, 2048, 4096})
      for (int w : {4, 8}) {
        Config c;
        c.set("BLOCK", b);
        c.num_warps = w;
        cs.push_back(c);
      }
    return cs;
  };
  d.size_args = {"n"};
  d.tuning_key = {"n"};
  d.grid = [](const Config& c, const SizeArgs& s) {
    int64_t block = c.get("BLOCK");
    return Grid{(s.at("n") + block - 1) / block, 1, 1};
  };
  return d;
}

void vector_add_reference(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] + y[i];
}

} // namespace kiln
