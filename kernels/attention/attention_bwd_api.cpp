#include "kernels/attention/attention_bwd_api.h"

#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_bwd_checks.h"
#include "kernels/attention/attention_block_mask_api.h"
#include "kernels/attention/attention_bwd_args.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_bwd_space.h"
#include "kernels/attention/attention_bwd_steps.h"
#include "kernels/attention/attention_launch.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/attention_sink_grad_api.h"
#include "kernels/attention/fa2_bwd_block_mask.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_dq_convert.h"
#include "kernels/attention/fa2_bwd_preprocess.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"

#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace kiln::attention {

using namespace detail;

namespace {

// `c` with the kernel's defaults for the params it leaves out (e.g. ATOMIC_DQ).
Config completed(const KernelDef& def, const Config& c) {
  Config full = def.with_overrides(def.default_config(), c.params);
  full.num_warps = c.num_warps;
  full.num_stages = c.num_stages;
  def.check(full);
  return full;
}

// `c`, a config for `def`, names only its params, has its tiles and agrees with the problem.
void check_bwd_config(const char* what, const KernelDef& def, const Config& c, const AttentionProblem& p,
                      const char* suggestion, const ApiSite& site) {
  try {
    (void)completed(def, c);
  } catch (const Error& e) {
    reject(site, "{} ({}): {}", what, c.str(), e.what());
  }
  for (const char* tile : {"BLOCK_M", "BLOCK_N"})
    if (!c.params.count(tile))
      reject(site, "{} ({}) has no {}; expected a full config, e.g. {} with its tiles changed", what, c.str(),
             tile, suggestion);
  try {
    check_attention_config(p, c);
  } catch (const Error& e) {
    reject(site, "{}: {}", what, e.what());
  }
  if (std::string why = &def == &fa2_bwd_dkdv_def() ? why_not_warp_specialized_dkdv(c, p.H, p.H_KV) : "";
      !why.empty())
    reject(site, "{} ({}): {}", what, c.str(), why);
}

std::vector<LaunchArg> bwd_launch_args(const ValidatedBackward& b, uint64_t delta, uint64_t dq_acc) {
  const ValidatedAttention& a = b.fwd;
  const AttentionProblem& p = a.problem;
  std::vector<LaunchArg> args;
  for (uint64_t ptr :
       {a.q, a.k, a.v, a.o, b.dout_data, *a.lse, delta, b.dq_data, b.dk_data, b.dv_data, dq_acc})
    args.push_back(LaunchArg::pointer(ptr));
  args.push_back(LaunchArg::of_float(p.scale()));
  for (int64_t n : {p.B, p.H, p.H_KV, p.N_Q, p.N_K, p.D})
    args.push_back(LaunchArg::of_int(n));
  for (const TensorStrides* t :
       {&a.strides.q, &a.strides.k, &a.strides.v, &a.strides.o, &b.dout, &b.dq, &b.dk, &b.dv})
    for (int64_t s : {t->b, t->h, t->n})
      args.push_back(LaunchArg::of_int(s));
  return args;
}

// Every element of `t` set to zero on `stream`: one memset per run of contiguous elements (one in all for a
// dense tensor).
void zero_tensor(const char* name, const TensorRef& t, const rt::Stream& stream) {
  for (int64_t n : t.shape)
    if (n == 0)
      return;
  int64_t run = 1; // elements of the innermost contiguous run
  size_t outer = t.shape.size();
  while (outer > 0 && (t.shape[outer - 1] == 1 || t.strides[outer - 1] == run))
    run *= t.shape[--outer];
  const uint64_t elem = static_cast<uint64_t>(dtype_bytes(t.dtype));
  std::vector<int64_t> index(outer, 0);
  for (;;) {
    int64_t offset = 0;
    for (size_t i = 0; i < outer; ++i)
      offset += index[i] * t.strides[i];
    KILN_CU_CHECK(cuMemsetD8Async, fmt::format("zeroing {}", name),
                  t.data + static_cast<uint64_t>(offset) * elem, 0, static_cast<size_t>(run) * elem,
                  stream.handle());
    size_t d = outer;
    while (d > 0 && ++index[d - 1] == t.shape[d - 1])
      index[--d] = 0;
    if (d == 0)
      return;
  }
}

WorkspaceLayout workspace_layout(const AttentionProblem& p, const BackwardOptions& options, const ApiSite& site) {
  return workspace_layout(p.B, p.H, p.N_Q, p.D, may_accumulate_dq(options), site);
}

// validate_attention_bwd_args()'s result and the byte ranges it measured, which the workspace check and the
// tuner's scratch copies read again: each tensor's extent is computed once per call.
struct CheckedBackward {
  ValidatedBackward args;
  // The tensors with elements (q, k, v, o, lse, dout, then dq, dk, dv; only dk, dv when N_Q == 0; none when
  // B == 0), each with its name.
  std::vector<ByteRange> ranges;
  std::optional<SinkGradTarget> dsink; // options.dsink, checked

  // Whether the call has nothing to run: no batch, and no [H] sink gradient to zero.
  bool nothing_to_do() const {
    return args.fwd.problem.B == 0 && !(dsink && dsink->per_head && dsink->bytes > 0);
  }

  uint64_t bytes_of(std::string_view name) const {
    for (const ByteRange& r : ranges)
      if (name == r.name)
        return r.end - r.first;
    throw InternalError(fmt::format("attention::backward: no byte range was measured for {}", name));
  }
};

CheckedBackward check_backward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                               const TensorRef& lse, const TensorRef& dout, const TensorRef& dq,
                               const TensorRef& dk, const TensorRef& dv, const BackwardOptions& options,
                               const ApiSite& site);

} // namespace

uint64_t backward_workspace_bytes(const TensorRef& q, const BackwardOptions& options, std::source_location where) {
  const ApiSite site{"backward_workspace_bytes", where};
  const LayoutInfo layout = parse_layout(options.layout, site);
  check_rank("q", q, 4, layout.names, site); // negative sizes too
  return workspace_layout(q.shape[0], q.shape[static_cast<size_t>(layout.head_dim_index)],
                          q.shape[static_cast<size_t>(layout.seq_dim)], q.shape[3], may_accumulate_dq(options),
                          site)
      .total;
}

ValidatedBackward validate_attention_bwd_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                              const TensorRef& o, const TensorRef& lse, const TensorRef& dout,
                                              const TensorRef& dq, const TensorRef& dk, const TensorRef& dv,
                                              const BackwardOptions& options, std::source_location where) {
  return check_backward(q, k, v, o, lse, dout, dq, dk, dv, options, ApiSite{"backward", where}).args;
}

namespace {

CheckedBackward check_backward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                               const TensorRef& lse, const TensorRef& dout, const TensorRef& dq,
                               const TensorRef& dk, const TensorRef& dv, const BackwardOptions& options,
                               const ApiSite& site) {
  // The forward's checks of q, k, v, o, lse; options.config is the dK/dV kernel's, checked below.
  AttentionOptions fwd_options = options;
  fwd_options.config.reset();
  CheckedBackward checked;
  ValidatedBackward& r = checked.args;
  r.fwd = detail::validate_attention_args(q, k, v, o, lse, fwd_options, site);
  const AttentionProblem& p = r.fwd.problem;
  const LayoutInfo layout = parse_layout(options.layout, site);

  check_gradient_shapes(
      {{"dout", &dout, "q", &q}, {"dq", &dq, "q", &q}, {"dk", &dk, "k", &k}, {"dv", &dv, "v", &v}}, 4,
      layout.names, q.dtype, site);
  check_bwd_variant(options, site);

  if (p.B == 0) { // no tensor has an element but an [H] dsink
    checked.dsink = validate_sink_grad(options, p, {}, r.fwd.mod_tensors, site);
    return checked;
  }
  // With N_Q == 0 only dk and dv have elements (backward() zeroes them); q, k, v, o, lse are not read.
  std::vector<std::pair<const char*, const TensorRef*>> inputs, outputs;
  if (r.fwd.empty) {
    outputs = {{"dk", &dk}, {"dv", &dv}};
  } else {
    inputs = {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"lse", &lse}, {"dout", &dout}};
    outputs = {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}};
    check_gradient_rows("dout", dout, site);
  }
  std::vector<TensorRange> read, written;
  for (auto [name, t] : inputs)
    read.push_back({tensor_range(name, *t, site), t});
  for (auto [name, t] : outputs) {
    written.push_back({tensor_range(name, *t, site), t});
    check_gradient_rows(name, *t, site);
    check_elements_distinct(name, *t, site);
  }
  check_gradient_overlaps(read, written, site);
  std::vector<ByteRange>& ranges = checked.ranges; // inputs, then outputs
  for (const auto& list : {read, written})
    for (const TensorRange& r : list)
      ranges.push_back(r.range);
  const size_t first_output = read.size();
  for (const ValidatedModTensor& m : r.fwd.mod_tensors) // the mods' tensors are read while gradients are written
    for (size_t out = first_output; out < ranges.size(); ++out)
      if (m.end > m.data && overlaps(ByteRange{"mod tensor", m.data, m.end}, ranges[out]))
        reject(site,
               "mod tensor '{}' (bytes [{:#x}, {:#x})) overlaps {} (bytes [{:#x}, {:#x})); expected the mods' "
               "tensors apart from the gradients, which are written while they are read",
               m.name, m.data, m.end, ranges[out].name, ranges[out].first, ranges[out].end);
  checked.dsink = validate_sink_grad(options, p, ranges, r.fwd.mod_tensors, site);
  if (checked.dsink && checked.dsink->bytes > 0) // kept apart from the workspace too
    ranges.push_back(ByteRange{"options.dsink", checked.dsink->data, checked.dsink->data + checked.dsink->bytes});
  r.dk = layout_strides(dk, layout), r.dv = layout_strides(dv, layout);
  r.dk_data = dk.data, r.dv_data = dv.data;
  if (r.fwd.empty)
    return checked;
  r.dout = layout_strides(dout, layout), r.dq = layout_strides(dq, layout);
  r.dout_data = dout.data, r.dq_data = dq.data;

  if (options.config)
    check_bwd_config("options.config (the dK/dV kernel's)", fa2_bwd_dkdv_def(), *options.config, p,
                     "default_bwd_configs(problem).dkdv", site);
  if (options.dq_config)
    check_bwd_config("options.dq_config", fa2_bwd_dq_def(), *options.dq_config, p,
                     "default_bwd_configs(problem).dq", site);
  if (options.block_mask) { // its sizes and mods were checked with the forward's; here the configs' tiles
    try {
      check_block_mask_bwd_configs(options.block_mask->layout, options.config ? &*options.config : nullptr,
                                   options.dq_config ? &*options.dq_config : nullptr);
    } catch (const Error& e) {
      reject(site, "options.block_mask: {}", e.what());
    }
  }
  return checked;
}

// The backward's three kernels for one call, in launch order, each ready to launch.
struct BwdPlan {
  BwdStep pre, dkdv, last;
};

// The backward's launch arguments for dK/dV and dQ: `args`, then the mods' tensors (the preprocess and the dQ
// convert do not read them).
std::vector<LaunchArg> with_mod_tensor_args(const ValidatedBackward& b, const std::vector<LaunchArg>& args) {
  std::vector<LaunchArg> out = args;
  append_mod_launch_args(b.fwd.mod_tensors, out);
  return out;
}

// The kernels and configs for a call check_backward() accepted (a non-empty problem): options' configs where
// given, else the tuner's picks in `mode` (tuning launches run on `args`).
BwdPlan plan_backward(const CheckedBackward& checked, const std::vector<LaunchArg>& args,
                      const WorkspaceLayout& ws, const BackwardOptions& options, rt::AutotuneMode mode) {
  const AttentionProblem& p = checked.args.fwd.problem;
  const SizeArgs sizes = attention_size_args(p);
  if (options.block_mask) { // at the block mask's tiles, not tuned, deterministic (attention_block_mask_api.h)
    const AttentionBwdConfigs defaults = block_mask_bwd_configs(options.block_mask->layout, p);
    const KernelDef& dkdv_def = fa2_bwd_dkdv_block_mask_def(options.mods);
    const KernelDef& dq_def = fa2_bwd_dq_block_mask_def(options.mods);
    BwdStep dkdv = fixed_step(dkdv_def, completed(dkdv_def, options.config ? *options.config : defaults.dkdv), sizes);
    BwdStep dq = fixed_step(dq_def, completed(dq_def, options.dq_config ? *options.dq_config : defaults.dq), sizes);
    BwdStep pre = fixed_step(fa2_bwd_preprocess_def(), bwd_preprocess_config(p, dkdv.config), sizes);
    return BwdPlan{std::move(pre), std::move(dkdv), std::move(dq)};
  }
  // The variant: options.config's ATOMIC_DQ when given; else, with deterministic = false and no dq_config,
  // the faster of the two as the tuner timed them; else the deterministic dQ kernel.
  const bool atomic_given = atomic_pair_given(options);
  const size_t dq_acc_bytes = static_cast<size_t>(ws.total - ws.acc_offset);
  const std::vector<LaunchArg> modded_args = with_mod_tensor_args(checked.args, args);
  const KernelDef& dkdv_def = fa2_bwd_dkdv_def(options.mods);
  const KernelDef& dq_def = fa2_bwd_dq_def(options.mods);
  const double flops = attention_flops(p);

  // Tuning launches write scratch copies of the gradients (and of the accumulator), never the caller's.
  auto bytes = [&](std::string_view name) { return static_cast<size_t>(checked.bytes_of(name)); };
  auto dkdv_outputs = [&](bool atomic) {
    std::vector<OutputArg> outs = {{kBwdArgDk, bytes("dk"), 0}, {kBwdArgDv, bytes("dv"), 0}};
    if (atomic)
      outs.push_back({kBwdArgDqAcc, dq_acc_bytes, 0});
    return outs;
  };
  const std::vector<OutputArg> dq_outputs = {{kBwdArgDq, bytes("dq"), 0}};
  const AttentionBwdConfigs defaults = default_bwd_configs(p);

  BwdStep dkdv = options.config ? fixed_step(dkdv_def, completed(dkdv_def, *options.config), sizes)
                                : tuned_step(dkdv_def, defaults.dkdv, sizes, modded_args, dkdv_outputs(false),
                                             kDkdvFlops * flops, mode);
  BwdStep last = atomic_given ? fixed_step(fa2_bwd_dq_convert_def(), bwd_dq_convert_config(p), sizes)
                 : options.dq_config
                     ? fixed_step(dq_def, completed(dq_def, *options.dq_config), sizes)
                     : tuned_step(dq_def, defaults.dq, sizes, modded_args, dq_outputs, kDqFlops * flops, mode);
  if (chooses_variant(options)) {
    BwdStep atomic_dkdv = tuned_step(dkdv_def, default_bwd_configs(p, /*atomic_dq=*/true).dkdv, sizes,
                                     modded_args, dkdv_outputs(true), kAtomicDkdvFlops * flops, mode);
    BwdStep convert =
        tuned_step(fa2_bwd_dq_convert_def(), bwd_dq_convert_config(p), sizes, args, dq_outputs, 0, mode);
    // Both ways' preprocesses timed too: the atomic way's also zeroes the accumulator (worklog §114). They write
    // only the workspace, which the launches after the plan write again.
    auto preprocess = [&](const BwdStep& dkdv_step) {
      return tuned_step(fa2_bwd_preprocess_def(), bwd_preprocess_config(p, dkdv_step.config), sizes, args, {}, 0,
                        mode);
    };
    if (atomic_pair_is_faster({preprocess(dkdv).ms, dkdv.ms, last.ms},
                              {preprocess(atomic_dkdv).ms, atomic_dkdv.ms, convert.ms})) {
      dkdv = std::move(atomic_dkdv);
      last = std::move(convert);
    }
  }
  BwdStep pre = fixed_step(fa2_bwd_preprocess_def(), bwd_preprocess_config(p, dkdv.config), sizes);
  return BwdPlan{std::move(pre), std::move(dkdv), std::move(last)};
}

// plan_backward()'s plan for a call like this one, kept while the tuner's picks stay as they were: a repeated
// call (same problem, options' configs, variant rule and autotune mode) then derives no config and asks the
// tuner nothing, one lookup as the forward's select() is. Force re-tunes every call: it keeps no plan.
std::shared_ptr<const BwdPlan> planned_backward(const CheckedBackward& checked,
                                                const std::vector<LaunchArg>& args, const WorkspaceLayout& ws,
                                                const BackwardOptions& options) {
  const rt::AutotuneMode mode = options.autotune ? *options.autotune : rt::autotune_mode_from_env();
  if (mode == rt::AutotuneMode::Force || options.block_mask) // a block mask's plan asks the tuner nothing
    return std::make_shared<const BwdPlan>(plan_backward(checked, args, ws, options, mode));
  // Everything plan_backward() reads but the tuner's memory: the problem (sizes, dtype, flags), the configs
  // given, the variant rule, the mods and the mode. The workspace's accumulator follows from the options.
  std::string key = checked.args.fwd.problem.str();
  fmt::format_to(std::back_inserter(key), "|det={}|{}|", options.deterministic, rt::autotune_mode_name(mode));
  key += options.mods.identity_key() + "|";
  if (options.config)
    options.config->append_str(key);
  key += "|";
  if (options.dq_config)
    options.dq_config->append_str(key);

  struct Kept {
    uint64_t picks_version;
    std::shared_ptr<const BwdPlan> plan;
  };
  static std::mutex mutex;
  static std::map<std::string, Kept> plans;
  KernelTuner& tuner = attention_tuner();
  const uint64_t version = tuner.picks_version(); // read before the selects: a pick they store makes it stale
  {
    std::lock_guard lock(mutex);
    if (auto it = plans.find(key); it != plans.end() && it->second.picks_version == version)
      return it->second.plan;
  }
  auto plan = std::make_shared<const BwdPlan>(plan_backward(checked, args, ws, options, mode));
  std::lock_guard lock(mutex);
  plans[key] = Kept{version, plan};
  return plan;
}

// The backward's kernels on `workspace`, for a call check_backward() accepted (dk, dv: the caller's, zeroed
// when N_Q == 0).
void enqueue_backward(const CheckedBackward& checked, const TensorRef& dk, const TensorRef& dv,
                      const BackwardWorkspace& workspace, const BackwardOptions& options,
                      const ApiSite& site) {
  const ValidatedBackward& b = checked.args;
  const AttentionProblem& p = b.fwd.problem;
  if (checked.nothing_to_do())
    return;
  const WorkspaceLayout ws = workspace_layout(p, options, site);
  check_workspace(workspace, b.fwd.empty ? 0 : ws.total, "backward_workspace_bytes", checked.ranges, site);
  require_driver(site);
  rt::current_device(); // makes the context current before any launch
  const rt::Stream stream = rt::Stream::wrap(options.stream);
  if (p.B == 0 || b.fwd.empty) { // N_Q == 0: no query sees a key, so nothing flows back to K, V or a sink
    zero_tensor("dk", dk, stream);
    zero_tensor("dv", dv, stream);
    if (checked.dsink)
      zero_sink_grad(*checked.dsink, stream);
    return;
  }
  const uint64_t delta = workspace.data;                                      // f32 [B, H, N_Q]
  const uint64_t dq_acc = ws.acc_offset ? workspace.data + ws.acc_offset : 0; // f32 [B, H, N_Q, D]
  const std::vector<LaunchArg> args = bwd_launch_args(b, delta, dq_acc);
  const std::shared_ptr<const BwdPlan> plan = planned_backward(checked, args, ws, options);
  // The step after dK/dV is dQ (the mods' arguments) or, with ATOMIC_DQ=1, the dQ convert (the plain ones).
  const std::vector<LaunchArg> modded_args = with_mod_tensor_args(b, args);
  const bool last_is_dq = plan->dkdv.config.get_or("ATOMIC_DQ", 0) == 0;
  plan->pre.kernel->launch(plan->pre.grid, args, stream);
  if (checked.dsink) // reads the Delta the preprocess wrote
    launch_sink_grad(*checked.dsink, p, options.mods, modded_args, stream);
  if (options.block_mask) { // dK/dV reads the by-key lists, dQ the forward's, after the mods' tensors
    auto with_lists = [&](const std::array<uint64_t, 4>& lists) {
      std::vector<LaunchArg> all = modded_args;
      for (uint64_t list : lists)
        all.push_back(LaunchArg::pointer(list));
      return all;
    };
    plan->dkdv.kernel->launch(plan->dkdv.grid, with_lists(options.block_mask->key_addresses()), stream);
    plan->last.kernel->launch(plan->last.grid, with_lists(options.block_mask->addresses()), stream);
    return;
  }
  plan->dkdv.kernel->launch(plan->dkdv.grid, modded_args, stream);
  plan->last.kernel->launch(plan->last.grid, last_is_dq ? modded_args : args, stream);
}

} // namespace

void backward_with_workspace(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                             const TensorRef& lse, const TensorRef& dout, const TensorRef& dq,
                             const TensorRef& dk, const TensorRef& dv, const BackwardWorkspace& workspace,
                             const BackwardOptions& options, std::source_location where) {
  const ApiSite site{"backward", where};
  enqueue_backward(check_backward(q, k, v, o, lse, dout, dq, dk, dv, options, site), dk, dv, workspace,
                   options, site);
}

void backward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
              const TensorRef& lse, const TensorRef& dout, const TensorRef& dq, const TensorRef& dk,
              const TensorRef& dv, const BackwardOptions& options, std::source_location where) {
  const ApiSite site{"backward", where};
  // Validated first, so that a mistake is reported before anything is allocated (and without a GPU).
  const CheckedBackward checked = check_backward(q, k, v, o, lse, dout, dq, dk, dv, options, site);
  const ValidatedBackward& b = checked.args;
  if (checked.nothing_to_do())
    return;
  require_driver(site);
  rt::current_device(); // makes the context current before the allocation
  const uint64_t needed = b.fwd.empty ? 0 : workspace_layout(b.fwd.problem, options, site).total;
  std::optional<rt::DeviceBuffer> scratch;
  if (needed > 0)
    scratch.emplace(needed);
  enqueue_backward(checked, dk, dv, BackwardWorkspace{scratch ? scratch->ptr() : 0, needed}, options, site);
  rt::Stream::wrap(options.stream).synchronize(); // the workspace is freed on return
}

} // namespace kiln::attention
