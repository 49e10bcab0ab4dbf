#include "tools/npy_outputs.h"

#include "support/error.h"
#include "support/npy.h"

#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::cli {

std::string shape_text(const std::vector<int64_t>& s) {
  NpyArray a; // NumPy's spelling, as the files' shapes are printed
  a.shape = s;
  return a.shape_str();
}

std::pair<OutputPath, std::string> output_npy(const std::string& flag, const std::string& path, DType dt,
                                              const std::vector<int64_t>& shape,
                                              const std::vector<double>& values) {
  const double largest = dt == DType::f16   ? 65504.0
                         : dt == DType::f32 ? std::numeric_limits<float>::max()
                                            : std::numeric_limits<double>::max();
  int64_t beyond = 0;
  double worst = 0;
  for (double v : values)
    if (std::isfinite(v) && std::abs(v) > largest) {
      ++beyond;
      worst = std::max(worst, std::abs(v));
    }
  if (beyond > 0)
    fail("{} '{}': {} of its {} values lie beyond {}'s range (largest magnitude {:g}, {} holds at most {:g}) "
         "and would be written as infinity; use --out-dtype f32",
         flag, path, beyond, values.size(), dtype_name(dt), worst, dtype_name(dt), largest);
  return {OutputPath{flag, path}, serialize_npy(dt, shape, values)};
}

void write_outputs(const std::vector<std::pair<OutputPath, std::string>>& files) {
  OutputSet set;
  for (const auto& [output, bytes] : files)
    set.stage(output, bytes);
  for (const std::string& path : set.commit())
    llvm::outs() << "wrote " << path << "\n";
}

} // namespace kiln::cli
