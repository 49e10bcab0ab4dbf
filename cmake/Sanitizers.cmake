# Sanitizer instrumentation and the fuzz targets (the "sanitize" preset; docs/testing.md).
#
# KILN_SANITIZE: a -fsanitize= list (e.g. "address,undefined") applied to every target kiln builds. Undefined
#   behaviour is fatal (-fno-sanitize-recover=all), so a test that hits it fails instead of printing and passing.
# KILN_FUZZ: also builds the fuzz targets in tests/fuzz/ and registers their bounded runs as ctest tests.
set(KILN_SANITIZE "" CACHE STRING "Sanitizers for every target, as a -fsanitize= list (empty: none)")
option(KILN_FUZZ "Build the fuzz targets in tests/fuzz and run them (bounded) under ctest" OFF)

if(KILN_SANITIZE)
  add_compile_options(-fsanitize=${KILN_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${KILN_SANITIZE})
  # GCC's manual: "sanitizers tend to increase the rate of false positive warnings, most notably those around
  # -Wmaybe-uninitialized" (here: inside libstdc++'s <regex> at -O1). The ci preset keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
endif()
