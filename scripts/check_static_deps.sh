#!/usr/bin/env bash
# Every binary (and libkiln.so, the C ABI) must run where only the CUDA driver exists: no libLLVM, libfmt, libcuda or libnvrtc
# in its dynamic dependencies (the latter two are opened with dlopen at run time).
set -euo pipefail
dir=${1:-build}
bad=0
for bin in "$dir"/kiln "$dir"/kiln_bench "$dir"/tests/kiln_*_tests "$dir"/capi/libkiln.so; do
  [ -x "$bin" ] || continue
  if ldd "$bin" | grep -E 'libLLVM|libfmt|libcuda|libnvrtc|libz3'; then
    echo "error: $bin links a library it must not (see above)"; bad=1
  fi
done
exit $bad
