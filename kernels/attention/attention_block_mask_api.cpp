#include "kernels/attention/attention_block_mask_api.h"

#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_block_mask_runs.h"
#include "kernels/attention/attention_launch.h"

#include <algorithm>

namespace kiln::attention {

using namespace detail;

std::array<uint64_t, 4> BlockMask::addresses() const {
  return {full_count.ptr(), full_index.ptr(), partial_count.ptr(), partial_index.ptr()};
}

std::array<uint64_t, 4> BlockMask::key_addresses() const {
  return {key_full_count.ptr(), key_full_index.ptr(), key_partial_count.ptr(), key_partial_index.ptr()};
}

HostBlockMask BlockMask::to_host() const {
  HostBlockMask h;
  h.layout = layout;
  h.runs = runs;
  const std::pair<const rt::DeviceBuffer*, HostBuffer*> lists[] = {{&full_count, &h.full_count},
                                                                   {&full_index, &h.full_index},
                                                                   {&partial_count, &h.partial_count},
                                                                   {&partial_index, &h.partial_index},
                                                                   {&key_full_count, &h.key_full_count},
                                                                   {&key_full_index, &h.key_full_index},
                                                                   {&key_partial_count, &h.key_partial_count},
                                                                   {&key_partial_index, &h.key_partial_index}};
  for (auto [device, host] : lists) {
    *host = HostBuffer(DType::i32, static_cast<int64_t>(device->bytes() / sizeof(int32_t)));
    device->copy_to_host(host->bytes.data(), device->bytes());
  }
  return h;
}

ValidatedBlockMask validate_block_mask_args(const BlockMaskSizes& sizes, const AttentionOptions& options,
                                            int64_t block_m, int64_t block_n, std::source_location where) {
  const ApiSite site{"make_block_mask", where};
  ValidatedBlockMask v;
  AttentionProblem& p = v.problem;
  p.B = sizes.B, p.H = sizes.H, p.H_KV = sizes.H_KV, p.N_Q = sizes.N_Q, p.N_K = sizes.N_K;
  for (auto [what, n] : {std::pair{"B", p.B}, {"H", p.H}, {"H_KV", p.H_KV}, {"N_Q", p.N_Q}, {"N_K", p.N_K}}) {
    if (n < 1)
      reject(site, "sizes.{} is {}; expected at least 1 (a block mask of an empty problem lists nothing)",
             what, n);
    check_size(what, n, site);
  }
  if (options.block_mask)
    reject(site, "options.block_mask is set; expected none (a block mask is built from the mods, not from "
                 "another block mask)");
  if (options.causal != Causal::None && options.causal != Causal::TopLeft &&
      options.causal != Causal::BottomRight)
    reject(site, "options.causal is {}; expected None, TopLeft or BottomRight",
           static_cast<int>(options.causal));
  p.causal = static_cast<int>(options.causal);
  try {
    v.layout = block_mask_layout(p, options.mods, block_m, block_n);
  } catch (const Error& e) {
    reject(site, "{}", e.what());
  }
  const std::vector<ByteRange> no_outputs;
  const std::vector<ValidatedModTensor> all = validate_mod_tensors(options, p, &no_outputs, site);
  for (const ModTensorSpec& spec : block_mask_mods(options.mods).tensors())
    for (const ValidatedModTensor& t : all)
      if (t.name == spec.name)
        v.mask_tensors.push_back(t);
  return v;
}

std::shared_ptr<const BlockMask> make_block_mask(const BlockMaskSizes& sizes, const AttentionOptions& options,
                                                 int64_t block_m, int64_t block_n,
                                                 std::source_location where) {
  const ApiSite site{"make_block_mask", where};
  const ValidatedBlockMask v = validate_block_mask_args(sizes, options, block_m, block_n, where);
  require_driver(site);
  rt::current_device();
  const BlockMaskLayout& l = v.layout;
  auto bm = std::make_shared<BlockMask>();
  bm->layout = l;
  const rt::Stream stream = rt::Stream::wrap(options.stream);
  const AttentionProblem& p = v.problem;
  std::vector<LaunchArg> sizes_and_tensors;
  for (int64_t n : {p.B, p.H, p.H_KV, p.N_Q, p.N_K})
    sizes_and_tensors.push_back(LaunchArg::of_int(n));
  for (const ValidatedModTensor& t : v.mask_tensors) {
    sizes_and_tensors.push_back(LaunchArg::pointer(t.data));
    for (int64_t s : t.strides)
      sizes_and_tensors.push_back(LaunchArg::of_int(s));
  }
  const KernelDef& def = attention_block_mask_def(options.mods);
  // One orientation: per query tile the key tiles, or (by_key) per key tile the query tiles.
  auto classify = [&](bool by_key, rt::DeviceBuffer& full_count, rt::DeviceBuffer& full_index,
                      rt::DeviceBuffer& partial_count, rt::DeviceBuffer& partial_index) {
    const size_t count_bytes = static_cast<size_t>(by_key ? l.key_rows() : l.rows()) * sizeof(int32_t);
    const size_t list_len = static_cast<size_t>(by_key ? l.q_tiles() : l.k_tiles());
    full_count = rt::DeviceBuffer(count_bytes);
    partial_count = rt::DeviceBuffer(count_bytes);
    full_index = rt::DeviceBuffer(count_bytes * list_len);
    partial_index = rt::DeviceBuffer(count_bytes * list_len);
    // Entries past a list's count are never written; the kernels read a list's first entry even when it is
    // empty (to tell a run of tiles from a list), so they start as zeros rather than whatever memory held.
    full_index.fill_bytes_async(0, stream);
    partial_index.fill_bytes_async(0, stream);
    std::vector<LaunchArg> args;
    for (const rt::DeviceBuffer* list : {&full_count, &full_index, &partial_count, &partial_index})
      args.push_back(LaunchArg::pointer(list->ptr()));
    args.insert(args.end(), sizes_and_tensors.begin(), sizes_and_tensors.end());
    Config config = def.default_config();
    config.set("BLOCK_M", l.block_m).set("BLOCK_N", l.block_n).set("CAUSAL", l.causal).set("BY_KEY", by_key);
    compiled_for(def, config)->launch(def.grid(config, attention_size_args(p)), args, stream);
  };
  classify(false, bm->full_count, bm->full_index, bm->partial_count, bm->partial_index);
  classify(true, bm->key_full_count, bm->key_full_index, bm->key_partial_count, bm->key_partial_index);

  // Whether every list is a run: one i32 counted on the device and read back.
  rt::DeviceBuffer non_runs(sizeof(int32_t));
  non_runs.fill_bytes_async(0, stream);
  std::vector<LaunchArg> run_args;
  for (uint64_t list : bm->addresses())
    run_args.push_back(LaunchArg::pointer(list));
  run_args.push_back(LaunchArg::pointer(non_runs));
  run_args.push_back(LaunchArg::of_int(l.rows()));
  run_args.push_back(LaunchArg::of_int(l.k_tiles()));
  const KernelDef& runs_def = attention_block_mask_runs_def();
  const Config runs_config = runs_def.default_config();
  compiled_for(runs_def, runs_config)->launch(runs_def.grid(runs_config, {{"ROWS", l.rows()}}), run_args, stream);
  stream.synchronize();
  int32_t count = 0;
  non_runs.copy_to_host(&count, sizeof(count));
  bm->runs = count == 0;
  return bm;
}

Config block_mask_default_config(const BlockMask& bm, const AttentionProblem& p) {
  return block_mask_fwd_config(bm.layout, p, bm.runs);
}

std::vector<uint64_t> detail::validate_block_mask(const AttentionOptions& options, const AttentionProblem& p,
                                                  const ApiSite& site) {
  if (!options.block_mask)
    return {};
  const std::string_view entry = site.entry;
  if (entry != "forward" && entry != "tune_forward" && entry != "backward")
    reject(site,
           "options.block_mask is not supported by {} yet; expected no block mask (forward(), tune_forward() and "
           "backward() take one; varlen and FA1 do not)",
           site.entry);
  const BlockMask& bm = *options.block_mask;
  try {
    check_block_mask(bm.layout, p, options.mods, options.config ? &*options.config : nullptr);
    if (options.config)
      check_block_mask_fwd_config(*options.config, bm.runs);
  } catch (const Error& e) {
    reject(site, "options.block_mask: {}", e.what());
  }
  const std::array<uint64_t, 4> a = bm.addresses();
  return {a.begin(), a.end()};
}

} // namespace kiln::attention
