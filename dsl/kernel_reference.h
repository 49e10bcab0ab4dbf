// What a kernel's author may register beside its build function so that `run --check` (tools/run_command.cpp)
// can test it on the user's own inputs: the tensor shape of each buffer argument, in the kernel's size
// arguments, and a double-precision reference that computes the expected outputs from the inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln {

// The integer sizes a launch rule and a tuning key read (sequence lengths, batch, ...), by name.
using SizeArgs = std::map<std::string, int64_t>;

// The dims of a buffer argument, each the name of one of the kernel's size arguments: {"n_rows", "n_cols"} is
// an [n_rows, n_cols] tensor in C order. `run` reads and writes .npy files of this shape and infers sizes that
// --shape leaves out from the files it is given.
using TensorDims = std::vector<std::string>;

// One run of a kernel as its reference sees it, everything by the kernel's parameter names.
struct ReferenceInputs {
  SizeArgs sizes;                                     // every size argument
  std::map<std::string, double> scalars;              // every scalar argument, as passed to the kernel
  std::map<std::string, std::vector<double>> tensors; // every buffer before the run, in C order (as declared)

  const std::vector<double>& tensor(const std::string& name) const; // a kiln::Error naming it when absent
  double scalar(const std::string& name) const;                     // likewise
  int64_t size(const std::string& name) const;                      // likewise
};

// The expected contents of the buffers the kernel writes, by name, in C order; each is compared with as many
// leading elements of the kernel's buffer.
using ReferenceOutputs = std::map<std::string, std::vector<double>>;
using KernelReferenceFn = std::function<ReferenceOutputs(const ReferenceInputs&)>;

} // namespace kiln
