// kiln's public C++ API: the one header a program that writes its own kernels includes.
//
//   #include <kiln/kiln.h>
//   using namespace kiln;
//
//   Kernel build_saxpy(const Config& c) {                        // 1. write a kernel in the DSL
//     const int64_t BLOCK = c.get("BLOCK");
//     KernelBuilder kb("saxpy", c);
//     Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), a = kb.arg("a", f32), n = kb.arg("n", i32);
//     Value offs = program_id(0) * BLOCK + arange(0, BLOCK);     // (BLOCK,) i32
//     Value mask = offs < n;
//     store(y + offs, a * load(x + offs, mask, 0.0f) + load(y + offs, mask, 0.0f), mask);
//     return kb.finish();
//   }
//   Kernel k = build_saxpy(Config().set("BLOCK", 256));
//   interpret(k, {cdiv, 1, 1}, {InterpArg::ptr(x), ...});         // 2a. run it on the CPU, or
//   JitKernel::compile(k)->launch({cdiv, 1, 1}, {LaunchArg::pointer(d_x), ...}, Stream::wrap(my_stream));  //
//   2b.
//
// Everything here lives in namespace kiln. This header re-exports the pieces of kiln's layers that make up
// the public surface (listed below) and adds no implementation of its own beyond two one-line conveniences;
// the headers it includes are installed with it but their other declarations are not a stable interface.
//
// Public surface:
// - The DSL (dsl/dsl.h, dsl/builder.h): KernelBuilder (arg_ptr, arg, finish), Value, Operand, the dtypes
//   (i1 u8 i32 i64 f16 bf16 f32 f64), program_id/arange/full/zeros, elementwise operators and math (exp exp2
//   log log2 sqrt rsqrt abs tanh sigmoid erf sin cos log1p expm1 pow fma minimum maximum where), counter-based
//   random numbers (rand, randn: Philox4x32-10, the same numbers in the interpreter and on the GPU), shape
//   ops, dot, sum/max/min/prod/argmax, scans (cumsum/cumprod/cummax/cummin, scan, associative_scan with a
//   combine of the user's), sort, load/store through pointer tensors (with
//   masks) and block pointers (make_block_ptr, advance, BoundaryCheck, Padding: zero, NaN, -inf or any value),
//   for_range, if_, static_check. Mistakes are kiln::Error
//   naming the op, the shapes/dtypes and the line of the user's DSL call.
// - Config (named integer compile-time parameters + num_warps/num_stages) and KernelDef (a kernel's build
//   function, parameters, config space, grid rule and tuning key; for `run --check`, its buffers' tensor
//   dims and a double-precision reference on ReferenceInputs), Grid, SizeArgs, next_pow2.
// - Host tensors: HostBuffer (elements of one dtype stored as on the GPU; get/set, get_int/set_int).
// - The interpreter: InterpArg, interpret(), interpret_requested() (KILN_INTERPRET=1).
// - Launching on the GPU: JitKernel::compile / launch with LaunchArg (device pointers the caller owns, or a
//   DeviceBuffer's), check_launch_args, run_on_gpu (host buffers in and out), Stream (an opaque handle: own a
//   new one, or Stream::wrap(void*) a cudaStream_t/CUstream without owning it), DeviceBuffer, current_device.
// - Autotuning a user-declared config space and key: KernelTuner::select / launch with a KernelDef whose
//   config_space and tuning_key the user fills in, TuneOptions (mode, timing, flops), TunedLaunch;
//   AutotuneMode (KILN_AUTOTUNE=off|cached|on|force).
// - Inspection: print_kernel (the IR), generate_cuda (the CUDA C++ and the `lowered` summary of layouts,
//   shared memory and pipelining for a Target), estimate_cost / roofline (FLOPs and bytes from the IR).
// - Offline compilation, with NVRTC and no CUDA driver: compile_offline(kernel, arch) gives KernelArtifacts
//   (PTX, cubin, and ptxas's ResourceUsage: registers, shared memory, spills) for any kernel, config and
//   arch.
// - The command line over your own kernels: kiln/tool_main.h (kiln::tool_main, linked from kiln::tool).
// - kiln::version(), gpu_available().
// - Errors: kiln::Error (a user's mistake, with a message naming what was expected and what came) and
//   kiln::InternalError (a bug in kiln).
#pragma once

#include "analysis/perf_model.h" // estimate_cost, roofline, Cost, CostEstimate
#include "codegen/codegen.h"     // generate_cuda, CodegenOptions, GeneratedKernel, Target
#include "dsl/config.h"          // Config
#include "dsl/dsl.h"             // the DSL
#include "dsl/host_buffer.h"     // HostBuffer
#include "dsl/interpreter.h"     // InterpArg, interpret
#include "dsl/printer.h"         // print_kernel
#include "dsl/registry.h"        // KernelDef, Grid, SizeArgs, ReferenceInputs/Outputs (dsl/kernel_reference.h)
#include "jit/compile_offline.h" // compile_offline, KernelArtifacts
#include "jit/jit_kernel.h"      // JitKernel, LaunchArg, run_on_gpu, check_launch_args
#include "jit/tuned_kernel.h"    // KernelTuner, TuneOptions, TunedLaunch
#include "runtime/autotuner.h"   // AutotuneMode
#include "runtime/device.h"      // Stream, DeviceBuffer, DeviceInfo
#include "runtime/nvrtc.h"       // nvrtc_available (for gpu_available)
#include "support/error.h"       // Error, InternalError
#include "support/version.h"     // version()

#include <string>

namespace kiln {

// ---- the runtime's user-facing types, without the rt:: prefix ----
// A CUDA stream: Stream() is the legacy default stream, Stream::create() a new one owned by the object,
// Stream::wrap(void*) borrows the caller's cudaStream_t / CUstream (never destroyed by kiln).
using Stream = rt::Stream;
// Device memory kiln allocates and frees (from_host, to_host, copy_from_host, ptr()); pointers the user
// allocated elsewhere are passed as LaunchArg::pointer(uint64_t address) instead.
using DeviceBuffer = rt::DeviceBuffer;
using DeviceInfo = rt::DeviceInfo;
// What NVRTC made of a kernel (cubin, ptx, log) and what ptxas reports it uses (registers, shared memory,
// spills): the parts of KernelArtifacts (jit/compile_offline.h) from the runtime.
using CompiledKernel = rt::CompiledKernel;
using ResourceUsage = rt::ResourceUsage;
using AutotuneMode = rt::AutotuneMode;
using rt::autotune_mode_from_env;
using rt::autotune_mode_name; // "off", "cached", "on", "force"
using rt::current_device;     // the device kiln launches on (KILN_DEVICE, default 0), its context current
using rt::format_tune_table;  // the tuning result's table: config, time, TFLOP/s, registers, status
using rt::tune_source_name;   // where a pick came from: "default", "memory", "disk", "tuned"

// Whether kernels can run on a GPU here: a CUDA driver with at least one device and NVRTC, and
// KILN_INTERPRET=1 not set. When false, `why` (if given) says what is missing; never throws.
inline bool gpu_available(std::string* why = nullptr) {
  std::string reason;
  if (interpret_requested()) {
    reason = "KILN_INTERPRET=1 asks for the interpreter";
  } else if (rt::driver_available(&reason) && rt::nvrtc_available(&reason)) {
    try {
      if (rt::device_count() == 0)
        reason = "the CUDA driver reports no device";
    } catch (const Error& e) {
      reason = e.what();
    }
  }
  if (why)
    *why = reason;
  return reason.empty();
}

} // namespace kiln
