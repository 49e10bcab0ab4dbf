#include "kernels/attention/attention_block_mask_host.h"

#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_block_mask_runs.h"
#include "kernels/attention/fa2_bwd_block_mask.h"

#include <algorithm>

namespace kiln {

namespace {

const char* causal_name(int causal) {
  return causal == 0 ? "none" : causal == 1 ? "top-left" : "bottom-right";
}

bool is_tile(int64_t n) { return n >= 16 && n <= 256 && (n & (n - 1)) == 0; }

// The list of tile m (one of `tiles` per (b, h), lists `list_len` long) of (b, h).
std::vector<int64_t> list_of(const HostBuffer& count, const HostBuffer& index, const BlockMaskLayout& l,
                             const char* what, int64_t tiles, int64_t list_len, int64_t b, int64_t h, int64_t m) {
  if (b < 0 || b >= l.B || h < 0 || h >= l.H || m < 0 || m >= tiles)
    fail("block mask: {} (b {}, h {}, tile {}) is outside the block mask ({})", what, b, h, m, l.str());
  const int64_t row = (b * l.H + h) * tiles + m;
  const int64_t n = static_cast<int64_t>(count.get(row));
  std::vector<int64_t> list;
  for (int64_t i = 0; i < n; ++i)
    list.push_back(static_cast<int64_t>(index.get(row * list_len + i)));
  return list;
}

// A kiln::Error unless `config` (what: "the forward's config", ...) runs at the block mask's tiles.
void check_tiles(const BlockMaskLayout& l, const Config& config, const char* what) {
  if (config.get("BLOCK_M") != l.block_m || config.get("BLOCK_N") != l.block_n)
    fail("block mask built at tiles BLOCK_M={} x BLOCK_N={}; {} has BLOCK_M={} x BLOCK_N={}; expected the "
         "block mask's tiles (build the block mask at the kernel's tiles, or run the kernel at the block "
         "mask's)",
         l.block_m, l.block_n, what, config.get("BLOCK_M"), config.get("BLOCK_N"));
}

} // namespace

std::string BlockMaskLayout::str() const {
  return fmt::format("B{} H{} N_Q{} N_K{}, tiles BLOCK_M={} x BLOCK_N={}, causal {}, mask mods [{}]", B, H,
                     N_Q, N_K, block_m, block_n, causal_name(causal), mask_mods);
}

BlockMaskLayout block_mask_layout(const AttentionProblem& p, const AttentionMods& mods, int64_t block_m,
                                  int64_t block_n) {
  for (auto [name, n] : {std::pair{"block_m", block_m}, {"block_n", block_n}})
    if (!is_tile(n))
      fail("block mask: {} = {}; expected a power of two in [16, 256], the forward's tile sizes", name, n);
  check_attention_problem(p);
  BlockMaskLayout l;
  l.B = p.B, l.H = p.H, l.H_KV = p.H_KV, l.N_Q = p.N_Q, l.N_K = p.N_K;
  l.block_m = block_m, l.block_n = block_n;
  l.causal = p.causal;
  const AttentionMods mask = block_mask_mods(mods);
  l.mask_mods = mask.name().substr(1); // the mask mods after the (empty) score mods' "|"
  l.mask_identity = mask.identity();
  return l;
}

void check_block_mask(const BlockMaskLayout& l, const AttentionProblem& p, const AttentionMods& mods,
                      const Config* config) {
  if (l.B != p.B || l.H != p.H || l.H_KV != p.H_KV || l.N_Q != p.N_Q || l.N_K != p.N_K)
    fail("block mask built for B{} H{} H_KV{} N_Q{} N_K{}; the attention has B{} H{} H_KV{} N_Q{} N_K{}; "
         "expected "
         "a block mask built for the call's sizes",
         l.B, l.H, l.H_KV, l.N_Q, l.N_K, p.B, p.H, p.H_KV, p.N_Q, p.N_K);
  if (l.causal != p.causal)
    fail("block mask built with causal {}; the attention has causal {}; expected the same causal mode (or "
         "causal as a mask mod, causal_mask(), in both)",
         causal_name(l.causal), causal_name(p.causal));
  const AttentionMods mask = block_mask_mods(mods);
  if (mask.identity() != l.mask_identity)
    fail("block mask built for the mask mods [{}] ({}); the attention has mask mods [{}] ({}); expected the "
         "mask mods the block mask was built for",
         l.mask_mods, l.mask_identity.empty() ? "none" : l.mask_identity, mask.name().substr(1),
         mask.mask.empty() ? "none" : mask.identity());
  if (config)
    check_tiles(l, *config, "the forward's config");
}

void check_block_mask_fwd_config(const Config& config, bool runs) {
  check_block_mask_config(config);
  if (config.get_or("BLOCK_MASK_RUNS", 0) != 0 && !runs)
    fail("block mask: config has BLOCK_MASK_RUNS=1, but the block mask has lists that are not one run of key "
         "tiles (its runs flag is false); expected BLOCK_MASK_RUNS=0");
}

void check_block_mask_bwd_configs(const BlockMaskLayout& l, const Config* dkdv, const Config* dq) {
  if (dkdv) {
    check_tiles(l, *dkdv, "the dK/dV config (BLOCK_N keys a program, BLOCK_M query rows a step)");
    check_block_mask_bwd_config(*dkdv);
  }
  if (dq)
    check_tiles(l, *dq, "the dQ config (BLOCK_M query rows a program, BLOCK_N keys a step)");
}

void append_block_mask_args(std::vector<InterpArg>& args, HostBlockMask& lists, bool by_key) {
  if (by_key) {
    for (HostBuffer* b : {&lists.key_full_count, &lists.key_full_index, &lists.key_partial_count,
                          &lists.key_partial_index})
      args.push_back(InterpArg::ptr(*b));
    return;
  }
  for (HostBuffer* b : {&lists.full_count, &lists.full_index, &lists.partial_count, &lists.partial_index})
    args.push_back(InterpArg::ptr(*b));
}

Config block_mask_fwd_config(const BlockMaskLayout& l, const AttentionProblem& p, bool runs) {
  Config c = default_fa2_config(p);
  c.num_warps = static_cast<int>(std::clamp<int64_t>(l.block_m / 16, 1, c.num_warps));
  c.set("BLOCK_M", l.block_m).set("BLOCK_N", l.block_n);
  c.set("WARP_SPECIALIZE", 0).set("PINGPONG", 0).set("PRODUCT_AHEAD", 0).set("LAST_PRODUCT_LATE", 0);
  c.set("BLOCK_MASK_RUNS", runs ? 1 : 0);
  return c;
}

AttentionBwdConfigs block_mask_bwd_configs(const BlockMaskLayout& l, const AttentionProblem& p) {
  AttentionBwdConfigs c = default_bwd_configs(p);
  c.dkdv.set("BLOCK_M", l.block_m).set("BLOCK_N", l.block_n);
  c.dkdv.num_warps = static_cast<int>(std::clamp<int64_t>(l.block_n / 16, 1, c.dkdv.num_warps));
  c.dq.set("BLOCK_M", l.block_m).set("BLOCK_N", l.block_n);
  c.dq.num_warps = static_cast<int>(std::clamp<int64_t>(l.block_m / 16, 1, c.dq.num_warps));
  return c;
}

std::vector<int64_t> HostBlockMask::full_tiles(int64_t b, int64_t h, int64_t m) const {
  return list_of(full_count, full_index, layout, "query tile", layout.q_tiles(), layout.k_tiles(), b, h, m);
}

std::vector<int64_t> HostBlockMask::partial_tiles(int64_t b, int64_t h, int64_t m) const {
  return list_of(partial_count, partial_index, layout, "query tile", layout.q_tiles(), layout.k_tiles(), b, h,
                 m);
}

std::vector<int64_t> HostBlockMask::full_query_tiles(int64_t b, int64_t h, int64_t n) const {
  return list_of(key_full_count, key_full_index, layout, "key tile", layout.k_tiles(), layout.q_tiles(), b, h,
                 n);
}

std::vector<int64_t> HostBlockMask::partial_query_tiles(int64_t b, int64_t h, int64_t n) const {
  return list_of(key_partial_count, key_partial_index, layout, "key tile", layout.k_tiles(), layout.q_tiles(),
                 b, h, n);
}

HostBlockMask make_host_block_mask(const AttentionProblem& p, const AttentionMods& mods,
                                   const ModTensorValues& tensors, int64_t block_m, int64_t block_n,
                                   Executor executor) {
  HostBlockMask bm;
  bm.layout = block_mask_layout(p, mods, block_m, block_n);
  const BlockMaskLayout& l = bm.layout;
  // The mask mods' tensors; those of score mods and sinks are not read.
  const AttentionMods mask = block_mask_mods(mods);
  ModTensorValues mask_tensors;
  for (const ModTensorSpec& spec : mask.tensors())
    if (auto it = tensors.find(spec.tensor_name()); it != tensors.end())
      mask_tensors.insert(*it);
  check_mod_tensors(mask, mask_tensors, p);

  const KernelDef& def = attention_block_mask_def(mask);
  const std::vector<InterpArg> mod_args = mod_interp_args(p, mask, mask_tensors);
  // One orientation: per query tile the key tiles (rows = the query tiles), or per key tile the query tiles.
  auto classify = [&](bool by_key, HostBuffer& full_count, HostBuffer& full_index, HostBuffer& partial_count,
                      HostBuffer& partial_index) {
    const int64_t rows = by_key ? l.key_rows() : l.rows();
    const int64_t list_len = by_key ? l.q_tiles() : l.k_tiles();
    const char* prefix = by_key ? "key_" : "";
    full_count = HostBuffer(DType::i32, rows, std::string(prefix) + "full_count");
    full_index = HostBuffer(DType::i32, rows * list_len, std::string(prefix) + "full_index");
    partial_count = HostBuffer(DType::i32, rows, std::string(prefix) + "partial_count");
    partial_index = HostBuffer(DType::i32, rows * list_len, std::string(prefix) + "partial_index");
    if (rows == 0)
      return;
    std::vector<InterpArg> args = {InterpArg::ptr(full_count), InterpArg::ptr(full_index),
                                   InterpArg::ptr(partial_count), InterpArg::ptr(partial_index)};
    for (int64_t n : {p.B, p.H, p.H_KV, p.N_Q, p.N_K})
      args.push_back(InterpArg::of_int(n));
    args.insert(args.end(), mod_args.begin(), mod_args.end());
    Config config = def.default_config();
    config.set("BLOCK_M", block_m).set("BLOCK_N", block_n).set("CAUSAL", p.causal).set("BY_KEY", by_key);
    execute(executor, def.build(config), def.grid(config, attention_size_args(p)), args);
  };
  classify(false, bm.full_count, bm.full_index, bm.partial_count, bm.partial_index);
  classify(true, bm.key_full_count, bm.key_full_index, bm.key_partial_count, bm.key_partial_index);
  if (l.rows() == 0)
    return bm;

  HostBuffer non_runs(DType::i32, 1, "non_runs"); // zeroed
  std::vector<InterpArg> run_args = {InterpArg::ptr(bm.full_count), InterpArg::ptr(bm.full_index),
                                     InterpArg::ptr(bm.partial_count), InterpArg::ptr(bm.partial_index),
                                     InterpArg::ptr(non_runs), InterpArg::of_int(l.rows()),
                                     InterpArg::of_int(l.k_tiles())};
  const KernelDef& runs_def = attention_block_mask_runs_def();
  const Config runs_config = runs_def.default_config();
  execute(executor, runs_def.build(runs_config), runs_def.grid(runs_config, {{"ROWS", l.rows()}}), run_args);
  bm.runs = non_runs.get(0) == 0;
  return bm;
}

AttentionResult run_fa2_with_block_mask(const AttentionProblem& p, const AttentionMods& mods,
                                        const ModTensorValues& tensors, const HostBlockMask& bm,
                                        const Config& config, const AttentionInputs& in, Executor executor) {
  check_attention_problem(p);
  check_attention_config(p, config);
  check_mod_tensors(mods, tensors, p);
  check_block_mask(bm.layout, p, mods, &config);
  check_block_mask_fwd_config(config, bm.runs);
  AttentionInputs inputs = in;
  ModTensorValues mod_inputs = tensors;
  HostBlockMask lists = bm; // the kernel's arguments are mutable buffers
  AttentionOutputs out = make_outputs(p);
  std::vector<InterpArg> args = fa2_interp_args(p, inputs, out);
  const std::vector<InterpArg> mod_args = mod_interp_args(p, mods, mod_inputs);
  args.insert(args.end(), mod_args.begin(), mod_args.end());
  append_block_mask_args(args, lists, /*by_key=*/false);
  const KernelDef& def = fa2_fwd_block_mask_def(mods);
  execute(executor, def.build(config), def.grid(config, attention_size_args(p)), args);
  return gather_outputs(p, out);
}

AttentionGrads run_bwd_with_block_mask(const AttentionProblem& p, const AttentionMods& mods,
                                       const ModTensorValues& tensors, const HostBlockMask& bm,
                                       const AttentionBwdConfigs& configs, const AttentionInputs& in,
                                       const HostBuffer& dout, Executor executor) {
  check_attention_problem(p);
  check_mod_tensors(mods, tensors, p);
  check_block_mask(bm.layout, p, mods);
  check_block_mask_bwd_configs(bm.layout, &configs.dkdv, &configs.dq);
  AttentionBwdBuffers buffers = make_bwd_buffers(p, in, dout);
  set_forward_outputs(p, reference_with_mods(p, in, mods, tensors), buffers);
  ModTensorValues mod_inputs = tensors;
  HostBlockMask lists = bm; // the kernels' arguments are mutable buffers
  BwdLoopKernels kernels{&fa2_bwd_dkdv_block_mask_def(mods), &fa2_bwd_dq_block_mask_def(mods), {}, {}};
  kernels.dkdv_args = kernels.dq_args = mod_interp_args(p, mods, mod_inputs);
  append_block_mask_args(kernels.dkdv_args, lists, /*by_key=*/true);
  append_block_mask_args(kernels.dq_args, lists, /*by_key=*/false);
  run_bwd(p, configs, buffers, executor, kernels);
  return gather_grads(p, buffers);
}

} // namespace kiln
