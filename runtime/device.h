// The GPU as kiln sees it: device properties read from the driver, the primary context made current on the
// calling thread, and move-only RAII owners of device memory, streams and events.
#pragma once

#include "runtime/cuda_driver.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

struct DeviceInfo {
  std::string name;
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;
  std::string arch;  // arch_for(cc_major, cc_minor)
  int sm_count = 0;
  int max_threads_per_block = 0;
  int64_t max_shared_per_block = 0;        // without opt-in (48 KiB)
  int64_t max_shared_per_block_optin = 0;  // with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int64_t max_shared_per_sm = 0;
  int64_t l2_bytes = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  int64_t total_memory_bytes = 0;
  int driver_version = 0;
};

// Nominal peak rates for a roofline: dense f16 tensor-core FLOP/s from the SM count, the SM clock and the
// architecture's MMA rate per SM (an FMA is 2 FLOPs: Hopper 4096 per SM per clock, A100 2048, GA10x/AD10x
// 512 with f32 accumulation), and DRAM bandwidth from the memory clock and bus width (double data rate).
struct PeakRates {
  double tflops = 0; // 10^12 FLOP/s
  double gbps = 0;   // 10^9 bytes/s
  std::string from;  // where the figures came from: the device's name, or what supplied them instead
};
PeakRates nominal_peak_rates(const DeviceInfo& d);

int device_count();
// Properties of device `ordinal`; throws kiln::Error naming the valid range when it does not exist.
DeviceInfo query_device(int ordinal);
// Retains device `ordinal`'s primary context (once per process) and makes it current on this thread.
CUcontext make_context_current(int ordinal);

// The ordinal KILN_DEVICE names (default 0); a kiln::Error naming the variable when it is not a base-10 ordinal.
int selected_device_ordinal();
// The device kiln uses (ordinal from KILN_DEVICE, default 0), its context current on the calling thread.
const DeviceInfo& current_device();

// A stream: either owned (created here, destroyed with this object) or a user's stream wrapped without
// owning it. A default-constructed Stream is the legacy default stream (handle nullptr), never destroyed.
class Stream {
public:
  Stream() = default;
  static Stream create();                  // a new non-blocking stream on current_device()
  static Stream wrap(void* user_stream);   // e.g. a cudaStream_t from the caller; not owned
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CUstream handle() const { return stream_; }
  bool owned() const { return owned_; }
  void synchronize() const;

private:
  Stream(CUstream s, bool owned) : stream_(s), owned_(owned) {}
  CUstream stream_ = nullptr;
  bool owned_ = false;
};

// A timing event.
class Event {
public:
  Event();  // created on current_device()
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  void synchronize() const;
  // Milliseconds from start to end, both recorded and complete.
  static float elapsed_ms(const Event& start, const Event& end);
  CUevent handle() const { return event_; }

private:
  CUevent event_ = nullptr;
};

// Device memory on current_device(), freed on destruction.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);  // throws kiln::Error naming the size and free memory on failure
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

  void copy_from_host(const void* src, size_t bytes);  // bytes <= this->bytes()
  void copy_to_host(void* dst, size_t bytes) const;
  void copy_from(const DeviceBuffer& src);             // same size
  void fill_bytes(uint8_t value);
  void fill_bytes_async(uint8_t value, const Stream& stream);

  template <typename T> static DeviceBuffer from_host(const std::vector<T>& host) {
    DeviceBuffer b(host.size() * sizeof(T));
    b.copy_from_host(host.data(), b.bytes());
    return b;
  }
  template <typename T> std::vector<T> to_host() const {
    std::vector<T> host(bytes_ / sizeof(T));
    copy_to_host(host.data(), host.size() * sizeof(T));
    return host;
  }

private:
  void release() noexcept;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
  int ordinal_ = 0;
};

} // namespace kiln::rt
