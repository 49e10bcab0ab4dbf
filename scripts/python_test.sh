#!/usr/bin/env bash
# The Python package's suite (tests/python) against the *installed* package: a virtual environment in
# <build>/python-venv that sees the system's NumPy and pytest (Debian's python3-numpy, python3-pytest), the
# package pip-installed into it from <build>/python without network, and pytest run from outside the source
# tree. GPU tests (tests/python/gpu) skip, saying why, where torch or a GPU is missing.
# Usage: bash scripts/python_test.sh [build dir, default build-ci] [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build=$(realpath "${1:-build-ci}")
shift || true
py=${KILN_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
venv="$build/python-venv"
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation --no-index "$build/python"
cd "$venv" # the working directory goes on sys.path: not the repo, whose kiln/ holds C++ headers
"$venv/bin/python" -m pytest -v -rs -p no:cacheprovider "$repo/tests/python" "$@"
