# The install test (CTest `install.find_package`): installs kiln's build to a fresh prefix, then configures,
# builds and runs tests/install as a separate project that finds it with find_package(kiln), with the same
# compiler and generator as kiln's build: row_sum (a user's kernel run and checked), then my_kiln (kiln's
# command line over a user's kernel, kiln/tool_main.h) through list, emit and an unknown kernel's error.
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
foreach(must include/kiln/kiln.h include/kiln/tool_main.h include/dsl/dsl.h include/kernels/builtin.h
        lib/libkiln_tool.a lib/cmake/kiln/kilnConfig.cmake include/kiln/kiln_c.h lib/libkiln.so)
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

# `my_kiln CMD...` must exit with `rc` and print each of the strings after EXPECT (on stdout or stderr).
function(run_my_kiln rc)
  cmake_parse_arguments(arg "" "" "COMMAND;EXPECT" ${ARGN})
  execute_process(COMMAND ${WORK_DIR}/build/my_kiln ${arg_COMMAND} RESULT_VARIABLE got OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(JOIN " " cmd my_kiln ${arg_COMMAND})
  string(SUBSTRING "${out}" 0 400 head)
  message("${cmd}: exit ${got}\n${head}${err}")
  if(NOT got EQUAL rc)
    message(FATAL_ERROR "install test: ${cmd} exited ${got}, expected ${rc}")
  endif()
  foreach(want ${arg_EXPECT})
    string(FIND "${out}${err}" "${want}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "install test: ${cmd} did not print '${want}'")
    endif()
  endforeach()
endfunction()
run_my_kiln(0 COMMAND list EXPECT "layernorm" "BLOCK_N")
run_my_kiln(0 COMMAND emit layernorm --stage lowered --arch sm_80 EXPECT "lowered layernorm")
run_my_kiln(0 COMMAND run layernorm --shape n_rows=3,n_cols=20 --set BLOCK_N=32 --check --interpret
            EXPECT "layernorm n_rows=3 n_cols=20 on the interpreter" "check y: max abs error" ") ok")
run_my_kiln(1 COMMAND emit matmul EXPECT "my_kiln: error: no kernel named 'matmul'" "known kernels: layernorm")
# PTX and ptxas's resource usage need NVRTC (no driver): checked where it is, skipped with the reason elsewhere.
execute_process(COMMAND ${WORK_DIR}/build/my_kiln emit layernorm --stage ptx --arch sm_80
                RESULT_VARIABLE ptx_rc OUTPUT_VARIABLE ptx_out ERROR_VARIABLE ptx_err)
if(ptx_rc EQUAL 0 AND ptx_out MATCHES "\\.entry layernorm" AND ptx_err MATCHES "layernorm on sm_80: registers")
  message("my_kiln emit layernorm --stage ptx: ${ptx_err}")
elseif(NOT ptx_rc EQUAL 0 AND ptx_err MATCHES "NVRTC not found")
  message("install test: my_kiln emit --stage ptx skipped: ${ptx_err}")
else()
  message(FATAL_ERROR "install test: my_kiln emit layernorm --stage ptx (exit ${ptx_rc}) printed no PTX entry "
                      "and resource usage for layernorm: ${ptx_err}")
endif()
