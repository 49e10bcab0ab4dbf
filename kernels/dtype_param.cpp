#include "kernels/dtype_param.h"

#include "support/error.h"

namespace kiln {

DType dtype_from_param(int64_t code, std::string_view kernel) {
  switch (code) {
  case 0: return DType::f16;
  case 1: return DType::bf16;
  case 2: return DType::f32;
  default: fail("{}: DTYPE={} is not a known element type; expected 0 (f16), 1 (bf16) or 2 (f32)", kernel, code);
  }
}

int64_t dtype_param(DType t, std::string_view kernel) {
  switch (t) {
  case DType::f16: return 0;
  case DType::bf16: return 1;
  case DType::f32: return 2;
  default: fail("{}: element type {} is not supported; expected f16, bf16 or f32", kernel, dtype_name(t));
  }
}

} // namespace kiln
