// Codegen tests that compile what they generate: NVRTC is there without a GPU, but not on every machine.
#pragma once

#include "codegen/codegen.h"
#include "runtime/compiler.h"
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace kiln_test {

// What compile_cuda needs to compile `g` for `arch`.
inline kiln::rt::CompileRequest compile_request_for(const kiln::GeneratedKernel& g, const std::string& arch) {
  kiln::rt::CompileRequest req;
  req.source = g.source;
  req.kernel_name = g.name;
  req.arch = arch;
  return req;
}

// Compiles `g` for `arch` and expects a cubin (with NVRTC's log on failure); where NVRTC is not usable, says so
// and checks nothing more (the caller's assertions on the text still ran).
inline void expect_nvrtc_compiles(const kiln::GeneratedKernel& g, const std::string& arch) {
  std::string why;
  if (!kiln::rt::nvrtc_available(&why)) {
    std::printf("NVRTC not available (%s): the text is checked, not compiled\n", why.c_str());
    return;
  }
  const kiln::rt::CompiledKernel ck = kiln::rt::compile_cuda(compile_request_for(g, arch));
  EXPECT_FALSE(ck.cubin.empty()) << g.name << " for " << arch << "\n" << ck.log;
}

// Compiles `g` for `arch` (NVRTC must be usable: callers skip before) and expects no spill and no ignored
// setmaxnreg (ptxas's C7508, which a warp-specialised kernel must never get); returns ptxas's log.
inline std::string expect_compiles_without_spills(const kiln::GeneratedKernel& g, const std::string& arch) {
  const kiln::rt::CompiledKernel k = kiln::rt::compile_cuda(compile_request_for(g, arch));
  EXPECT_EQ(k.usage.spill_store_bytes, 0) << k.log;
  EXPECT_EQ(k.usage.spill_load_bytes, 0) << k.log;
  EXPECT_EQ(k.log.find("C7508"), std::string::npos) << k.log;
  return k.log;
}

} // namespace kiln_test
