// kiln_tutorial_tool: a user's tool (kiln::tool_main) over the tutorials' kernels (examples/kernels/), run as
// a process by the `run` CLI tests (tests/unit/cli_run_test.cpp, tests/gpu/cli_gpu_test.cpp). Beside the
// three kernels it registers two variants of the LayerNorm that a check must catch: one whose reference is
// wrong
// (`run --check` must fail, exit 1 and write nothing) and one with no reference (`--check` must be refused).
#include "examples/kernels/layernorm_fwd.h"
#include "examples/kernels/matmul_bias_gelu.h"
#include "examples/kernels/online_logsumexp.h"

#include <kiln/tool_main.h>

using namespace kiln;

int main(int argc, char** argv) {
  KernelRegistry kernels;
  kernels.add(tutorial::layernorm_fwd_def());
  kernels.add(tutorial::matmul_bias_gelu_def());
  kernels.add(tutorial::online_logsumexp_def());

  KernelDef wrong = tutorial::layernorm_fwd_def();
  wrong.name = "layernorm_wrong_reference";
  wrong.reference = [](const ReferenceInputs& in) {
    ReferenceOutputs out = tutorial::layernorm_fwd_reference(in);
    for (double& v : out.at("y"))
      v += 0.25; // far beyond f16's tolerance
    return out;
  };
  kernels.add(wrong);

  KernelDef unchecked = tutorial::layernorm_fwd_def();
  unchecked.name = "layernorm_no_reference";
  unchecked.reference = nullptr;
  kernels.add(unchecked);
  return tool_main(argc, argv, kernels);
}
