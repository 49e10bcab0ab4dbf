// IEEE half (f16) and bfloat16 conversions on the host, rounding to nearest even, and rounding a
// double to the precision of a kiln dtype. Shared by the interpreter, references, tests and tools.
#pragma once

#include "dsl/dtype.h"

#include <cstdint>

namespace kiln {

uint16_t float_to_f16_bits(float f);
float f16_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

// `x` rounded to what a value of dtype `t` can hold (integers wrap as in C++ two's complement).
double round_to_dtype(double x, DType t);

} // namespace kiln
