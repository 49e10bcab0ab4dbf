// NumPy .npy files (format versions 1.0, 2.0 and 3.0): reading any float/int/bool array into doubles in
// C (row-major) order, writing f16/f32/f64 arrays, and the exact rounding of those doubles to a kiln dtype.
// Every malformed or unsupported file is a kiln::Error naming the file and what was wrong. A file is read
// only when it is a regular file (support/regular_file.h), and only as many bytes as its header declares,
// after checking that the file holds exactly that many. Writing files: support/output_set.h.
#pragma once

#include "dsl/dtype.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct NpyArray {
  char kind = 'f';            // NumPy's kind letter: 'f' float, 'i' signed, 'u' unsigned, 'b' bool
  int item_bytes = 4;         // bytes per element in the file
  bool big_endian = false;    // the file's byte order ('>'); values are byte-swapped on read
  bool fortran_order = false; // the file's order; values are always returned in C order
  std::vector<int64_t> shape;
  std::vector<double> values; // numel() values in C order

  int64_t numel() const;
  std::string descr() const;     // "<f4", ">f2", "|b1", ...
  std::string dtype_str() const; // "float32", "int32", ...
  std::string shape_str() const; // "(2, 3)"
  bool is_float() const { return kind == 'f'; }
};

// Parses the bytes of an .npy file; `name` is used in error messages.
NpyArray parse_npy(std::string_view bytes, std::string_view name);
// Reads and parses `path`, a regular file (or a symbolic link to one). `check_header`, when given, sees the
// parsed header (kind, item size, shape; no values yet) before any data is read or memory is sized for it,
// and throws to refuse the file: a caller that expects a shape refuses a header declaring gigabytes without
// reading them. Values that do not fit in host memory are a kiln::Error naming the file and the size.
NpyArray read_npy(const std::string& path,
                  const std::function<void(const NpyArray&)>& check_header = nullptr);

// An .npy file (format 1.0, little-endian, C order) holding `values` as `dtype` (f16, f32 or f64; anything
// else is a kiln::Error). Each value is rounded to nearest even, exactly (see round_exactly_to).
std::string serialize_npy(DType dtype, const std::vector<int64_t>& shape, const std::vector<double>& values);

// `x` rounded to nearest even in `t` with a single rounding (f64 → f16/bf16 goes through a round-to-odd
// f32, so that it never double-rounds). Integers follow round_to_dtype.
double round_exactly_to(double x, DType t);

} // namespace kiln
