#include "kernels/attention/attention_sink_grad_api.h"

#include "kernels/attention/attention_launch.h"
#include "kernels/attention/fa2_bwd_sink.h"
#include "runtime/cuda_driver.h"

namespace kiln::attention::detail {

std::optional<SinkGradTarget> validate_sink_grad(const BackwardOptions& options, const AttentionProblem& p,
                                                 const std::vector<ByteRange>& ranges,
                                                 const std::vector<ValidatedModTensor>& mod_tensors,
                                                 const ApiSite& site) {
  if (!options.dsink)
    return std::nullopt;
  const TensorRef& t = *options.dsink;
  if (options.mods.sink.empty())
    reject(
        site,
        "options.dsink (the sink logits' gradient) is given, but options.mods ({}) have no sink; expected a "
        "SinkMod in options.mods.sink, or no dsink",
        options.mods.empty() ? "none" : options.mods.name());
  const SinkMod& sink = options.mods.sink[0];
  if (t.dtype != DType::f32)
    reject(site, "options.dsink has dtype {}; expected f32", dtype_name(t.dtype));
  const llvm::SmallVector<int64_t, 4> rows = {p.B, p.H, p.N_Q}, heads = {p.H};
  const bool per_head = t.shape.size() == 1;
  if (t.shape != rows && t.shape != heads)
    reject(site,
           "options.dsink has shape {}; expected [B, H, N_Q] = {} (each row's sink gradient) or [H] = {} (a "
           "per-head sink's)",
           dims_str(t.shape), dims_str(rows), dims_str(heads));
  if (per_head && !sink.per_head)
    reject(
        site,
        "options.dsink is [H], a per-head gradient, but the sink '{}' is not per head (SinkMod::per_head is "
        "false: it may differ by batch or row); expected [B, H, N_Q] = {}, each row's gradient",
        sink.name, dims_str(rows));
  if (t.strides.size() != t.shape.size())
    reject(site, "options.dsink has {} strides for {} dims; expected one stride per dim", t.strides.size(),
           t.shape.size());
  int64_t dense = 1, numel = 1; // row-major strides, dims of extent 1 aside
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.strides[d] != dense)
      reject(site, "options.dsink has strides {}; expected dense row-major strides for shape {}",
             dims_str(t.strides), dims_str(t.shape));
    dense *= t.shape[d];
  }
  numel = dense;
  SinkGradTarget target{t.data, per_head, static_cast<uint64_t>(numel) * sizeof(float)};
  if (numel == 0)
    return target;
  if (t.data == 0 || t.data % sizeof(float) != 0)
    reject(site, "options.dsink's address {:#x} is {}; expected a 4-byte aligned device address", t.data,
           t.data == 0 ? "null" : "not 4-byte aligned");
  const ByteRange mine{"options.dsink", t.data, t.data + target.bytes};
  for (const ByteRange& theirs : ranges)
    if (overlaps(mine, theirs))
      reject(
          site,
          "options.dsink (bytes [{:#x}, {:#x})) overlaps {} (bytes [{:#x}, {:#x})); expected memory of its "
          "own",
          mine.first, mine.end, theirs.name, theirs.first, theirs.end);
  for (const ValidatedModTensor& m : mod_tensors)
    if (m.end > m.data && overlaps(mine, ByteRange{"mod tensor", m.data, m.end}))
      reject(site,
             "options.dsink (bytes [{:#x}, {:#x})) overlaps mod tensor '{}'; expected memory of its own",
             mine.first, mine.end, m.name);
  return target;
}

void launch_sink_grad(const SinkGradTarget& target, const AttentionProblem& p, const AttentionMods& mods,
                      std::vector<LaunchArg> args, const rt::Stream& stream) {
  const KernelDef& def = fa2_bwd_sink_def(mods);
  const Config config = fa2_bwd_sink_config(p, target.per_head);
  args.push_back(LaunchArg::pointer(target.data));
  compiled_for(def, config)->launch(def.grid(config, attention_size_args(p)), args, stream);
}

void zero_sink_grad(const SinkGradTarget& target, const rt::Stream& stream) {
  if (target.per_head && target.bytes > 0)
    KILN_CU_CHECK(cuMemsetD8Async, "zeroing options.dsink", target.data, 0, static_cast<size_t>(target.bytes),
                  stream.handle());
}

} // namespace kiln::attention::detail
