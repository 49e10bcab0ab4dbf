#include "jit/compile_request.h"

#include "runtime/nvrtc.h"

namespace kiln {

std::vector<std::string> generated_kernel_options(int nvrtc_major, int nvrtc_minor) {
  if (nvrtc_major > 12 || (nvrtc_major == 12 && nvrtc_minor >= 4))
    return {"-minimal"};
  return {};
}

rt::CompileRequest compile_request(const GeneratedKernel& generated, const std::string& arch) {
  rt::CompileRequest req;
  req.source = generated.source;
  req.kernel_name = generated.name;
  req.arch = arch;
  if (rt::nvrtc_available()) {
    const rt::Nvrtc& n = rt::nvrtc();
    req.options = generated_kernel_options(n.major, n.minor);
  }
  return req;
}

} // namespace kiln
