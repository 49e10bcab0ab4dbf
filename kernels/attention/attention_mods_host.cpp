#include "kernels/attention/attention_mod_references.h"

#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_preprocess.h"
#include "kernels/attention/fa2_bwd_sink.h"
#include "kernels/attention/fa2_fwd.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

namespace kiln {

const KernelDef& def_with_mods(const KernelDef& def, const AttentionMods& mods,
                               Kernel (*build)(const Config&, const AttentionMods&), bool differentiated,
                               PruneWithMods prune) {
  if (mods.empty())
    return def;
  // One def per kernel and distinct mods (identity_key()), kept for the process's life like the kernels
  // compiled from it: the identity builds the mods and hashes their IR, which a repeated call must not pay for
  // again. A failure (a mod that breaks the rules) is not kept: it is raised on every call.
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, KernelDef> defs;
  const std::pair<std::string, std::string> key{def.name, mods.identity_key()};
  {
    std::lock_guard lock(mutex);
    if (auto it = defs.find(key); it != defs.end())
      return it->second;
  }
  if (differentiated) // the backward's kernels multiply dS by the score mods' derivatives
    mods.check_differentiable();
  KernelDef d = def;
  // The identity (names and a hash of the mods' IR) keys the in-process kernels, the tuning results and the
  // progress lines; the compile cache keys the generated source, which the mods change anyway.
  d.name += "[" + mods.identity() + "]";
  d.summary += " with mods " + mods.name();
  d.build = [mods, build](const Config& c) { return build(c, mods); };
  if (prune)
    d.prune = [mods, prune](const Config& c, const SizeArgs& s) { return prune(c, s, mods); };
  std::lock_guard lock(mutex);
  return defs.try_emplace(key, std::move(d)).first->second; // where two threads raced, the first one's
}

const KernelDef& fa2_fwd_def(const AttentionMods& mods) {
  return def_with_mods(fa2_fwd_def(), mods, build_fa2_fwd_with_mods, false, fa2_fwd_prune);
}

const KernelDef& fa2_bwd_dkdv_def(const AttentionMods& mods) {
  return def_with_mods(fa2_bwd_dkdv_def(), mods, build_fa2_bwd_dkdv_with_mods, true);
}

const KernelDef& fa2_bwd_dq_def(const AttentionMods& mods) {
  return def_with_mods(fa2_bwd_dq_def(), mods, build_fa2_bwd_dq_with_mods, true);
}

ModTensorData contiguous_mod_tensor(DType dtype, std::vector<int64_t> shape, const std::string& name) {
  ModTensorData t;
  t.strides.assign(shape.size(), 0);
  int64_t n = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    t.strides[i] = n;
    n *= std::max<int64_t>(shape[i], 1);
  }
  t.shape = std::move(shape);
  t.data = HostBuffer(dtype, n, name);
  return t;
}

std::vector<int64_t> mod_tensor_strides(const ModTensorSpec& spec, llvm::ArrayRef<int64_t> shape,
                                        llvm::ArrayRef<int64_t> strides, const SizeArgs& sizes) {
  std::string want;
  for (const std::string& d : spec.dims)
    want += fmt::format("{}{}={}", want.empty() ? "" : ", ", d, sizes.at(d));
  // A tensor read along other dims too is named with the dims of this read.
  const std::string what = spec.given_as.empty()
                               ? fmt::format("'{}'", spec.name)
                               : fmt::format("'{}' (read along [{}])", spec.given_as, fmt::join(spec.dims, ", "));
  if (shape.size() != spec.dims.size() || strides.size() != spec.dims.size())
    fail("mod tensor {} has {} dims ({} strides); expected {} dims [{}]", what, shape.size(), strides.size(),
         spec.dims.size(), want);
  std::vector<int64_t> out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t size = sizes.at(spec.dims[i]);
    if (shape[i] != size && shape[i] != 1)
      fail("mod tensor {} has extent {} in dim {} ({}); expected {} or 1 (broadcast), the shape being [{}]",
           what, shape[i], i, spec.dims[i], size, want);
    if (strides[i] < 0)
      fail("mod tensor {} has stride {} in dim {}; expected a non-negative stride", what, strides[i], i);
    out[i] = shape[i] == 1 ? 0 : strides[i];
  }
  return out;
}

void check_mod_tensors(const AttentionMods& mods, const ModTensorValues& tensors, const AttentionProblem& p) {
  check_mod_tensors(mods, tensors, attention_size_args(p));
}

void check_mod_tensors(const AttentionMods& mods, const ModTensorValues& tensors, const SizeArgs& sizes) {
  const std::vector<ModTensorSpec> specs = mods.tensors();
  for (const ModTensorSpec& spec : specs) {
    auto it = tensors.find(spec.tensor_name());
    if (it == tensors.end())
      fail("attention mods {} read a tensor '{}', which was not given", mods.name(), spec.tensor_name());
    const ModTensorData& t = it->second;
    if (t.data.dtype != spec.dtype)
      fail("mod tensor '{}' has dtype {}; expected {}", spec.name, dtype_name(t.data.dtype),
           dtype_name(spec.dtype));
    const std::vector<int64_t> strides = mod_tensor_strides(spec, t.shape, t.strides, sizes);
    int64_t last = 0;
    for (size_t i = 0; i < strides.size(); ++i)
      last += (sizes.at(spec.dims[i]) - 1) * strides[i];
    if (last >= t.data.numel())
      fail("mod tensor '{}' holds {} elements, but its strides reach element {}", spec.name, t.data.numel(),
           last);
  }
  for (const auto& [name, t] : tensors)
    if (std::none_of(specs.begin(), specs.end(), [&](const ModTensorSpec& s) { return s.tensor_name() == name; }))
      fail("mod tensor '{}' was given, but no mod of {} reads it", name, mods.name());
}

ModReferences::ModReferences(const AttentionProblem& p, const AttentionMods& mods,
                             const ModTensorValues& tensors)
    : ModReferences(mods, tensors, attention_size_args(p)) {}

ModReferences::ModReferences(const AttentionMods& mods, const ModTensorValues& tensors,
                             const SizeArgs& tensor_sizes)
    : mods_(mods), tensors_(tensors) {
  check_mod_tensors(mods, tensors, tensor_sizes);
  for (const ScoreMod& m : mods.score)
    if (!m.reference)
      fail("score_mod '{}' has no reference; the double-precision reference needs one for every mod", m.name);
  for (const MaskMod& m : mods.mask)
    if (!m.reference)
      fail("mask_mod '{}' has no reference; the double-precision reference needs one for every mod", m.name);
  for (const SinkMod& m : mods.sink)
    if (!m.reference)
      fail("sink '{}' has no reference; the double-precision reference needs one for every mod", m.name);
  for (const ModTensorSpec& spec : mods.tensors()) {
    const ModTensorData& t = tensors.at(spec.tensor_name());
    strides_[spec.name] = mod_tensor_strides(spec, t.shape, t.strides, tensor_sizes);
  }
  pt_.N_Q = tensor_sizes.at("N_Q"), pt_.N_K = tensor_sizes.at("N_K");
  pt_.H = tensor_sizes.at("H"), pt_.H_KV = tensor_sizes.at("H_KV");
  pt_.at = [this](const std::string& name, std::initializer_list<int64_t> index) {
    const std::vector<int64_t>& s = strides_.at(name);
    int64_t offset = 0;
    size_t d = 0;
    for (int64_t i : index)
      offset += i * s.at(d++);
    return tensors_.at(name).data.get(offset);
  };
}

void ModReferences::set_lengths(int64_t n_q, int64_t n_k) { pt_.N_Q = n_q, pt_.N_K = n_k; }

double ModReferences::score(int64_t b, int64_t h, int64_t i, int64_t j, double s) {
  s = score_mods(b, h, i, j, s);
  for (const MaskMod& m : mods_.mask)
    if (!m.reference(pt_))
      return -std::numeric_limits<double>::infinity();
  return s;
}

double ModReferences::score_derivative(int64_t b, int64_t h, int64_t i, int64_t j, double s) {
  // A central difference of the references (independent of the kernel's derivative, which differentiates
  // the DSL ops).
  if (mods_.score.empty())
    return 1.0;
  const double step = 1e-5 * std::max(1.0, std::abs(s));
  return (score_mods(b, h, i, j, s + step) - score_mods(b, h, i, j, s - step)) / (2 * step);
}

double ModReferences::sink(int64_t b, int64_t h, int64_t i) {
  pt_.b = b, pt_.h = h, pt_.q_idx = i, pt_.kv_idx = 0;
  return mods_.sink.empty() ? -std::numeric_limits<double>::infinity() : mods_.sink[0].reference(pt_);
}

double ModReferences::score_mods(int64_t b, int64_t h, int64_t i, int64_t j, double s) {
  pt_.b = b, pt_.h = h, pt_.q_idx = i, pt_.kv_idx = j;
  for (const ScoreMod& m : mods_.score)
    s = m.reference(s, pt_);
  return s;
}

AttentionResult reference_with_mods(const AttentionProblem& p, const AttentionInputs& in,
                                    const AttentionMods& mods, const ModTensorValues& tensors) {
  ModReferences ref(p, mods, tensors);
  return reference_with_mods(p, logical_tensors(p, in), ref);
}

AttentionResult reference_with_mods(const AttentionProblem& p, const AttentionTensors64& t, ModReferences& ref,
                                    int64_t first_b) {
  AttentionResult r;
  if (p.N_K == 0) { // no key (a packed sequence's): O = 0, LSE = −inf before the sink
    r.o.assign(static_cast<size_t>(p.B * p.H * p.N_Q * p.D), 0.0);
    r.lse.assign(static_cast<size_t>(p.B * p.H * p.N_Q), -std::numeric_limits<double>::infinity());
  } else {
    r = reference_forward(p, t, [&](int64_t b, int64_t h, int64_t i, int64_t j, double s) {
      return ref.score(first_b + b, h, i, j, s);
    });
  }
  // A sink is one more term in each row's denominator: LSE' = logaddexp(LSE, sink).
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.N_Q; ++i) {
        const double s = ref.sink(first_b + b, h, i);
        const size_t row = static_cast<size_t>((b * p.H + h) * p.N_Q + i);
        const double lse = r.lse[row];
        if (std::isnan(lse) || s == -std::numeric_limits<double>::infinity())
          continue;
        const double hi = std::max(lse, s);
        const double merged = hi + std::log(std::exp(lse - hi) + std::exp(s - hi));
        const double keep = std::exp(lse - merged); // the keys' share of the new denominator
        for (int64_t d = 0; d < p.D; ++d)
          r.o[row * static_cast<size_t>(p.D) + static_cast<size_t>(d)] *= keep;
        r.lse[row] = merged;
      }
  return r;
}

ReferenceScoreFn mod_score_reference(const AttentionProblem& p, const AttentionMods& mods,
                                     const ModTensorValues& tensors) {
  if (!mods.sink.empty())
    fail("mod_score_reference: the sink '{}' is not a score of the matrix; expected mods without a sink",
         mods.sink[0].name);
  auto ref = std::make_shared<ModReferences>(p, mods, tensors);
  return [ref](int64_t b, int64_t h, int64_t i, int64_t j, double s) { return ref->score(b, h, i, j, s); };
}

AttentionGrads reference_backward_with_mods(const AttentionProblem& p, const AttentionInputs& in,
                                            const HostBuffer& dout, const AttentionMods& mods,
                                            const ModTensorValues& tensors) {
  ModReferences ref(p, mods, tensors);
  return reference_backward_with_mods(p, logical_bwd_tensors(p, in, dout), ref);
}

AttentionGrads reference_backward_with_mods(const AttentionProblem& p, const AttentionTensors64& t,
                                            ModReferences& ref, int64_t first_b) {
  ReferenceBackwardScores scores;
  scores.lse = reference_with_mods(p, t, ref, first_b).lse;
  scores.score = [&](int64_t b, int64_t h, int64_t i, int64_t j, double s) {
    return ref.score(first_b + b, h, i, j, s);
  };
  scores.derivative = [&](int64_t b, int64_t h, int64_t i, int64_t j, double s) {
    return ref.score_derivative(first_b + b, h, i, j, s);
  };
  return reference_backward(p, t, scores);
}

std::vector<double> reference_sink_gradient(const AttentionProblem& p, const AttentionInputs& in,
                                            const HostBuffer& dout, const AttentionMods& mods,
                                            const ModTensorValues& tensors) {
  std::vector<double> grad(static_cast<size_t>(p.B * p.H * p.N_Q), 0.0);
  if (mods.sink.empty())
    return grad;
  const AttentionResult fwd = reference_with_mods(p, in, mods, tensors);
  const AttentionTensors64 t = logical_bwd_tensors(p, in, dout);
  ModReferences ref(p, mods, tensors);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.N_Q; ++i) {
        const size_t row = static_cast<size_t>((b * p.H + h) * p.N_Q + i);
        const double sink = ref.sink(b, h, i);
        if (sink == -std::numeric_limits<double>::infinity())
          continue;
        double delta = 0;
        for (int64_t d = 0; d < p.D; ++d)
          delta += t.dout[row * static_cast<size_t>(p.D) + static_cast<size_t>(d)] *
                   fwd.o[row * static_cast<size_t>(p.D) + static_cast<size_t>(d)];
        grad[row] = -std::exp(sink - fwd.lse[row]) * delta;
      }
  return grad;
}

std::vector<double> run_bwd_sink_gradient(const AttentionProblem& p, const AttentionMods& mods,
                                          const ModTensorValues& tensors, const AttentionInputs& in,
                                          const HostBuffer& dout, bool per_head, Executor executor) {
  check_mod_tensors(mods, tensors, p);
  AttentionBwdBuffers buffers = make_bwd_buffers(p, in, dout);
  set_forward_outputs(p, reference_with_mods(p, in, mods, tensors), buffers);
  ModTensorValues mod_inputs = tensors;
  const SizeArgs sizes = attention_size_args(p);
  std::vector<InterpArg> args = fa2_bwd_interp_args(p, buffers);
  const Config pre = bwd_preprocess_config(p, default_bwd_configs(p).dkdv);
  execute(executor, build_fa2_bwd_preprocess(pre), fa2_bwd_preprocess_def().grid(pre, sizes), args);
  const std::vector<InterpArg> mod_args = mod_interp_args(p, mods, mod_inputs);
  args.insert(args.end(), mod_args.begin(), mod_args.end());
  HostBuffer dsink(DType::f32, per_head ? p.H : p.B * p.H * p.N_Q, "DSINK");
  poison(dsink);
  args.push_back(InterpArg::ptr(dsink));
  const KernelDef& def = fa2_bwd_sink_def(mods);
  const Config config = fa2_bwd_sink_config(p, per_head);
  execute(executor, def.build(config), def.grid(config, sizes), args);
  std::vector<double> out(static_cast<size_t>(dsink.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = dsink.get(static_cast<int64_t>(i));
  return out;
}

std::vector<InterpArg> mod_interp_args(const AttentionProblem& p, const AttentionMods& mods,
                                       ModTensorValues& tensors) {
  return mod_interp_args(attention_size_args(p), mods, tensors);
}

std::vector<InterpArg> mod_interp_args(const SizeArgs& sizes, const AttentionMods& mods,
                                       ModTensorValues& tensors) {
  std::vector<InterpArg> args;
  for (const ModTensorSpec& spec : mods.tensors()) {
    ModTensorData& t = tensors.at(spec.tensor_name());
    args.push_back(InterpArg::ptr(t.data));
    for (int64_t s : mod_tensor_strides(spec, t.shape, t.strides, sizes))
      args.push_back(InterpArg::of_int(s));
  }
  return args;
}

AttentionResult run_fa2_with_mods(const AttentionProblem& p, const AttentionMods& mods,
                                  const ModTensorValues& tensors, const Config& config,
                                  const AttentionInputs& in, Executor executor) {
  check_attention_problem(p);
  check_attention_config(p, config);
  check_mod_tensors(mods, tensors, p);
  AttentionInputs inputs = in;
  ModTensorValues mod_inputs = tensors;
  AttentionOutputs out = make_outputs(p);
  std::vector<InterpArg> args = fa2_interp_args(p, inputs, out);
  const std::vector<InterpArg> mod_args = mod_interp_args(p, mods, mod_inputs);
  args.insert(args.end(), mod_args.begin(), mod_args.end());
  const SizeArgs sizes = attention_size_args(p);
  const KernelDef& def = fa2_fwd_def(mods);
  execute(executor, def.build(config), def.grid(config, sizes), args);
  return gather_outputs(p, out);
}

AttentionGrads run_bwd_with_mods(const AttentionProblem& p, const AttentionMods& mods,
                                 const ModTensorValues& tensors, const AttentionBwdConfigs& configs,
                                 const AttentionInputs& in, const HostBuffer& dout, Executor executor) {
  check_mod_tensors(mods, tensors, p);
  AttentionBwdBuffers buffers = make_bwd_buffers(p, in, dout);
  set_forward_outputs(p, reference_with_mods(p, in, mods, tensors), buffers);
  ModTensorValues mod_inputs = tensors;
  run_bwd(p, configs, buffers, executor, mods, mod_interp_args(p, mods, mod_inputs));
  return gather_grads(p, buffers);
}

} // namespace kiln
