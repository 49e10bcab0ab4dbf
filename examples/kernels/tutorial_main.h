// The main() of tutorials 10-12: a program that is a user's own `kiln` over one kernel (kiln/tool_main.h), so
// `kiln_example_10 emit layernorm_fwd --stage ptx` works, and that with no arguments checks its kernel: it
// runs `run KERNEL <self_check> --check` (in the interpreter where no GPU is usable), which compares every
// output with the kernel's double-precision reference and exits non-zero when one does not match.
#pragma once

#include <kiln/kiln.h>

#include <string>
#include <vector>

namespace tutorial {

int tutorial_main(int argc, char** argv, kiln::KernelDef def, const std::vector<std::string>& self_check);

} // namespace tutorial
