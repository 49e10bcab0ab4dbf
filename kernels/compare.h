// Comparing a kernel's output with its double-precision reference: the relative L2 error, exact
// agreement on non-finite reference values (a row with no visible key has LSE = -inf), and the
// tolerance each dtype earns. Shared by every kernel's tests and by the GPU checks.
#pragma once

#include "dsl/dtype.h"
#include "dsl/host_buffer.h"

#include <llvm/ADT/ArrayRef.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// ‖out − ref‖₂ / ‖ref‖₂ over the elements where ref is finite. When ‖ref‖₂ is 0 the absolute
// ‖out − ref‖₂ is returned instead (so an exact zero output scores 0 and anything else scores its
// size). Infinity when the sizes differ or any element fails compare_to_reference's non-finite rule.
double relative_error(llvm::ArrayRef<double> out, llvm::ArrayRef<double> ref);

struct Comparison {
  double relative_error = 0;   // over the elements where ref is finite
  int64_t nonfinite_mismatches = 0; // ref is ±inf/NaN and out is not the same, or ref is finite and out is not
  int64_t first_mismatch = -1; // index of the first non-finite mismatch, -1 when none
  bool ok(double tolerance) const { return nonfinite_mismatches == 0 && relative_error <= tolerance; }
  std::string str() const; // "relative error 1.2e-04, 0 non-finite mismatches"
};

// Compares elementwise: a non-finite reference value must be matched exactly (−inf by −inf, NaN by NaN: a
// NaN reference is what kiln's non-finite semantics give, docs/guarantees.md), and every other element enters
// the relative error. A NaN in `out` where the reference is finite is a mismatch (outputs start as NaN, so an
// element never written is one).
Comparison compare_to_reference(llvm::ArrayRef<double> out, llvm::ArrayRef<double> ref);

// As above, for a result that is a sum of terms which may cancel (an attention gradient: dS = P ∘ (dP − Delta)
// sums to zero along each row). Finite-precision errors scale with the terms, not with their sum, so the
// error is measured against max(‖ref‖₂, ‖magnitude‖₂ / 4), where `magnitude` is the same sum taken over the
// terms' absolute values: where the terms cancel to less than a quarter of their size, the error is
// relative to that quarter. With magnitude == |ref| this is compare_to_reference.
Comparison compare_to_reference(llvm::ArrayRef<double> out, llvm::ArrayRef<double> ref,
                                llvm::ArrayRef<double> magnitude);

// One input of a checked run, by name, for describe_nonfinite.
struct NamedValues {
  const char* name;
  std::vector<double> values;
};

// "Q holds 3 NaN and 1 infinite of 256 elements; V holds 2 NaN of 256 elements": the inputs holding a
// non-finite value, or "" when every value is finite. A check prints it beside its comparisons, so that
// non-finite mismatches that follow from the inputs are not read as a fault of the kernel.
std::string describe_nonfinite(const std::vector<NamedValues>& inputs);

// The unit roundoff of the precision a kernel's products are formed in: 2^-11 for f16 and tf32
// (10 stored mantissa bits), 2^-8 for bf16, 2^-24 for f32.
double unit_roundoff(DType t, bool tf32 = false);

// The relative L2 error a kernel with inputs of dtype `t` may show against a double reference.
// Derived from the unit roundoff u: 16-bit operands (and tf32) are rounded once on the way into the
// tensor core and the output is rounded once more on store, so the error is a few u: 8u gives
// f16/tf32 3.9e-3 and bf16 3.1e-2. Exact f32 accumulates in f32 over up to thousands of terms and
// through exp2, whose error grows with the size of the scores; 128u (7.6e-6) leaves that headroom
// while still failing any real bug (a wrong mask or a missed rescale shows as > 1e-2).
double tolerance(DType t, bool tf32 = false);

// Every element of `b` as a double, for comparisons.
std::vector<double> to_doubles(const HostBuffer& b);

} // namespace kiln
