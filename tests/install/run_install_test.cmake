# The install test (CTest `install.find_package`): installs kiln's build to a fresh prefix, then configures,
# builds and runs tests/install as a separate project that finds it with find_package(kiln), with the same
# compiler and generator as kiln's build.
#   cmake -DKILN_BUILD_DIR=... -DKILN_SOURCE_DIR=... -DWORK_DIR=... -DCXX=... -DGENERATOR=... -DMAKE_PROGRAM=...
#         -P run_install_test.cmake
foreach(var KILN_BUILD_DIR KILN_SOURCE_DIR WORK_DIR CXX GENERATOR MAKE_PROGRAM)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_install_test.cmake needs -D${var}=...")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (exit ${rc}): ${ARGN}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("installing kiln" ${CMAKE_COMMAND} --install ${KILN_BUILD_DIR} --prefix ${prefix})
foreach(must include/kiln/kiln.h include/dsl/dsl.h lib/cmake/kiln/kilnConfig.cmake)
  if(NOT EXISTS ${prefix}/${must})
    message(FATAL_ERROR "install test: ${prefix}/${must} was not installed")
  endif()
endforeach()
# No build type: the consumer's compile is the slow part, and the check needs no optimisation.
run_step("configuring the consumer project" ${CMAKE_COMMAND} -S ${KILN_SOURCE_DIR}/tests/install -B ${WORK_DIR}/build
         -G ${GENERATOR} -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_CXX_COMPILER=${CXX}
         -DCMAKE_PREFIX_PATH=${prefix})
run_step("building the consumer project" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("running the consumer program" ${WORK_DIR}/build/row_sum)
