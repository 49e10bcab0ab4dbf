#!/usr/bin/env bash
# kiln's main job: installs what is missing, builds, and runs `kiln demo`: FA2 forward written in the
# DSL, run in the interpreter (and on the GPU where one exists), checked against the double-precision
# reference, with the kernel's IR printed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake --preset dev >/dev/null
cmake --build --preset dev -j "$(nproc)" --target kiln
exec build/kiln demo "$@"
