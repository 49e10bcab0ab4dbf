// The .npy outputs of the commands that run kernels on files (`attention`, `run`): values serialised in the
// dtype asked for, refused before anything is written when a finite value lies beyond that dtype's range, and
// written as one set, all or nothing (support/output_set.h; docs/guarantees.md, "Files").
#pragma once

#include "dsl/dtype.h"
#include "support/output_set.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cli {

// "(2, 3)", as NumPy prints a shape.
std::string shape_text(const std::vector<int64_t>& shape);

// `values` as the .npy bytes of `flag`'s file in `dt` (f16, f32 or f64), refused when a finite value lies
// beyond what `dt` holds (f16 above 65504 would be written as inf after a check that passed on the f32
// values).
std::pair<OutputPath, std::string> output_npy(const std::string& flag, const std::string& path, DType dt,
                                              const std::vector<int64_t>& shape,
                                              const std::vector<double>& values);

// Writes `files` as one set (all or nothing), and prints "wrote PATH" for each.
void write_outputs(const std::vector<std::pair<OutputPath, std::string>>& files);

} // namespace kiln::cli
