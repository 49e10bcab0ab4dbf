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

} // namespace kiln
