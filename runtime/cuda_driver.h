// The CUDA Driver API, opened with dlopen (libcuda.so.1) on first use so that kiln's binaries run, and its
// driver-free parts work, on machines without a GPU. Owns: the few CUDA types and enum values kiln uses
// (copied by number from cuda.h, which kiln never includes), the function table, and result checking.
#pragma once

#include "support/error.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::rt {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uint64_t;  // the driver's CUdeviceptr is an unsigned 64-bit integer on every 64-bit host
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

// The driver's CUtensorMap: 128 opaque bytes (CU_TENSOR_MAP_NUM_QWORDS = 16 quadwords) that describe a tensor to
// the Tensor Memory Accelerator. cuTensorMapEncodeTiled requires the object to be 64-byte aligned (driver API
// reference, "Tensor Map Object Managment": "tensorMap address must be aligned to 64 bytes"); recent cuda.h
// headers ask 128 of non-MSVC compilers, which only matters for a kernel parameter declared with that type,
// and kiln declares its kernels' parameters itself. It reaches a kernel by value, as a __grid_constant__
// parameter, so the bytes are copied into the launch and this object's lifetime ends with the call.
struct alignas(64) CUtensorMap {
  uint64_t opaque[16];
};
static_assert(sizeof(CUtensorMap) == 128 && alignof(CUtensorMap) == 64, "CUtensorMap must match the driver's");

namespace cu {
constexpr CUresult kSuccess = 0;
constexpr CUresult kErrorNotReady = 600;

// CUdevice_attribute
constexpr int kDevAttrMaxThreadsPerBlock = 1;
constexpr int kDevAttrMaxSharedMemoryPerBlock = 8;
constexpr int kDevAttrClockRate = 13;
constexpr int kDevAttrMultiprocessorCount = 16;
constexpr int kDevAttrMemoryClockRate = 36;
constexpr int kDevAttrGlobalMemoryBusWidth = 37;
constexpr int kDevAttrL2CacheSize = 38;
constexpr int kDevAttrComputeCapabilityMajor = 75;
constexpr int kDevAttrComputeCapabilityMinor = 76;
constexpr int kDevAttrMaxSharedMemoryPerMultiprocessor = 81;
constexpr int kDevAttrMaxSharedMemoryPerBlockOptin = 97;

// CUfunction_attribute
constexpr int kFuncAttrMaxThreadsPerBlock = 0;
constexpr int kFuncAttrSharedSizeBytes = 1;
constexpr int kFuncAttrConstSizeBytes = 2;
constexpr int kFuncAttrLocalSizeBytes = 3;
constexpr int kFuncAttrNumRegs = 4;
constexpr int kFuncAttrMaxDynamicSharedSizeBytes = 8;
constexpr int kFuncAttrPreferredSharedMemoryCarveout = 9;

// CUjit_option
constexpr int kJitInfoLogBuffer = 3;
constexpr int kJitInfoLogBufferSizeBytes = 4;
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSizeBytes = 6;

constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDefault = 0x0;

// The tensor-map enums, numbered as in the CUDA Driver API reference, section "Tensor Map Object Managment"
// (docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html, cuTensorMapEncodeTiled), where
// each enum counts up from its first member = 0. Only the members kiln uses are copied.
// CUtensorMapDataType: UINT8 = 0, UINT16, UINT32, INT32, UINT64, INT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16, ...
constexpr int kTensorMapDataTypeUint8 = 0;
constexpr int kTensorMapDataTypeInt32 = 3;
constexpr int kTensorMapDataTypeInt64 = 5;
constexpr int kTensorMapDataTypeFloat16 = 6;
constexpr int kTensorMapDataTypeFloat32 = 7;
constexpr int kTensorMapDataTypeFloat64 = 8;
constexpr int kTensorMapDataTypeBfloat16 = 9;
// CUtensorMapInterleave
constexpr int kTensorMapInterleaveNone = 0;
constexpr int kTensorMapInterleave16B = 1;
constexpr int kTensorMapInterleave32B = 2;
// CUtensorMapSwizzle: 16-byte chunks permuted within a 32-, 64- or 128-byte span
constexpr int kTensorMapSwizzleNone = 0;
constexpr int kTensorMapSwizzle32B = 1;
constexpr int kTensorMapSwizzle64B = 2;
constexpr int kTensorMapSwizzle128B = 3;
// CUtensorMapL2promotion
constexpr int kTensorMapL2PromotionNone = 0;
constexpr int kTensorMapL2Promotion64B = 1;
constexpr int kTensorMapL2Promotion128B = 2;
constexpr int kTensorMapL2Promotion256B = 3;
// CUtensorMapFloatOOBfill: NONE fills out-of-bounds elements with zero; NAN_REQUEST_ZERO_FMA with a NaN that
// tensor-core FMAs read as zero (floating-point element types only)
constexpr int kTensorMapFloatOobFillNone = 0;
constexpr int kTensorMapFloatOobFillNanRequestZeroFma = 1;
} // namespace cu

// Function pointers into libcuda, resolved once. Versioned symbols (_v2) are resolved by their real names.
struct Driver {
  std::string library;  // the name dlopen accepted
  int version = 0;      // cuDriverGetVersion, e.g. 12080

  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;

  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t* bytes, CUdevice device) = nullptr;

  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext* ctx) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;

  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image) = nullptr;
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options, int* options,
                                 void** values) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule module) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value) = nullptr;
  CUresult (*cuFuncGetAttribute)(int* value, int attribute, CUfunction function) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                             CUstream stream, void** params, void** extra) = nullptr;

  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr ptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes) = nullptr;
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes) = nullptr;
  CUresult (*cuMemcpyDtoD)(CUdeviceptr dst, CUdeviceptr src, size_t bytes) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t count) = nullptr;
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream) = nullptr;
  CUresult (*cuMemGetInfo)(size_t* free_bytes, size_t* total_bytes) = nullptr;

  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream stream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream stream) = nullptr;

  CUresult (*cuEventCreate)(CUevent* event, unsigned flags) = nullptr;
  CUresult (*cuEventRecord)(CUevent event, CUstream stream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent event) = nullptr;
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end) = nullptr;
  CUresult (*cuEventDestroy)(CUevent event) = nullptr;

  // Optional: drivers before CUDA 12.0 lack it, and kiln must still load there. nullptr when absent; the
  // tensor-map encoder (runtime/tensor_map.h) reports that when a map is asked for. The enums are passed as
  // int, which is how the C ABI passes the driver's enum types.
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap* tensor_map, int data_type, uint32_t rank, void* global_address,
                                     const uint64_t* global_dims, const uint64_t* global_strides,
                                     const uint32_t* box_dims, const uint32_t* element_strides, int interleave,
                                     int swizzle, int l2_promotion, int oob_fill) = nullptr;

  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; works for any code, known or not.
  std::string describe(CUresult result) const;
  // Throws kiln::Error "<call> failed: <name> (<text>)[ while <context>]" unless result is success.
  void check(CUresult result, std::string_view call, std::string_view context = {}) const;
};

// A call that needs a GPU (the CUDA driver) where none can be used: what driver() throws, and what the
// attention entry points throw once a call's arguments were checked, so that the C ABI answers
// KILN_ERROR_UNAVAILABLE for it and KILN_ERROR for every other mistake.
class NoGpuError : public Error {
public:
  using Error::Error;
};

// The process-wide driver, loaded and cuInit'ed on first use (thread-safe). Throws NoGpuError starting
// "no CUDA driver found: " when libcuda cannot be opened, or naming the failure when cuInit fails.
Driver& driver();

// True when driver() would succeed; otherwise false with the reason in *why. Never throws.
bool driver_available(std::string* why = nullptr);

} // namespace kiln::rt

// Calls driver().fn(args...) and checks the result, naming fn and the context in the error.
#define KILN_CU_CHECK(fn, context, ...)                                                                    \
  ::kiln::rt::driver().check(::kiln::rt::driver().fn(__VA_ARGS__), #fn, context)
