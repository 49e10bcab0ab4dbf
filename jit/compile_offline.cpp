#include "jit/compile_offline.h"

#include "jit/compile_request.h"

#include <fmt/format.h>

namespace kiln {

KernelArtifacts compile_offline(const Kernel& k, const std::string& arch, const CodegenOptions& options) {
  const Target target = Target::parse(arch); // an arch the code generator knows, before any work
  rt::validate_arch(target.arch());          // and one NVRTC is asked for
  KernelArtifacts out;
  out.generated = generate_cuda(k, target, options);
  rt::CompileRequest req = compile_request(out.generated, target.arch());
  req.want_ptx = true;
  out.compiled = rt::compile_cuda(req);
  return out;
}

std::string KernelArtifacts::usage_summary() const {
  const rt::ResourceUsage& u = compiled.usage;
  auto field = [](int64_t v, const char* unit) {
    return v < 0 ? std::string("n/a") : fmt::format("{} {}", v, unit);
  };
  return fmt::format(
      "{} on {}: registers {}, static shared {}, dynamic shared {} bytes, stack {}, spill stores {}, "
      "spill loads {}",
      compiled.kernel_name, compiled.arch, field(u.registers, "per thread"), field(u.shared_bytes, "bytes"),
      generated.shared_bytes, field(u.stack_frame_bytes, "bytes"), field(u.spill_store_bytes, "bytes"),
      field(u.spill_load_bytes, "bytes"));
}

} // namespace kiln
