#include "bench/launch_args.h"

#include "support/error.h"

namespace kiln::bench {

namespace {

std::vector<LaunchArg> convert(const std::string& kernel, const std::vector<Param>& params,
                               const std::vector<Type>& types, llvm::ArrayRef<InterpArg> args,
                               const DeviceMirrors& mirrors) {
  if (args.size() != params.size())
    fail("kernel '{}' takes {} arguments, the host helper gave {}", kernel, params.size(), args.size());
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
        fail("kernel '{}': argument '{}' (host buffer '{}') has no device buffer", kernel, params[i].name,
             a.buffer->name);
      out.push_back(LaunchArg::pointer(*device));
      continue;
    }
    out.push_back(is_float(types[i].elem) ? LaunchArg::of_float(a.f) : LaunchArg::of_int(a.i));
  }
  return out;
}

} // namespace

std::vector<LaunchArg> to_launch_args(const JitKernel& kernel, llvm::ArrayRef<InterpArg> args,
                                      const DeviceMirrors& mirrors) {
  return convert(kernel.name(), kernel.params(), kernel.param_types(), args, mirrors);
}

std::vector<LaunchArg> to_launch_args(const Kernel& kernel, llvm::ArrayRef<InterpArg> args,
                                      const DeviceMirrors& mirrors) {
  std::vector<Type> types;
  for (const Param& p : kernel.params)
    types.push_back(kernel.type(p.value));
  return convert(kernel.name, kernel.params, types, args, mirrors);
}

} // namespace kiln::bench
