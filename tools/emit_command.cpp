// `kiln emit KERNEL`: a kernel at one stage of lowering: its IR, the lowering decisions, the generated CUDA,
// PTX from NVRTC (no GPU needed: jit/compile_offline.h) or SASS through cuobjdump; with the resource usage
// ptxas reports.
#include "codegen/codegen.h"
#include "dsl/printer.h"
#include "jit/compile_offline.h"
#include "runtime/compiler.h"
#include "support/error.h"
#include "tools/cli.h"
#include "tools/cuda_tools.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>

#include <cstdlib>

namespace kiln::cli {
namespace {

namespace cl = llvm::cl;

cl::SubCommand emit_sub("emit", "Print a kernel at one stage: ir, lowered, cuda, ptx or sass");
cl::opt<std::string> kernel_name(cl::Positional, cl::Required, cl::desc("<kernel>"), cl::sub(emit_sub),
                                 cl::cat(kiln_category()));
cl::list<std::string> sets("set",
                           cl::desc("Override a parameter: NAME=VALUE (repeatable, or comma-separated)"),
                           cl::value_desc("NAME=VALUE"), cl::sub(emit_sub), cl::cat(kiln_category()));
cl::opt<std::string> stage("stage", cl::desc("ir | lowered | cuda | ptx | sass (default cuda)"),
                           cl::init("cuda"), cl::sub(emit_sub), cl::cat(kiln_category()));
cl::opt<std::string> arch("arch",
                          cl::desc("Target arch, e.g. sm_80, sm_90a (default: this GPU's, else sm_90a)"),
                          cl::sub(emit_sub), cl::cat(kiln_category()));
cl::opt<std::string> output("o", cl::desc("Write to FILE instead of stdout"), cl::value_desc("FILE"),
                            cl::sub(emit_sub), cl::cat(kiln_category()));

std::string require_cuobjdump() {
  std::string tool = find_cuda_tool("cuobjdump");
  if (tool.empty())
    fail("--stage sass needs cuobjdump, which was not found (searched PATH, $CUDA_HOME/bin and "
         "/usr/local/cuda/bin); install the CUDA toolkit's cuobjdump or use --stage ptx");
  return tool;
}

std::string disassemble(const std::string& tool, const std::string& cubin) {
  llvm::SmallString<128> cubin_path;
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("kiln-emit", "cubin", fd, cubin_path))
    fail("--stage sass: cannot create a temporary file: {}", ec.message());
  {
    llvm::raw_fd_ostream os(fd, true);
    os << cubin;
  }
  const ToolOutput r = run_cuda_tool(tool, {"-sass", cubin_path.str().str()}, 60);
  llvm::sys::fs::remove(cubin_path);
  if (r.rc != 0)
    fail("cuobjdump -sass failed (exit {}): {}{}", r.rc, r.error, r.output);
  return r.output;
}

int run_emit(const KernelRegistry& kernels) {
  // -o, checked before any work; "-" (or none) is stdout.
  const OutputPath out{"-o", output == "-" ? std::string() : std::string(output)};
  check_output_paths({out});
  const KernelDef& def = kernels.find(kernel_name);
  const Config config = def.with_overrides(def.default_config(), parse_assignments(sets, "--set"));
  const std::string s = stage;
  if (s != "ir" && s != "lowered" && s != "cuda" && s != "ptx" && s != "sass")
    fail("--stage must be one of ir, lowered, cuda, ptx, sass; got '{}'", s);
  const std::string target_arch = arch.empty() ? default_arch() : std::string(arch);
  const Target target = Target::parse(target_arch); // rejects unknown arches before any work
  const Kernel k = def.build(config);
  if (s == "ir") {
    write_output(out, print_kernel(k));
    return 0;
  }
  if (s == "lowered" || s == "cuda") {
    const GeneratedKernel g = generate_cuda(k, target);
    write_output(out, s == "cuda"
                          ? g.source
                          : print_kernel(k) + "\n" + g.lowered + (g.lowered.ends_with("\n") ? "" : "\n"));
    return 0;
  }
  rt::validate_arch(target.arch());
  const std::string cuobjdump = s == "sass" ? require_cuobjdump() : ""; // before the compile, to fail fast
  const KernelArtifacts a = compile_offline(k, target.arch());
  write_output(out, s == "ptx" ? a.compiled.ptx : disassemble(cuobjdump, a.compiled.cubin));
  llvm::errs() << program_name() << ": resource usage: " << a.usage_summary() << "\n";
  // ptxas's advisories change what the kernel does (a wait it injected, products put in series); they are in
  // NVRTC's log, not in the PTX.
  for (const std::string& advisory : rt::ptxas_product_advisories(a.compiled.log))
    llvm::errs() << program_name() << ": " << advisory << "\n";
  return 0;
}

} // namespace

Command emit_command() { return {&emit_sub, run_emit}; }

} // namespace kiln::cli
