#include "dsl/host_buffer.h"

#include "dsl/scalar_eval.h"

#include <limits>

namespace kiln {

HostBuffer::HostBuffer(DType t, int64_t numel, std::string n) : dtype(t), name(std::move(n)) {
  if (numel < 0)
    fail("buffer '{}': element count must be >= 0, got {}", name, numel);
  const int64_t elem = dtype_bytes(t);
  if (numel > std::numeric_limits<int64_t>::max() / elem)
    fail("buffer '{}': {} elements of {} do not fit in 64-bit byte offsets", name, numel, dtype_name(t));
  try {
    bytes.assign(static_cast<size_t>(numel * elem), 0);
  } catch (const std::exception&) { // std::bad_alloc, or std::length_error past the vector's maximum
    fail("out of host memory: buffer '{}' needs {} bytes ({} elements of {})", name, numel * elem, numel,
         dtype_name(t));
  }
}

namespace {
void check_host_index(const HostBuffer& b, int64_t i) {
  if (i < 0 || i >= b.numel())
    fail("buffer '{}': index {} is out of bounds ({} elements)", b.name, i, b.numel());
}
} // namespace

double HostBuffer::get(int64_t i) const {
  check_host_index(*this, i);
  return is_float(dtype) ? read_float(i) : static_cast<double>(read_int(i));
}

void HostBuffer::set(int64_t i, double v) {
  check_host_index(*this, i);
  if (is_float(dtype))
    write_float(i, v);
  else // truncated, then wrapped to the width like set_int: the cast rule of dsl/scalar_eval.h
    write_int(i, float_to_int(v, dtype));
}

int64_t HostBuffer::get_int(int64_t i) const {
  check_host_index(*this, i);
  if (is_float(dtype))
    fail("buffer '{}' holds {}, not integers; use get()", name, dtype_name(dtype));
  return read_int(i);
}

void HostBuffer::set_int(int64_t i, int64_t v) {
  check_host_index(*this, i);
  if (is_float(dtype))
    fail("buffer '{}' holds {}, not integers; use set()", name, dtype_name(dtype));
  write_int(i, v);
}

} // namespace kiln
