// `kiln attention --mod-tensor NAME=FILE.npy`: the tensors that the --mod mods read (a bias, document ids, a mod
// expression's own tensors), read from .npy files. Each file's shape is the tensor's (dims of extent 1 broadcast,
// as for mod_tensors in C++ and Python) and its values are rounded to the dtype the mods read it as.
#pragma once

#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_mods_host.h"

#include <string>
#include <vector>

namespace kiln {

// The tensors `args` ("NAME=FILE.npy" each) give for `mods`, by name. A kiln::Error naming the argument and what
// was expected for: a malformed argument, a name given twice, a name no mod reads, a file that cannot be read or
// whose dims are not as many as the mods' reads index, and a float file for an integer tensor. Whether the
// shapes fit the problem is checked where the mods run (check_mod_tensors).
ModTensorValues read_mod_tensor_files(const std::vector<std::string>& args, const AttentionMods& mods);

} // namespace kiln
