// Reductions, scans and sorts along one axis of a tile held row-major: the interpreter's rules for Reduce,
// ArgMax, Scan and Sort, in one place so that the two families agree (the generated code follows them; see `interpret`).
// - float sums accumulate in double and round once to the dtype (a scan rounds each prefix once);
// - max/min ignore NaN unless every element combined so far is NaN (CUDA's fmaxf/fminf); argmax gives the
//   first index of the maximum, skipping NaN (0 when all are NaN);
// - integer sums and products wrap to the dtype's width; float products accumulate in double like sums;
// - a user combine (ReduceOp::Combine) runs its region on the scalars in scan order, left to right
//   (dsl/combine_eval.h), each of its ops rounding to its dtype.
#pragma once

#include "dsl/ir.h"

#include <cstdint>
#include <vector>

namespace kiln {

// Runs a Reduce or ArgMax op `op` of kernel `k` whose operand has values xf (float dtypes) or xi (integer
// dtypes); writes the result's values to out_f or out_i (ArgMax: out_i), resized to fit.
void reduce_along_axis(const Kernel& k, const Op& op, const std::vector<double>& xf,
                       const std::vector<int64_t>& xi, std::vector<double>& out_f,
                       std::vector<int64_t>& out_i);

// Runs a Scan op `op` the same way: the result has x's shape and dtype.
void scan_along_axis(const Kernel& k, const Op& op, const std::vector<double>& xf,
                     const std::vector<int64_t>& xi, std::vector<double>& out_f, std::vector<int64_t>& out_i);

// Runs a Sort op `op` the same way: floats in the total order of `sort` (dsl/dsl.h), NaN last ascending.
void sort_along_axis(const Kernel& k, const Op& op, const std::vector<double>& xf,
                     const std::vector<int64_t>& xi, std::vector<double>& out_f, std::vector<int64_t>& out_i);

// Runs a Reduce, ArgMax, Scan or Sort op by the functions above.
void run_along_axis(const Kernel& k, const Op& op, const std::vector<double>& xf,
                    const std::vector<int64_t>& xi, std::vector<double>& out_f, std::vector<int64_t>& out_i);

} // namespace kiln
