#include "kernels/attention/attention_block_mask_runs.h"

#include "dsl/dsl.h"

namespace kiln {

namespace {

// Whether each row's list (count and index tensors) holds tiles that are not one run: n > 0 entries whose
// last minus first is not n - 1. The classifier writes a list in ascending tile order.
Value not_one_run(const Value& count, const Value& index, const Value& rows, const Value& live,
                  const Value& k_tiles) {
  Value n = load(count + rows, live, 0);
  Value some = live && (n > 0);
  Value list = rows * k_tiles.to(i64);
  Value first = load(index + list, some, 0);
  Value last = load(index + (list + maximum(n - 1, 0).to(i64)), some, 0);
  return some && (last - first != n - 1);
}

} // namespace

Kernel build_attention_block_mask_runs(const Config& config) {
  const int64_t BLOCK = config.get("BLOCK");
  KernelBuilder kb("attention_block_mask_runs", config);
  Value full_count = kb.arg_ptr("full_count", i32), full_index = kb.arg_ptr("full_index", i32);
  Value partial_count = kb.arg_ptr("partial_count", i32), partial_index = kb.arg_ptr("partial_index", i32);
  Value non_runs = kb.arg_ptr("non_runs", i32);
  Value n_rows = kb.arg("ROWS", i32), k_tiles = kb.arg("K_TILES", i32);
  Value rows = (program_id(0) * BLOCK + arange(0, BLOCK)).named("rows"); // (BLOCK,) i32
  Value live = rows < n_rows;
  Value rows64 = rows.to(i64);
  Value bad = not_one_run(full_count, full_index, rows64, live, k_tiles) ||
              not_one_run(partial_count, partial_index, rows64, live, k_tiles);
  Value n_bad = sum(bad.to(i32), 0).named("n_bad");
  atomic_add(non_runs, n_bad, n_bad > 0);
  return kb.finish();
}

namespace {

KernelDef make_attention_block_mask_runs_def() {
  KernelDef d;
  d.name = "attention_block_mask_runs";
  d.summary = "counts the rows of a block mask whose full or partial list is not one run of key tiles";
  d.params = {ParamDef::power_of_two("BLOCK", 256, "block-mask rows per program", 16, 1024)};
  d.default_num_warps = 4;
  d.default_num_stages = 1;
  d.build = build_attention_block_mask_runs;
  d.config_space = [] { return std::vector<Config>{attention_block_mask_runs_def().default_config()}; };
  d.size_args = {"ROWS"};
  d.tuning_key = {"ROWS"};
  d.grid = [](const Config& c, const SizeArgs& s) {
    const int64_t block = c.get("BLOCK");
    return Grid{(s.at("ROWS") + block - 1) / block, 1, 1};
  };
  return d;
}

} // namespace

const KernelDef& attention_block_mask_runs_def() {
  static const KernelDef def = make_attention_block_mask_runs_def();
  return def;
}

} // namespace kiln
