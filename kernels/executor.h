// Where a kernel runs on host buffers: the interpreter, or the GPU through the JIT (buffers copied to
// the device and back). Host helpers take an Executor, so that one test body checks both.
#pragma once

#include "dsl/interpreter.h"

namespace kiln {

enum class Executor : uint8_t { Interpreter, Gpu };

void execute(Executor e, const Kernel& k, const Grid& grid, llvm::ArrayRef<InterpArg> args);

} // namespace kiln
