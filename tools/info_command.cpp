// `kiln info`: kiln's version, the NVRTC found, the CUDA driver and each GPU's properties; says plainly
// when there is no driver (NVRTC compilation works without one).
#include "runtime/device.h"
#include "runtime/nvrtc.h"
#include "support/version.h"
#include "tools/cli.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

namespace kiln::cli {
namespace {

llvm::cl::SubCommand info_sub("info",
                              "Print kiln's version, NVRTC, the CUDA driver and each GPU's properties");
llvm::cl::opt<bool> json("json", llvm::cl::desc("Machine-readable output"), llvm::cl::sub(info_sub),
                         llvm::cl::cat(kiln_category()));

std::string driver_version_str(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

int run_info(const KernelRegistry& /*kernels*/) {
  llvm::json::Object root{{"kiln_version", version()}, {"code_generator", code_generator_hash()}};
  std::string text = fmt::format("kiln {} (code generator {})\n", version(), code_generator_hash());

  std::string nvrtc_why;
  if (rt::nvrtc_available(&nvrtc_why)) {
    const rt::Nvrtc& n = rt::nvrtc();
    root["nvrtc"] = llvm::json::Object{{"version", n.version_string()}, {"library", n.library}};
    text += fmt::format("NVRTC:  {} ({})\n", n.version_string(), n.library);
  } else {
    root["nvrtc"] = llvm::json::Object{{"error", nvrtc_why}};
    text += fmt::format("NVRTC:  not available: {}\n", nvrtc_why);
  }

  std::string driver_why;
  llvm::json::Array gpus;
  if (!rt::driver_available(&driver_why)) {
    root["driver"] = llvm::json::Object{{"error", driver_why}};
    text += fmt::format("driver: none: {}\n", driver_why);
    text += "GPUs:   none (kiln still generates CUDA, compiles it with NVRTC and runs kernels in the "
            "interpreter)\n";
  } else {
    const int count = rt::device_count();
    for (int i = 0; i < count; ++i) {
      rt::DeviceInfo d = rt::query_device(i);
      if (i == 0) {
        root["driver"] = llvm::json::Object{{"version", driver_version_str(d.driver_version)}};
        text += fmt::format("driver: CUDA {}\n", driver_version_str(d.driver_version));
      }
      gpus.push_back(llvm::json::Object{{"ordinal", d.ordinal},
                                        {"name", d.name},
                                        {"arch", d.arch},
                                        {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
                                        {"sm_count", d.sm_count},
                                        {"max_shared_per_block", d.max_shared_per_block},
                                        {"max_shared_per_block_optin", d.max_shared_per_block_optin},
                                        {"max_shared_per_sm", d.max_shared_per_sm},
                                        {"l2_bytes", d.l2_bytes},
                                        {"clock_khz", d.clock_khz},
                                        {"memory_clock_khz", d.memory_clock_khz},
                                        {"memory_bus_bits", d.memory_bus_bits},
                                        {"total_memory_bytes", d.total_memory_bytes}});
      text += fmt::format("GPU {}:  {} ({}, compute capability {}.{})\n", d.ordinal, d.name, d.arch,
                          d.cc_major, d.cc_minor);
      text += fmt::format(
          "        SMs {}, shared memory {} KiB per block ({} KiB opt-in), {} KiB per SM, L2 {} MiB\n",
          d.sm_count, d.max_shared_per_block / 1024, d.max_shared_per_block_optin / 1024,
          d.max_shared_per_sm / 1024, d.l2_bytes / (1024 * 1024));
      text += fmt::format("        clocks: SM {} MHz, memory {} MHz, bus {} bits; memory {:.1f} GiB\n",
                          d.clock_khz / 1000, d.memory_clock_khz / 1000, d.memory_bus_bits,
                          static_cast<double>(d.total_memory_bytes) / (1024.0 * 1024 * 1024));
    }
    if (count == 0)
      text += "GPUs:   none (the driver reports no CUDA device)\n";
  }
  root["gpus"] = std::move(gpus);

  if (json)
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  else
    llvm::outs() << text;
  return 0;
}

} // namespace

Command info_command() { return {&info_sub, run_info}; }

} // namespace kiln::cli
