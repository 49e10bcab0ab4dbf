// Compiling CUDA C++ text to a cubin (and PTX on request) with NVRTC. Owns the NVRTC options kiln uses,
// target-arch naming and validation, ptxas resource-usage parsing, and compile-error reports that quote
// the offending source lines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

// What a kernel costs per thread/block, from ptxas -v (at compile time) or cuFuncGetAttribute (after load).
// -1 means "not reported".
struct ResourceUsage {
  int registers = -1;
  int64_t shared_bytes = -1;       // static shared memory per block
  int64_t stack_frame_bytes = -1;
  int64_t spill_store_bytes = -1;
  int64_t spill_load_bytes = -1;
  int64_t constant_bytes = -1;     // all cmem banks (kernel parameters included)
  int64_t local_bytes = -1;        // from the driver: local memory per thread
  int max_threads_per_block = -1;  // from the driver: the limit this kernel's register use allows

  std::string to_json() const;
  static ResourceUsage from_json(std::string_view json);  // throws kiln::Error on malformed text
  bool operator==(const ResourceUsage&) const = default;
};

struct CompileRequest {
  std::string source;                // CUDA C++ without #includes (NVRTC gets no include path)
  std::string kernel_name;           // the __global__ function to look up (extern "C" or a C++ name expression)
  std::string arch = "sm_80";        // one of supported_archs()
  std::vector<std::string> options;  // extra NVRTC options, appended after kiln's own
  bool fast_math = false;            // --use_fast_math
  bool want_ptx = false;             // also produce PTX (for `kiln emit --stage=ptx` and dumps)
};

struct CompiledKernel {
  std::string kernel_name;   // as requested
  std::string lowered_name;  // the symbol in the cubin, for cuModuleGetFunction
  std::string arch;
  std::string cubin;         // an ELF image
  std::string ptx;           // empty unless asked for
  std::string log;           // NVRTC's log, ptxas -v report included
  ResourceUsage usage;
  std::string cache_key;     // set by the compile cache; empty for direct compiles
};

// Compiles req with NVRTC. Throws kiln::Error on a bad request, a missing NVRTC, or a compile error; the
// message names the kernel and arch and holds the NVRTC log with the offending source lines quoted.
CompiledKernel compile_cuda(const CompileRequest& req);

// The full NVRTC option list for req (kiln's defaults first, then req.options); part of the cache key.
std::vector<std::string> nvrtc_options(const CompileRequest& req);

// Reads ptxas -v output for one entry function (its lowered name); fields not reported stay -1.
ResourceUsage parse_ptxas_usage(std::string_view log, std::string_view lowered_name);

// Reads what the cubin itself records for one function: registers (EIATTR_REGCOUNT) and stack frame
// (EIATTR_FRAME_SIZE) from .nv.info. The fallback when NVRTC's log lacks the ptxas report: where a driver is
// installed, NVRTC 13 serves repeat compiles from the driver's ~/.nv/ComputeCache with an empty log (seen on
// H200 with driver 580; CUDA_CACHE_DISABLE=1 brings the report back). Other fields stay -1.
ResourceUsage read_cubin_usage(std::string_view cubin, std::string_view lowered_name);

// Turns NVRTC's "file(line): error: ..." lines into a report that quotes source lines around each error.
std::string quote_error_lines(std::string_view log, std::string_view source, int context_lines = 2);
// When ptxas ran out of the registers __launch_bounds__ leaves a thread, a sentence saying what sets that cap
// and what to lower (MIN_BLOCKS_PER_SM, num_warps, tiles); "" for any other log.
std::string register_limit_hint(std::string_view log);
// ptxas's advisories on Hopper's products (C75xx: setmaxnreg ignored, a wait it injected, products it put in
// series), trimmed, in the log's order; the routine C7519 (an arrive before a product with register operands) is
// left out.
std::vector<std::string> ptxas_product_advisories(std::string_view log);

const std::vector<std::string>& supported_archs();  // sm_80, sm_86, sm_89, sm_90, sm_90a
// "sm_XY" for compute capability X.Y; 9.0 gives "sm_90a" so that Hopper-only instructions are available.
std::string arch_for(int cc_major, int cc_minor);
// Throws kiln::Error unless arch is one of supported_archs().
void validate_arch(std::string_view arch);
// "sm_90a" -> "compute_90a": the virtual arch NVRTC emits PTX for.
std::string virtual_arch(std::string_view arch);

} // namespace kiln::rt
