#include "examples/kernels/tutorial_main.h"

#include <kiln/tool_main.h>

#include <cstdio>

namespace tutorial {

int tutorial_main(int argc, char** argv, kiln::KernelDef def, const std::vector<std::string>& self_check) {
  kiln::KernelRegistry kernels;
  const std::string name = def.name;
  kernels.add(std::move(def));
  if (argc > 1)
    return kiln::tool_main(argc, argv, kernels);

  std::vector<std::string> args = {argv[0], "run", name};
  args.insert(args.end(), self_check.begin(), self_check.end());
  args.push_back("--check");
  std::string why;
  if (!kiln::gpu_available(&why)) {
    std::printf("no GPU (%s): running in the interpreter\n", why.c_str());
    args.push_back("--interpret");
  }
  std::string line;
  for (const std::string& a : args)
    line += (line.empty() ? "" : " ") + a;
  std::printf("$ %s\n", line.c_str());
  std::fflush(stdout);
  std::vector<char*> cargs;
  for (std::string& a : args)
    cargs.push_back(a.data());
  return kiln::tool_main(static_cast<int>(cargs.size()), cargs.data(), kernels);
}

} // namespace tutorial
