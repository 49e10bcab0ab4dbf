# Run as a script (cmake -DSOURCE_DIR=... -DINPUTS=<a file listing paths> -DOUTPUT=... -P code_generator_hash.cmake)
# at build time: writes OUTPUT, a C++ file defining kiln::code_generator_hash(), the SHA-256 (first 16 hex digits)
# of the listed sources, those that decide the code a kernel is given (CMakeLists.txt lists them). Autotuning
# results are kept under it (runtime/tuning_cache.h), so that a build whose code generator changed tunes again
# instead of launching an old pick. OUTPUT is rewritten only when the hash changes.
file(STRINGS ${INPUTS} inputs)
list(SORT inputs)
set(digests "")
foreach(path ${inputs})
  file(RELATIVE_PATH name ${SOURCE_DIR} ${path})
  file(SHA256 ${path} digest)
  string(APPEND digests "${name} ${digest}\n")
endforeach()
string(SHA256 hash "${digests}")
string(SUBSTRING ${hash} 0 16 hash)
set(text "// Generated at build time by cmake/code_generator_hash.cmake; do not edit.
#include \"support/version.h\"

namespace kiln {
const char* code_generator_hash() { return \"${hash}\"; }
} // namespace kiln
")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
