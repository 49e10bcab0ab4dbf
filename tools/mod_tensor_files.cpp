#include "tools/mod_tensor_files.h"

#include "support/error.h"
#include "support/npy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace kiln {

ModTensorValues read_mod_tensor_files(const std::vector<std::string>& args, const AttentionMods& mods) {
  const std::vector<ModTensorSpec> specs = mods.tensors();
  ModTensorValues out;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
      fail("--mod-tensor '{}': expected NAME=FILE.npy", arg);
    const std::string name = arg.substr(0, eq), path = arg.substr(eq + 1);
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&](const ModTensorSpec& s) { return s.tensor_name() == name; });
    if (spec == specs.end()) {
      std::vector<std::string> read;
      for (const ModTensorSpec& s : specs)
        if (std::find(read.begin(), read.end(), s.tensor_name()) == read.end())
          read.push_back(s.tensor_name());
      fail("--mod-tensor '{}': no mod reads a tensor '{}'; the mods {} read [{}]", arg, name, mods.name(),
           fmt::join(read, ", "));
    }
    if (out.count(name))
      fail("--mod-tensor '{}': the tensor '{}' is given twice; expected each name once", arg, name);
    const NpyArray a = read_npy(path, [&](const NpyArray& header) {
      if (header.shape.size() != spec->dims.size())
        fail("--mod-tensor '{}': {} has {} dims {}; the mods read '{}' with {} indices [{}]", arg, path,
             header.shape.size(), header.shape_str(), name, spec->dims.size(), fmt::join(spec->dims, ", "));
      if (is_int(spec->dtype) && header.is_float())
        fail("--mod-tensor '{}': {} holds {}; the mods read '{}' as {}, so expected an integer array", arg,
             path, header.dtype_str(), name, dtype_name(spec->dtype));
    });
    ModTensorData t = contiguous_mod_tensor(spec->dtype, a.shape, name);
    for (int64_t i = 0; i < a.numel(); ++i)
      t.data.set(i, a.values[static_cast<size_t>(i)]);
    out.emplace(name, std::move(t));
  }
  return out;
}

} // namespace kiln
