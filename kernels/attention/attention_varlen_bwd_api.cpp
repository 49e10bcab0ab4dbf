#include "kernels/attention/attention_varlen_bwd_api.h"

#include "jit/jit_kernel.h"
#include "kernels/attention/attention_bwd_args.h"
#include "kernels/attention/attention_bwd_checks.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_bwd_steps.h"
#include "kernels/attention/attention_launch.h"
#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/fa2_bwd_varlen.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"

namespace kiln::attention {

using namespace detail;

namespace {

int64_t numel(const TensorRef& t) {
  int64_t n = 1;
  for (int64_t d : t.shape)
    n *= d;
  return n;
}

// `c` as a full config of `def` that agrees with the problem, else an error naming `what`.
Config checked_config(const char* what, const KernelDef& def, const Config& c, const AttentionProblem& p,
                      const ApiSite& site) {
  Config full;
  try {
    full = def.with_overrides(def.default_config(), c.params);
    full.num_warps = c.num_warps;
    full.num_stages = c.num_stages;
    def.check(full);
    check_attention_config(p, full);
  } catch (const Error& e) {
    reject(site,
           "{} ({}): {}; expected a config of {}, e.g. default_varlen_bwd_configs' with its tiles changed",
           what, c.str(), e.what(), def.name);
  }
  for (const char* tile : {"BLOCK_M", "BLOCK_N"})
    if (!c.params.count(tile))
      reject(site, "{} ({}) has no {}; expected a full config of {}", what, c.str(), tile, def.name);
  return full;
}

struct CheckedVarlenBackward {
  ValidatedVarlenBackward args;
  uint64_t dq_bytes = 0, dk_bytes = 0, dv_bytes = 0; // the gradients' extents, for the tuner's scratch copies
  std::vector<ByteRange> ranges; // every tensor with elements, for the workspace's overlap check
};

CheckedVarlenBackward check_varlen_backward(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                            const TensorRef& o, const TensorRef& lse, const TensorRef& dout,
                                            const TensorRef& dq, const TensorRef& dk, const TensorRef& dv,
                                            const VarlenBatch& batch, const BackwardOptions& options,
                                            const ApiSite& site) {
  AttentionOptions fwd_options = options; // options.config is the dK/dV kernel's, checked below
  fwd_options.config.reset();
  CheckedVarlenBackward checked;
  ValidatedVarlenBackward& r = checked.args;
  r.fwd = detail::validate_varlen_args(q, k, v, o, lse, batch, fwd_options, site);
  if (options.dsink)
    reject(site,
           "options.dsink (the sink logits' gradient) is not built for variable-length batches yet; expected "
           "no dsink (dq, dk and dv with a sink are: it enters through lse)");
  check_gradient_shapes(
      {{"dout", &dout, "q", &q}, {"dq", &dq, "q", &q}, {"dk", &dk, "k", &k}, {"dv", &dv, "v", &v}}, 3,
      "[total, heads, D]", q.dtype, site);
  check_bwd_variant(options, site);
  if (r.fwd.sizes.B == 0)
    return checked; // nothing is read or written

  // Inputs are read while the gradients are written; tensors without elements are neither.
  std::vector<TensorRange> inputs, outputs;
  for (auto [name, t] : {std::pair{"q", &q},
                         {"k", &k},
                         {"v", &v},
                         {"o", &o},
                         {"lse", &lse},
                         {"dout", &dout},
                         {"cu_seqlens_q", &batch.cu_seqlens_q},
                         {"cu_seqlens_k", &batch.cu_seqlens_k}})
    if (numel(*t) > 0)
      inputs.push_back({tensor_range(name, *t, site), t});
  for (auto [name, t] : {std::pair{"dout", &dout}, {"dq", &dq}, {"dk", &dk}, {"dv", &dv}}) {
    if (numel(*t) == 0)
      continue;
    check_gradient_rows(name, *t, site);
    if (std::string_view(name) == "dout")
      continue;
    check_elements_distinct(name, *t, site);
    outputs.push_back({tensor_range(name, *t, site), t});
  }
  check_gradient_overlaps(inputs, outputs, site);
  for (const std::vector<TensorRange>* list : {&inputs, &outputs})
    for (const TensorRange& t : *list)
      checked.ranges.push_back(t.range);
  for (const ValidatedModTensor& m : r.fwd.mod_tensors) // read while the gradients are written
    for (const auto& [out, t] : outputs)
      if (m.end > m.data && overlaps(ByteRange{"mod tensor", m.data, m.end}, out))
        reject(
            site,
            "mod tensor '{}' (bytes [{:#x}, {:#x})) overlaps {} (bytes [{:#x}, {:#x})); expected the mods' "
            "tensors apart from the gradients, which are written while they are read",
            m.name, m.data, m.end, out.name, out.first, out.end);
  for (const auto& [range, t] : outputs) {
    const uint64_t bytes = range.end - range.first;
    (t == &dq ? checked.dq_bytes : t == &dk ? checked.dk_bytes : checked.dv_bytes) = bytes;
  }
  auto packed = [](const TensorRef& t) { return PackedStrides{t.strides[0], t.strides[1]}; };
  r.dout = packed(dout), r.dq = packed(dq), r.dk = packed(dk), r.dv = packed(dv);
  r.dout_data = dout.data, r.dq_data = dq.data;
  r.dk_data = numel(dk) > 0 ? dk.data : 0, r.dv_data = numel(dv) > 0 ? dv.data : 0;
  if (options.config)
    (void)checked_config("options.config (the dK/dV kernel's)", fa2_bwd_dkdv_varlen_def(options.mods),
                         *options.config, r.fwd.shape, site);
  if (options.dq_config)
    (void)checked_config("options.dq_config", fa2_bwd_dq_varlen_def(options.mods), *options.dq_config,
                         r.fwd.shape, site);
  return checked;
}

// Every element of a packed [total, heads, D] tensor set to zero on `stream`: one memset for a dense tensor,
// else one per token (heads contiguous) or per (token, head).
void zero_packed(const char* name, const TensorRef& t, const rt::Stream& stream) {
  if (numel(t) == 0)
    return;
  const uint64_t elem = static_cast<uint64_t>(dtype_bytes(t.dtype));
  const int64_t heads = t.shape[1], D = t.shape[2];
  const bool heads_dense = heads == 1 || t.strides[1] == D;
  const bool all_dense = heads_dense && (t.shape[0] == 1 || t.strides[0] == heads * D);
  auto memset = [&](int64_t offset, int64_t count) {
    KILN_CU_CHECK(cuMemsetD8Async, fmt::format("zeroing {}", name),
                  t.data + static_cast<uint64_t>(offset) * elem, 0, static_cast<size_t>(count) * elem,
                  stream.handle());
  };
  if (all_dense)
    return memset(0, numel(t));
  for (int64_t i = 0; i < t.shape[0]; ++i) {
    if (heads_dense)
      memset(i * t.strides[0], heads * D);
    else
      for (int64_t h = 0; h < heads; ++h)
        memset(i * t.strides[0] + h * t.strides[1], D);
  }
}

std::vector<LaunchArg> varlen_bwd_launch_args(const ValidatedVarlenBackward& b, uint64_t delta,
                                              uint64_t dq_acc) {
  const ValidatedVarlen& a = b.fwd;
  const VarlenSizes& s = a.sizes;
  std::vector<LaunchArg> args;
  for (uint64_t ptr :
       {a.q, a.k, a.v, a.o, b.dout_data, *a.lse, delta, b.dq_data, b.dk_data, b.dv_data, dq_acc})
    args.push_back(LaunchArg::pointer(ptr));
  args.push_back(LaunchArg::of_float(a.shape.scale()));
  for (int64_t n : {s.B, s.H, s.H_KV, s.total_q, s.total_k, s.D})
    args.push_back(LaunchArg::of_int(n));
  for (const PackedStrides* t :
       {&a.strides.q, &a.strides.k, &a.strides.v, &a.strides.o, &b.dout, &b.dq, &b.dk, &b.dv})
    for (int64_t stride : {int64_t{0}, t->head, t->token}) // (batch: unused, head, sequence)
      args.push_back(LaunchArg::of_int(stride));
  args.push_back(LaunchArg::pointer(a.cu_seqlens_q));
  args.push_back(LaunchArg::pointer(a.cu_seqlens_k));
  return args;
}

} // namespace

ValidatedVarlenBackward validate_varlen_bwd_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                                 const TensorRef& o, const TensorRef& lse,
                                                 const TensorRef& dout, const TensorRef& dq,
                                                 const TensorRef& dk, const TensorRef& dv,
                                                 const VarlenBatch& batch, const BackwardOptions& options,
                                                 std::source_location where) {
  return check_varlen_backward(q, k, v, o, lse, dout, dq, dk, dv, batch, options,
                               ApiSite{"backward_varlen", where})
      .args;
}

uint64_t varlen_backward_workspace_bytes(const TensorRef& q, const BackwardOptions& options,
                                         std::source_location where) {
  const ApiSite site{"varlen_backward_workspace_bytes", where};
  check_rank("q", q, 3, "[total_q, H, D]", site); // negative sizes too
  return workspace_layout(1, q.shape[1], q.shape[0], q.shape[2], may_accumulate_dq(options), site).total;
}

namespace {

// The packed backward's kernels on `workspace`, for a call check_varlen_backward() accepted: enqueued on
// options.stream without a synchronization, except the offsets' copy when batch.check_offsets.
void enqueue_varlen_backward(const CheckedVarlenBackward& checked, const TensorRef& dk, const TensorRef& dv,
                             const BackwardWorkspace& workspace, const BackwardOptions& options,
                             const ApiSite& site) {
  const ValidatedVarlenBackward& b = checked.args;
  const ValidatedVarlen& a = b.fwd;
  const VarlenSizes& s = a.sizes;
  if (s.B == 0 || (s.total_q == 0 && s.total_k == 0))
    return;
  const WorkspaceLayout ws = workspace_layout(1, s.H, s.total_q, s.D, may_accumulate_dq(options), site);
  check_workspace(workspace, a.empty ? 0 : ws.total, "varlen_backward_workspace_bytes", checked.ranges, site);
  require_driver(site);
  rt::current_device(); // makes the context current before any copy or launch
  const rt::Stream stream = rt::Stream::wrap(options.stream);
  if (a.empty) { // no query rows: nothing flows back to the keys
    zero_packed("dk", dk, stream);
    zero_packed("dv", dv, stream);
    return;
  }
  const detail::OffsetsOnHost host = detail::read_checked_offsets(a, options.stream, site.entry, site.where);

  const uint64_t delta = workspace.data;                                      // f32 [H, total_q]
  const uint64_t dq_acc = ws.acc_offset ? workspace.data + ws.acc_offset : 0; // f32 [H, total_q, D]
  const std::vector<LaunchArg> args = varlen_bwd_launch_args(b, delta, dq_acc);
  std::vector<LaunchArg> modded_args = args; // dK/dV's and dQ's end in the mods' tensors
  append_mod_launch_args(a.mod_tensors, modded_args);
  const SizeArgs sizes = varlen_size_args(s);
  const double fwd_flops = varlen_flops(a, host);

  const rt::AutotuneMode mode = options.autotune ? *options.autotune : rt::autotune_mode_from_env();
  // `def` at `given`, or at the tuner's pick from `base` (timing on scratch copies of `outputs`); none where its
  // grid is empty (no rows, or no keys), which launches nothing.
  auto step = [&](const KernelDef& def, const std::optional<Config>& given, const Config& base,
                  const std::vector<OutputArg>& outputs, double flops,
                  const std::vector<LaunchArg>& args) -> std::optional<BwdStep> {
    const Config c = given ? checked_config("config", def, *given, a.shape, site) : base;
    const Grid grid = def.grid(c, sizes);
    if (grid[0] == 0 || grid[1] == 0)
      return std::nullopt;
    if (given)
      return fixed_step(def, c, sizes);
    return tuned_step(def, base, sizes, args, outputs, flops, mode);
  };
  auto ms = [](const std::optional<BwdStep>& st) { return st ? st->ms : std::optional<double>(0.0); };
  auto launch = [&](const std::optional<BwdStep>& st, const std::vector<LaunchArg>& args) {
    if (st)
      st->kernel->launch(st->grid, args, stream);
  };
  std::vector<OutputArg> dkdv_outputs, dq_outputs;
  for (auto [index, bytes] : {std::pair{kBwdArgDk, checked.dk_bytes}, {kBwdArgDv, checked.dv_bytes}})
    if (bytes > 0)
      dkdv_outputs.push_back({index, static_cast<size_t>(bytes), 0});
  if (checked.dq_bytes > 0)
    dq_outputs.push_back({kBwdArgDq, static_cast<size_t>(checked.dq_bytes), 0});
  std::vector<OutputArg> atomic_dkdv_outputs = dkdv_outputs; // and the accumulator's scratch copy
  if (ws.acc_offset)
    atomic_dkdv_outputs.push_back({kBwdArgDqAcc, static_cast<size_t>(ws.total - ws.acc_offset), 0});

  // The variant: options.config's ATOMIC_DQ when given; else, with deterministic = false and no dq_config, the
  // faster of the two as the tuner timed them (backward()'s rule); else the deterministic dQ kernel.
  const bool atomic_given = atomic_pair_given(options);
  const AttentionBwdConfigs defaults = default_bwd_configs(a.shape);
  const KernelDef& dkdv_def = fa2_bwd_dkdv_varlen_def(options.mods);
  const KernelDef& convert_def = fa2_bwd_dq_convert_varlen_def();
  const Config convert_config = varlen_config_of(convert_def, bwd_dq_convert_config(a.shape));
  std::optional<BwdStep> dkdv =
      step(dkdv_def, options.config, varlen_config_of(fa2_bwd_dkdv_varlen_def(), defaults.dkdv),
           atomic_given ? atomic_dkdv_outputs : dkdv_outputs,
           (atomic_given ? kAtomicDkdvFlops : kDkdvFlops) * fwd_flops, modded_args);
  std::optional<BwdStep> last =
      atomic_given ? step(convert_def, convert_config, convert_config, {}, 0, args)
                   : step(fa2_bwd_dq_varlen_def(options.mods), options.dq_config,
                          varlen_config_of(fa2_bwd_dq_varlen_def(), defaults.dq), dq_outputs,
                          kDqFlops * fwd_flops, modded_args);
  bool atomic = atomic_given;
  if (chooses_variant(options)) {
    const Config atomic_base =
        varlen_config_of(fa2_bwd_dkdv_varlen_def(), default_bwd_configs(a.shape, /*atomic_dq=*/true).dkdv);
    std::optional<BwdStep> atomic_dkdv =
        step(dkdv_def, std::nullopt, atomic_base, atomic_dkdv_outputs, kAtomicDkdvFlops * fwd_flops, modded_args);
    std::optional<BwdStep> convert = step(convert_def, std::nullopt, convert_config, dq_outputs, 0, args);
    // Both ways' preprocesses timed too: the atomic way's also zeroes the accumulator (backward()'s rule). They
    // write only the workspace, which the launches after the plan write again.
    auto preprocess = [&](bool atomic_dq) {
      const Config c = varlen_config_of(fa2_bwd_preprocess_varlen_def(),
                                        bwd_preprocess_config(a.shape, default_bwd_configs(a.shape, atomic_dq).dkdv));
      return step(fa2_bwd_preprocess_varlen_def(), std::nullopt, c, {}, 0, args);
    };
    if (atomic_pair_is_faster({ms(preprocess(false)), ms(dkdv), ms(last)},
                              {ms(preprocess(true)), ms(atomic_dkdv), ms(convert)})) {
      dkdv = std::move(atomic_dkdv);
      last = std::move(convert);
      atomic = true;
    }
  }
  // The preprocess writes Delta and, for the atomic pair, zeroes the accumulator its dK/dV adds to.
  const Config pre = varlen_config_of(fa2_bwd_preprocess_varlen_def(),
                                      bwd_preprocess_config(a.shape, default_bwd_configs(a.shape, atomic).dkdv));
  launch(step(fa2_bwd_preprocess_varlen_def(), pre, pre, {}, 0, args), args);
  launch(dkdv, modded_args);
  launch(last, atomic ? args : modded_args);
}

} // namespace

void backward_varlen_with_workspace(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                    const TensorRef& o, const TensorRef& lse, const TensorRef& dout,
                                    const TensorRef& dq, const TensorRef& dk, const TensorRef& dv,
                                    const VarlenBatch& batch, const BackwardWorkspace& workspace,
                                    const BackwardOptions& options, std::source_location where) {
  const ApiSite site{"backward_varlen", where};
  enqueue_varlen_backward(check_varlen_backward(q, k, v, o, lse, dout, dq, dk, dv, batch, options, site), dk,
                          dv, workspace, options, site);
}

void backward_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                     const TensorRef& lse, const TensorRef& dout, const TensorRef& dq, const TensorRef& dk,
                     const TensorRef& dv, const VarlenBatch& batch, const BackwardOptions& options,
                     std::source_location where) {
  const ApiSite site{"backward_varlen", where};
  // Validated first, so that a mistake is reported before anything is allocated (and without a GPU).
  const CheckedVarlenBackward checked =
      check_varlen_backward(q, k, v, o, lse, dout, dq, dk, dv, batch, options, site);
  const VarlenSizes& s = checked.args.fwd.sizes;
  if (s.B == 0 || (s.total_q == 0 && s.total_k == 0))
    return;
  require_driver(site);
  rt::current_device(); // makes the context current before the allocation
  const uint64_t needed =
      checked.args.fwd.empty ? 0 : workspace_layout(1, s.H, s.total_q, s.D, may_accumulate_dq(options), site).total;
  std::optional<rt::DeviceBuffer> scratch;
  if (needed > 0)
    scratch.emplace(needed);
  enqueue_varlen_backward(checked, dk, dv, BackwardWorkspace{scratch ? scratch->ptr() : 0, needed}, options,
                          site);
  rt::Stream::wrap(options.stream).synchronize(); // the scratch is freed on return (and dk, dv are written)
}

} // namespace kiln::attention
