// The shipped `kiln` command line: kiln::tool_main (kiln/tool_main.h) over kiln's own kernels. A user's tool
// is the same call over a registry that holds theirs.
#include "kiln/tool_main.h"

int main(int argc, char** argv) { return kiln::tool_main(argc, argv, kiln::builtin_kernels()); }
