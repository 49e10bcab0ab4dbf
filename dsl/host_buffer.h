// kiln's host tensor: `numel` elements of one dtype in host memory, stored as on the GPU (f16/bf16 as their
// 16-bit patterns, i1 as one byte), so that a buffer uploads and downloads byte for byte. The interpreter
// takes these as its memory; the bench, the tools, the tests and the kernels' host helpers use them for
// inputs, outputs and references, and need not include the interpreter for that.
#pragma once

#include "dsl/dtype.h"
#include "support/error.h"
#include "support/half.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kiln {

struct HostBuffer {
  DType dtype = DType::f32;
  std::vector<uint8_t> bytes;
  std::string name; // for error messages ("out of bounds of 'q'")

  HostBuffer() = default;
  // `numel` zero elements; a negative count or one whose bytes do not fit is a kiln::Error, as is running
  // out of host memory.
  HostBuffer(DType t, int64_t numel, std::string n = {});
  int64_t numel() const { return static_cast<int64_t>(bytes.size()) / dtype_bytes(dtype); }
  template <typename T> T* data() { return reinterpret_cast<T*>(bytes.data()); }

  // Element i; an index outside the buffer is a kiln::Error naming it.
  double get(int64_t i) const;        // as a double
  void set(int64_t i, double v);      // rounded to a float dtype, or converted to an integer one as a cast
  int64_t get_int(int64_t i) const;   // of an integer buffer, exactly (i64 beyond 2^53 too)
  void set_int(int64_t i, int64_t v); // of an integer buffer, wrapped to its width

  // Element i without the index check, for a caller that checked it already (the interpreter, per lane of
  // a load or store: inline for that reason). read_float/write_float need a float buffer, read_int/write_int
  // an integer one (InternalError otherwise); writes round or wrap to the dtype.
  double read_float(int64_t i) const;
  int64_t read_int(int64_t i) const;
  void write_float(int64_t i, double v);
  void write_int(int64_t i, int64_t v);

private:
  template <typename T> T read_raw(int64_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return v;
  }
  template <typename T> void write_raw(int64_t i, T v) {
    std::memcpy(bytes.data() + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
  }
};

inline double HostBuffer::read_float(int64_t i) const {
  switch (dtype) {
  case DType::f16:
    return f16_bits_to_float(read_raw<uint16_t>(i));
  case DType::bf16:
    return bf16_bits_to_float(read_raw<uint16_t>(i));
  case DType::f32:
    return read_raw<float>(i);
  case DType::f64:
    return read_raw<double>(i);
  default:
    break;
  }
  throw InternalError("read_float on an integer buffer");
}

inline int64_t HostBuffer::read_int(int64_t i) const {
  switch (dtype) {
  case DType::i1:
    return read_raw<uint8_t>(i) != 0;
  case DType::u8:
    return read_raw<uint8_t>(i);
  case DType::i32:
    return read_raw<int32_t>(i);
  case DType::i64:
    return read_raw<int64_t>(i);
  default:
    break;
  }
  throw InternalError("read_int on a floating-point buffer");
}

inline void HostBuffer::write_float(int64_t i, double v) {
  switch (dtype) {
  case DType::f16:
    return write_raw<uint16_t>(i, float_to_f16_bits(static_cast<float>(v)));
  case DType::bf16:
    return write_raw<uint16_t>(i, float_to_bf16_bits(static_cast<float>(v)));
  case DType::f32:
    return write_raw<float>(i, static_cast<float>(v));
  case DType::f64:
    return write_raw<double>(i, v);
  default:
    break;
  }
  throw InternalError("write_float on an integer buffer");
}

inline void HostBuffer::write_int(int64_t i, int64_t v) {
  switch (dtype) {
  case DType::i1:
    return write_raw<uint8_t>(i, v != 0);
  case DType::u8:
    return write_raw<uint8_t>(i, static_cast<uint8_t>(v));
  case DType::i32:
    return write_raw<int32_t>(i, static_cast<int32_t>(v));
  case DType::i64:
    return write_raw<int64_t>(i, v);
  default:
    break;
  }
  throw InternalError("write_int on a floating-point buffer");
}

} // namespace kiln
