#include "codegen/target.h"

#include "support/error.h"

namespace kiln {

Target Target::parse(const std::string& arch) {
  for (int sm : {80, 86, 89, 90})
    if (arch == "sm_" + std::to_string(sm))
      return Target{sm, false};
  if (arch == "sm_90a")
    return Target{90, true};
  fail("unsupported GPU architecture '{}'; expected one of sm_80, sm_86, sm_89, sm_90, sm_90a", arch);
}

int64_t Target::max_shared_bytes_per_block() const {
  switch (sm) {
  case 80: return 163 * 1024;
  case 90: return 227 * 1024;
  default: return 99 * 1024; // sm_86, sm_89
  }
}

int64_t Target::max_shared_bytes_per_sm() const {
  switch (sm) {
  case 80: return 164 * 1024;
  case 90: return 228 * 1024;
  default: return 100 * 1024; // sm_86, sm_89
  }
}

int64_t Target::max_blocks_per_sm() const {
  switch (sm) {
  case 86: return 16;
  case 89: return 24;
  default: return 32; // sm_80, sm_90
  }
}

int64_t Target::max_threads_per_sm() const { return sm == 80 || sm == 90 ? 2048 : 1536; }

} // namespace kiln
