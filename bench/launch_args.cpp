#include "bench/launch_args.h"

#include "support/error.h"

namespace kiln::bench {

std::vector<LaunchArg> to_launch_args(const JitKernel& kernel, llvm::ArrayRef<InterpArg> args,
                                      const DeviceMirrors& mirrors) {
  if (args.size() != kernel.params().size())
    fail("kernel '{}' takes {} arguments, the host helper gave {}", kernel.name(), kernel.params().size(),
         args.size());
  std::vector<LaunchArg> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const InterpArg& a = args[i];
    if (a.buffer) {
      const rt::DeviceBuffer* device = nullptr;
      for (const auto& [host, dev] : mirrors)
        if (host == a.buffer)
          device = dev;
      if (!device)
        fail("kernel '{}': argument '{}' (host buffer '{}') has no device buffer", kernel.name(),
             kernel.params()[i].name, a.buffer->name);
      out.push_back(LaunchArg::pointer(*device));
      continue;
    }
    out.push_back(is_float(kernel.param_types()[i].elem) ? LaunchArg::of_float(a.f) : LaunchArg::of_int(a.i));
  }
  return out;
}

} // namespace kiln::bench
