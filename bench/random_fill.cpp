#include "bench/random_fill.h"

#include "support/error.h"
#include "support/half.h"

#include <cstring>

namespace kiln::bench {

namespace {
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) from the top 24 bits: exactly representable in f32.
float uniform_pm1(uint64_t& state) { return static_cast<float>(splitmix64(state) >> 40) * 0x1p-23f - 1.0f; }
} // namespace

void fill_uniform(HostBuffer& b, uint64_t seed, double scale_in) {
  const float scale = static_cast<float>(scale_in);
  uint64_t state = seed;
  const int64_t n = b.numel();
  switch (b.dtype) {
  case DType::f16: {
    uint16_t* p = b.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      p[i] = float_to_f16_bits(uniform_pm1(state) * scale);
    return;
  }
  case DType::bf16: {
    uint16_t* p = b.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      p[i] = float_to_bf16_bits(uniform_pm1(state) * scale);
    return;
  }
  case DType::f32: {
    float* p = b.data<float>();
    for (int64_t i = 0; i < n; ++i)
      p[i] = uniform_pm1(state) * scale;
    return;
  }
  case DType::f64: {
    double* p = b.data<double>();
    for (int64_t i = 0; i < n; ++i)
      p[i] = static_cast<double>(uniform_pm1(state)) * scale_in;
    return;
  }
  default:
    fail("fill_uniform: buffer '{}' holds {}, expected a float dtype", b.name, dtype_name(b.dtype));
  }
}

rt::DeviceBuffer upload(const HostBuffer& b) {
  rt::DeviceBuffer d(b.bytes.size());
  d.copy_from_host(b.bytes.data(), b.bytes.size());
  return d;
}

rt::DeviceBuffer poisoned_device_buffer(DType t, int64_t numel) {
  rt::DeviceBuffer d(static_cast<size_t>(numel) * static_cast<size_t>(dtype_bytes(t)));
  d.fill_bytes(0xFF);
  return d;
}

HostBuffer download(const rt::DeviceBuffer& d, DType t, int64_t numel, std::string name) {
  HostBuffer h(t, numel, std::move(name));
  if (h.bytes.size() > d.bytes())
    fail("download: '{}' wants {} bytes but the device buffer holds {}", h.name, h.bytes.size(), d.bytes());
  d.copy_to_host(h.bytes.data(), h.bytes.size());
  return h;
}

} // namespace kiln::bench
