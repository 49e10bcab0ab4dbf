# External dependencies, all from Debian packages (scripts/install_deps.sh installs them).
# LLVM Support and fmt are linked statically so that kiln's binaries run on machines that have
# neither (the GPU machines): we link libLLVMSupport.a by hand rather than through LLVM's exported
# target, whose interface drags in libz3.so, and take zlib and terminfo as static archives too.
find_package(Threads REQUIRED)

set(KILN_LLVM_ROOT "/usr/lib/llvm-14" CACHE PATH "LLVM 14 installation")
find_path(KILN_LLVM_INCLUDE llvm/Support/CommandLine.h PATHS ${KILN_LLVM_ROOT}/include NO_DEFAULT_PATH REQUIRED)
find_library(KILN_LLVM_SUPPORT_A libLLVMSupport.a PATHS ${KILN_LLVM_ROOT}/lib NO_DEFAULT_PATH REQUIRED)
find_library(KILN_LLVM_DEMANGLE_A libLLVMDemangle.a PATHS ${KILN_LLVM_ROOT}/lib NO_DEFAULT_PATH REQUIRED)
find_library(KILN_ZLIB_A libz.a REQUIRED)
find_library(KILN_TINFO_A libtinfo.a REQUIRED)

add_library(kiln_llvm_support INTERFACE)
target_include_directories(kiln_llvm_support SYSTEM INTERFACE ${KILN_LLVM_INCLUDE})
target_link_libraries(kiln_llvm_support INTERFACE
  ${KILN_LLVM_SUPPORT_A} ${KILN_LLVM_DEMANGLE_A} ${KILN_ZLIB_A} ${KILN_TINFO_A}
  Threads::Threads ${CMAKE_DL_LIBS} rt m)
add_library(kiln::llvm_support ALIAS kiln_llvm_support)

find_path(KILN_FMT_INCLUDE fmt/format.h REQUIRED)
add_library(kiln_fmt INTERFACE)
target_include_directories(kiln_fmt SYSTEM INTERFACE ${KILN_FMT_INCLUDE})
# fmt's headers only: its compiled part is support/fmt_library.cpp, in kiln_support (why: that file).
add_library(kiln::fmt ALIAS kiln_fmt)

find_package(GTest)
