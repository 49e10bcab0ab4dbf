// The attention host API's checks of options.mods and options.mod_tensors (attention_api.h lists them).
#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_fwd.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace kiln::attention::detail {

std::vector<ValidatedModTensor> validate_mod_tensors(const AttentionOptions& options,
                                                     const AttentionProblem& p,
                                                     const std::vector<ByteRange>* ranges,
                                                     const ApiSite& site) {
  const AttentionMods& mods = options.mods;
  if (mods.empty()) {
    if (!options.mod_tensors.empty())
      reject(
          site,
          "options.mod_tensors holds '{}', but options.mods is empty; expected no mod tensors without mods",
          options.mod_tensors.begin()->first);
    return {};
  }
  const std::string_view entry = site.entry;
  const bool backward = entry == "backward" || entry == "backward_varlen";
  if (entry != "forward" && entry != "tune_forward" && !backward && entry != "make_block_mask" &&
      entry != "forward_varlen")
    reject(site,
           "options.mods ({}) are not supported by {} yet; expected empty mods (forward(), backward(), "
           "forward_varlen() and backward_varlen() take them)",
           mods.name(), entry);
  if (options.exact_masked_v && !mods.mask.empty())
    reject(site,
           "options.exact_masked_v selects away the keys of the causal mask, not those of mask mods ({}); "
           "expected exact_masked_v = false with mask mods",
           mods.name());
  std::vector<ModTensorSpec> specs;
  try {
    // The mods' defs (once per distinct mods): a mod that breaks the rules, or that the backward cannot
    // differentiate, fails here, before any GPU work.
    (void)fa2_fwd_def(mods);
    if (backward)
      (void)fa2_bwd_dq_def(mods);
    specs = mods.tensors();
  } catch (const Error& e) {
    reject(site, "options.mods: {}", e.what());
  }
  const SizeArgs sizes = attention_size_args(p);
  std::vector<ValidatedModTensor> out;
  for (const ModTensorSpec& spec : specs) {
    auto it = options.mod_tensors.find(spec.tensor_name());
    if (it == options.mod_tensors.end())
      reject(site, "options.mods {} read a tensor '{}' ({} [{}]), which options.mod_tensors does not hold",
             mods.name(), spec.tensor_name(), dtype_name(spec.dtype), fmt::join(spec.dims, ", "));
    const TensorRef& t = it->second;
    if (t.dtype != spec.dtype)
      reject(site, "mod tensor '{}' has dtype {}; expected {}", spec.name, dtype_name(t.dtype),
             dtype_name(spec.dtype));
    ValidatedModTensor v{spec.name, spec.tensor_name(), t.data, {}, 0};
    try {
      v.strides = mod_tensor_strides(spec, t.shape, t.strides, sizes);
    } catch (const Error& e) {
      reject(site, "{}", e.what());
    }
    if (ranges) { // the problem is not empty: the kernel reads the tensor
      const uint64_t elem = static_cast<uint64_t>(dtype_bytes(spec.dtype));
      if (t.data == 0)
        reject(site, "mod tensor '{}' has a null data address; expected a device address", spec.name);
      if (t.data % elem != 0)
        reject(site, "mod tensor '{}''s address {:#x} is not a multiple of its element size, {} bytes",
               spec.name, t.data, elem);
      int64_t last = 0; // the offset of the last element the kernel may read
      for (size_t i = 0; i < v.strides.size(); ++i) {
        int64_t step = 0;
        if (__builtin_mul_overflow(sizes.at(spec.dims[i]) - 1, v.strides[i], &step) ||
            __builtin_add_overflow(last, step, &last) || last > (INT64_MAX / 8))
          reject(site, "mod tensor '{}' has strides {} whose extent overflows 64 bits", spec.name,
                 dims_str(t.strides));
      }
      const uint64_t end = static_cast<uint64_t>(last + 1) * elem;
      if (t.data + end < t.data)
        reject(site, "mod tensor '{}' at {:#x} extends past the end of the address space", spec.name, t.data);
      const ByteRange r{"mod tensor", t.data, t.data + end};
      v.end = t.data + end;
      for (size_t out_index = 3; out_index < ranges->size(); ++out_index)
        if (overlaps(r, (*ranges)[out_index]))
          reject(site,
                 "mod tensor '{}' (bytes [{:#x}, {:#x})) overlaps {}; expected inputs apart from the outputs",
                 spec.name, r.first, r.end, (*ranges)[out_index].name);
    }
    out.push_back(std::move(v));
  }
  for (const auto& [name, t] : options.mod_tensors)
    if (std::none_of(specs.begin(), specs.end(), [&](const ModTensorSpec& s) { return s.tensor_name() == name; }))
      reject(site, "options.mod_tensors holds '{}', which no mod of {} reads", name, mods.name());
  return out;
}

void append_mod_launch_args(const std::vector<ValidatedModTensor>& tensors, std::vector<LaunchArg>& args) {
  for (const ValidatedModTensor& t : tensors) {
    args.push_back(LaunchArg::pointer(t.data));
    for (int64_t s : t.strides)
      args.push_back(LaunchArg::of_int(s));
  }
}

} // namespace kiln::attention::detail
