// kiln's version, part of every cache key, and the hash of the build's code generator.
#pragma once

namespace kiln {
inline const char* version() { return KILN_VERSION_STRING; }
// 16 hex digits of SHA-256 over the sources that decide the code a kernel is given (the DSL, the analyses, the
// code generator and its preludes, the shipped kernels, the JIT), written at build time
// (cmake/code_generator_hash.cmake). Tuning results are kept under it: a changed code generator tunes again.
const char* code_generator_hash();
} // namespace kiln
