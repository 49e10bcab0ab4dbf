// The CUDA toolkit's command-line tools (cuobjdump, ncu): where they are, and running one as a child
// process with its output captured. kiln works without them; the commands that use them say so.
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

// `name` from PATH, $CUDA_HOME/bin or /usr/local/cuda/bin; "" when none exists.
std::string find_cuda_tool(const std::string& name);

struct ToolOutput {
  int rc = -1;        // the exit code; negative when the tool could not be run or timed out
  std::string output; // stdout and stderr together
  std::string error;  // why it could not run, if it could not
};
// Runs `tool args...` (at most `timeout_s` seconds) with this process's environment.
ToolOutput run_cuda_tool(const std::string& tool, const std::vector<std::string>& args, unsigned timeout_s);

} // namespace kiln::cli
