// Device properties, primary contexts, and the RAII owners of memory, streams and events.
#include "runtime/device.h"

#include "runtime/compiler.h"
#include "support/env.h"
#include "support/error.h"

#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

namespace kiln::rt {

int device_count() {
  int count = 0;
  KILN_CU_CHECK(cuDeviceGetCount, "counting devices", &count);
  return count;
}

CUcontext make_context_current(int ordinal) {
  // Primary contexts are retained once and kept for the process: releasing them at exit races with
  // static destructors of buffers, and the driver tears them down anyway.
  static std::mutex mutex;
  static std::map<int, CUcontext> contexts;
  thread_local std::pair<int, CUcontext> current{-1, nullptr};
  if (current.first == ordinal)
    return current.second;
  CUcontext ctx = nullptr;
  {
    std::lock_guard lock(mutex);
    auto it = contexts.find(ordinal);
    if (it == contexts.end()) {
      int count = device_count();
      if (ordinal < 0 || ordinal >= count)
        fail("no CUDA device {}: expected an ordinal in [0, {})", ordinal, count);
      CUdevice dev = 0;
      KILN_CU_CHECK(cuDeviceGet, fmt::format("getting device {}", ordinal), &dev, ordinal);
      KILN_CU_CHECK(cuDevicePrimaryCtxRetain, fmt::format("retaining device {}'s context", ordinal), &ctx, dev);
      it = contexts.emplace(ordinal, ctx).first;
    }
    ctx = it->second;
  }
  KILN_CU_CHECK(cuCtxSetCurrent, fmt::format("making device {}'s context current", ordinal), ctx);
  current = {ordinal, ctx};
  return ctx;
}

DeviceInfo query_device(int ordinal) {
  Driver& d = driver();
  int count = device_count();
  if (ordinal < 0 || ordinal >= count)
    fail("no CUDA device {}: expected an ordinal in [0, {})", ordinal, count);
  CUdevice dev = 0;
  KILN_CU_CHECK(cuDeviceGet, "", &dev, ordinal);
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  KILN_CU_CHECK(cuDeviceGetName, "", name, static_cast<int>(sizeof(name)), dev);
  info.name = name;
  auto attr = [&](int attribute) {
    int value = 0;
    d.check(d.cuDeviceGetAttribute(&value, attribute, dev), "cuDeviceGetAttribute",
            fmt::format("reading attribute {} of device {}", attribute, ordinal));
    return value;
  };
  info.cc_major = attr(cu::kDevAttrComputeCapabilityMajor);
  info.cc_minor = attr(cu::kDevAttrComputeCapabilityMinor);
  info.arch = arch_for(info.cc_major, info.cc_minor);
  info.sm_count = attr(cu::kDevAttrMultiprocessorCount);
  info.max_threads_per_block = attr(cu::kDevAttrMaxThreadsPerBlock);
  info.max_shared_per_block = attr(cu::kDevAttrMaxSharedMemoryPerBlock);
  info.max_shared_per_block_optin = attr(cu::kDevAttrMaxSharedMemoryPerBlockOptin);
  info.max_shared_per_sm = attr(cu::kDevAttrMaxSharedMemoryPerMultiprocessor);
  info.l2_bytes = attr(cu::kDevAttrL2CacheSize);
  info.clock_khz = attr(cu::kDevAttrClockRate);
  info.memory_clock_khz = attr(cu::kDevAttrMemoryClockRate);
  info.memory_bus_bits = attr(cu::kDevAttrGlobalMemoryBusWidth);
  size_t total = 0;
  KILN_CU_CHECK(cuDeviceTotalMem, "", &total, dev);
  info.total_memory_bytes = static_cast<int64_t>(total);
  info.driver_version = d.version;
  return info;
}

int selected_device_ordinal() {
  const int max = std::numeric_limits<int>::max();
  return static_cast<int>(env_integer("KILN_DEVICE", 0, max, "a device ordinal").value_or(0));
}

const DeviceInfo& current_device() {
  static const DeviceInfo info = query_device(selected_device_ordinal());
  make_context_current(info.ordinal);
  return info;
}

// ---- Stream -------------------------------------------------------------------------------------------

Stream Stream::create() {
  current_device();
  CUstream s = nullptr;
  KILN_CU_CHECK(cuStreamCreate, "creating a stream", &s, cu::kStreamNonBlocking);
  return Stream(s, true);
}

Stream Stream::wrap(void* user_stream) { return Stream(static_cast<CUstream>(user_stream), false); }

Stream::~Stream() {
  if (owned_ && stream_)
    driver().cuStreamDestroy(stream_);  // failure in a destructor has nowhere to go
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), owned_(std::exchange(other.owned_, false)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (owned_ && stream_)
      driver().cuStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

void Stream::synchronize() const { KILN_CU_CHECK(cuStreamSynchronize, "synchronizing a stream", stream_); }

// ---- Event --------------------------------------------------------------------------------------------

Event::Event() {
  current_device();
  KILN_CU_CHECK(cuEventCreate, "creating an event", &event_, cu::kEventDefault);
}

Event::~Event() {
  if (event_)
    driver().cuEventDestroy(event_);
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_)
      driver().cuEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(const Stream& stream) {
  KILN_CU_CHECK(cuEventRecord, "recording an event", event_, stream.handle());
}

void Event::synchronize() const { KILN_CU_CHECK(cuEventSynchronize, "waiting for an event", event_); }

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  KILN_CU_CHECK(cuEventElapsedTime, "reading the time between two events", &ms, start.event_, end.event_);
  return ms;
}

// ---- DeviceBuffer -------------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  ordinal_ = current_device().ordinal;
  if (bytes == 0)
    return;  // cuMemAlloc rejects 0 bytes; an empty buffer is a null pointer
  Driver& d = driver();
  if (CUresult r = d.cuMemAlloc(&ptr_, bytes); r != cu::kSuccess) {
    size_t free_bytes = 0, total_bytes = 0;
    d.cuMemGetInfo(&free_bytes, &total_bytes);
    fail("cuMemAlloc failed: {} while allocating {} bytes on device {} ({} of {} bytes free)", d.describe(r),
         bytes, ordinal_, free_bytes, total_bytes);
  }
}

void DeviceBuffer::release() noexcept {
  if (ptr_) {
    try {
      make_context_current(ordinal_);
      driver().cuMemFree(ptr_);
    } catch (...) {  // a destructor must not throw; the context is gone with the process anyway
    }
  }
  ptr_ = 0;
  bytes_ = 0;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)), ordinal_(other.ordinal_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
    ordinal_ = other.ordinal_;
  }
  return *this;
}

void DeviceBuffer::copy_from_host(const void* src, size_t bytes) {
  if (bytes > bytes_)
    fail("copy_from_host: {} bytes do not fit a {}-byte device buffer", bytes, bytes_);
  if (bytes == 0)
    return;
  make_context_current(ordinal_);
  KILN_CU_CHECK(cuMemcpyHtoD, fmt::format("copying {} bytes to the device", bytes), ptr_, src, bytes);
}

void DeviceBuffer::copy_to_host(void* dst, size_t bytes) const {
  if (bytes > bytes_)
    fail("copy_to_host: asked for {} bytes from a {}-byte device buffer", bytes, bytes_);
  if (bytes == 0)
    return;
  make_context_current(ordinal_);
  KILN_CU_CHECK(cuMemcpyDtoH, fmt::format("copying {} bytes from the device", bytes), dst, ptr_, bytes);
}

void DeviceBuffer::copy_from(const DeviceBuffer& src) {
  if (src.bytes_ != bytes_)
    fail("DeviceBuffer::copy_from: source has {} bytes, destination {}; expected equal sizes", src.bytes_,
         bytes_);
  if (bytes_ == 0)
    return;
  make_context_current(ordinal_);
  KILN_CU_CHECK(cuMemcpyDtoD, fmt::format("copying {} bytes on the device", bytes_), ptr_, src.ptr_, bytes_);
}

void DeviceBuffer::fill_bytes(uint8_t value) {
  if (bytes_ == 0)
    return;
  make_context_current(ordinal_);
  KILN_CU_CHECK(cuMemsetD8, fmt::format("filling {} bytes", bytes_), ptr_, value, bytes_);
}

void DeviceBuffer::fill_bytes_async(uint8_t value, const Stream& stream) {
  if (bytes_ == 0)
    return;
  make_context_current(ordinal_);
  KILN_CU_CHECK(cuMemsetD8Async, fmt::format("filling {} bytes", bytes_), ptr_, value, bytes_, stream.handle());
}


PeakRates nominal_peak_rates(const DeviceInfo& d) {
  const int cc = d.cc_major * 10 + d.cc_minor;
  const double per_sm_clock = cc >= 90 ? 4096 : cc == 80 ? 2048 : 512;
  PeakRates p;
  p.tflops = per_sm_clock * d.sm_count * d.clock_khz * 1e3 / 1e12;
  p.gbps = 2.0 * d.memory_clock_khz * 1e3 * (d.memory_bus_bits / 8.0) / 1e9;
  p.from = d.name;
  return p;
}

} // namespace kiln::rt
