#include "kernels/attention/attention_launch.h"

#include "runtime/cuda_driver.h"
#include "runtime/device.h"

#include <map>
#include <mutex>
#include <string>

namespace kiln::attention::detail {

std::shared_ptr<JitKernel> compiled_for(const KernelDef& def, const Config& config) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<JitKernel>> kernels;
  std::string key = def.name + " " + rt::current_device().arch + " ";
  config.append_str(key);
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<JitKernel>& k = kernels[key];
  if (!k) {
    def.check(config);
    k = JitKernel::compile(def.build(config));
  }
  return k;
}

KernelTuner& attention_tuner() {
  static KernelTuner tuner;
  return tuner;
}

void require_driver(const ApiSite& site) {
  std::string why;
  if (!rt::driver_available(&why)) {
    // reject()'s message, as the type the C ABI answers KILN_ERROR_UNAVAILABLE for.
    const SourceLoc loc{site.where.file_name(), static_cast<unsigned>(site.where.line())};
    throw rt::NoGpuError(fmt::format("attention::{}: no GPU is available to run on: {}{}", site.entry, why,
                                 loc.known() ? " (at " + loc.str() + ")" : ""));
  }
}

} // namespace kiln::attention::detail
