// The `kiln` command line.
#include "dsl/printer.h"
#include "kernels/builtin.h"

#include <cstdio>

int main() {
  const kiln::KernelDef& d = kiln::builtin_kernels().find("vector_add");
  std::printf("%s", kiln::print_kernel(d.build(d.default_config())).c_str());
  return 0;
}
