#include "jit/compile_request.h"

namespace kiln {

rt::CompileRequest compile_request(const GeneratedKernel& generated, const std::string& arch) {
  rt::CompileRequest req;
  req.source = generated.source;
  req.kernel_name = generated.name;
  req.arch = arch;
  return req;
}

} // namespace kiln
