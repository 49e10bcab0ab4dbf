// The median of a list of samples (timings, mostly): the middle one, or the mean of the middle two for an even
// count; NaN for none.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

namespace kiln {

inline double median(std::vector<double> samples) {
  if (samples.empty())
    return std::numeric_limits<double>::quiet_NaN();
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

} // namespace kiln
