#include "kernels/executor.h"

#include "jit/jit_kernel.h"

namespace kiln {

void execute(Executor e, const Kernel& k, const Grid& grid, llvm::ArrayRef<InterpArg> args) {
  if (e == Executor::Interpreter) {
    interpret(k, grid, args);
    return;
  }
  run_on_gpu(*JitKernel::compile(k), grid, args);
}

} // namespace kiln
