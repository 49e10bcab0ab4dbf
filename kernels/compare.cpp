#include "kernels/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

bool same_nonfinite(double out, double ref) {
  if (std::isnan(ref)) // the reference says NaN (kiln's non-finite semantics: docs/guarantees.md)
    return std::isnan(out);
  return out == ref;
}
} // namespace

Comparison compare_to_reference(llvm::ArrayRef<double> out, llvm::ArrayRef<double> ref) {
  return compare_to_reference(out, ref, {});
}

Comparison compare_to_reference(llvm::ArrayRef<double> out, llvm::ArrayRef<double> ref,
                                llvm::ArrayRef<double> magnitude) {
  Comparison c;
  if (out.size() != ref.size()) {
    c.relative_error = kInf;
    c.nonfinite_mismatches = static_cast<int64_t>(std::max(out.size(), ref.size()));
    c.first_mismatch = static_cast<int64_t>(std::min(out.size(), ref.size()));
    return c;
  }
  double diff2 = 0, ref2 = 0, magnitude2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    bool mismatch = false;
    if (!std::isfinite(ref[i]))
      mismatch = !same_nonfinite(out[i], ref[i]);
    else if (!std::isfinite(out[i]))
      mismatch = true;
    else {
      double d = out[i] - ref[i];
      diff2 += d * d;
      ref2 += ref[i] * ref[i];
      if (i < magnitude.size())
        magnitude2 += magnitude[i] * magnitude[i];
    }
    if (mismatch) {
      if (c.first_mismatch < 0)
        c.first_mismatch = static_cast<int64_t>(i);
      ++c.nonfinite_mismatches;
    }
  }
  const double scale2 = std::max(ref2, magnitude2 / 16); // ‖magnitude‖ / 4, squared
  c.relative_error = scale2 > 0 ? std::sqrt(diff2 / scale2) : std::sqrt(diff2);
  return c;
}

double relative_error(llvm::ArrayRef<double> out, llvm::ArrayRef<double> ref) {
  Comparison c = compare_to_reference(out, ref);
  return c.nonfinite_mismatches > 0 ? kInf : c.relative_error;
}

std::string Comparison::str() const {
  std::string s = fmt::format("relative error {:.3e}, {} non-finite mismatches", relative_error, nonfinite_mismatches);
  if (first_mismatch >= 0)
    s += fmt::format(" (first at index {})", first_mismatch);
  return s;
}

std::string describe_nonfinite(const std::vector<NamedValues>& inputs) {
  std::string out;
  for (const NamedValues& in : inputs) {
    int64_t nans = 0, infs = 0;
    for (double v : in.values) {
      nans += std::isnan(v) ? 1 : 0;
      infs += std::isinf(v) ? 1 : 0;
    }
    if (nans == 0 && infs == 0)
      continue;
    std::string counts = nans > 0 && infs > 0 ? fmt::format("{} NaN and {} infinite", nans, infs)
                         : nans > 0           ? fmt::format("{} NaN", nans)
                                              : fmt::format("{} infinite", infs);
    out += fmt::format("{}{} holds {} of {} elements", out.empty() ? "" : "; ", in.name, counts, in.values.size());
  }
  return out;
}

double unit_roundoff(DType t, bool tf32) {
  switch (t) {
  case DType::f16: return std::ldexp(1.0, -11);
  case DType::bf16: return std::ldexp(1.0, -8);
  case DType::f32: return tf32 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -24);
  case DType::f64: return std::ldexp(1.0, -53);
  default: return 0; // integers are exact
  }
}

double tolerance(DType t, bool tf32) {
  double u = unit_roundoff(t, tf32);
  if (t == DType::f32 && !tf32)
    return 128 * u;
  if (t == DType::f64)
    return 1024 * u;
  return 8 * u;
}

std::vector<double> to_doubles(const HostBuffer& b) {
  std::vector<double> out(static_cast<size_t>(b.numel()));
  for (int64_t i = 0; i < b.numel(); ++i)
    out[static_cast<size_t>(i)] = b.get(i);
  return out;
}

} // namespace kiln
