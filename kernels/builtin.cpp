#include "kernels/builtin.h"

#include "kernels/vector_add/vector_add.h"

namespace kiln {

const KernelRegistry& builtin_kernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    r.add(vector_add_def());
    return r;
  }();
  return registry;
}

} // namespace kiln
