#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with the CI preset (warnings are errors),
# runs every GoogleTest suite through ctest, then the Python package's pytest suite on the installed package.
# GPU tests skip, saying why, where no GPU exists. Then the sanitize preset (ASan + UBSan): the unit, error
# and interp suites again, and every fuzz target for a bounded time (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake --preset ci >/dev/null
cmake --build --preset ci -j "$(nproc)"
bash scripts/check_static_deps.sh build-ci
ctest --preset ci -j "$(nproc)"
# The Python package, installed from the build into a venv, and its pytest suite (tests/python).
bash scripts/python_test.sh build-ci
# ctest lists skipped tests without their reason; print it once (every GPU test skips for the same one).
# (Captured first: `grep -q` on the pipe would close it early, and pipefail would read the test binary's SIGPIPE
# as "not skipped".)
gpu_probe=$(build-ci/tests/kiln_gpu_tests --gtest_filter='GpuVectorAdd.*' 2>&1 || true)
if grep -q '\[  SKIPPED \]' <<<"$gpu_probe"; then
  echo "GPU tests were skipped: $(grep -A1 ': Skipped' <<<"$gpu_probe" | tail -1)"
fi
echo "== sanitizers (ASan + UBSan): unit, error and interp suites, then each fuzz target for a bounded time =="
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "$(nproc)"
ctest --preset sanitize -j "$(nproc)"
grep -h '^fuzz driver:' build-sanitize/Testing/Temporary/LastTest.log || true # how many inputs each fuzz target ran
