// What the attention host API's launches share (forward, fa1_forward, backward): kernels compiled for
// explicit configs and kept for the process's life, the one KernelTuner the entry points pick configs with,
// and the check that a GPU driver is there. Internal to kernels/attention.
#pragma once

#include "jit/tuned_kernel.h"
#include "kernels/attention/attention_api_checks.h"

#include <memory>

namespace kiln::attention::detail {

// `def` compiled for `config` on the current device, built and compiled once per process.
std::shared_ptr<JitKernel> compiled_for(const KernelDef& def, const Config& config);

// The tuner every attention entry point selects configs through (its picks are kept for the process's life).
KernelTuner& attention_tuner();

// An error for `site` when no GPU driver can be loaded.
void require_driver(const ApiSite& site);

} // namespace kiln::attention::detail
