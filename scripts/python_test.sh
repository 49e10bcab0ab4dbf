#!/usr/bin/env bash
# The Python package's suite (tests/python) against the *installed* package: by default a virtual environment
# in <build>/python-venv that sees the system's NumPy and pytest (Debian's python3-numpy, python3-pytest), the
# package pip-installed into it from <build>/python without network, and pytest run from outside the source
# tree. GPU tests (tests/python/gpu) skip, saying why, where torch or a GPU is missing.
#   bash scripts/python_test.sh [build dir, default build-ci] [pytest args...]
# KILN_PYTHON picks the interpreter (default /usr/bin/python3). KILN_PYTHON_VENV=0 installs into that
# interpreter's own environment instead of a new venv: on a GPU machine whose torch lives in a venv already
# (a venv made from a venv's python does not see the first one's packages).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build=$(realpath "${1:-build-ci}")
shift || true
py=${KILN_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || command -v "$py" >/dev/null || py=python3
if [ "${KILN_PYTHON_VENV:-1}" = 0 ]; then
  python=$py
else
  venv="$build/python-venv"
  rm -rf "$venv"
  "$py" -m venv --system-site-packages "$venv"
  python="$venv/bin/python"
fi
"$python" -m pip install --quiet --no-deps --no-build-isolation --no-index --force-reinstall "$build/python"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" # the working directory goes on sys.path: not the repo, whose kiln/ holds C++ headers
"$python" -m pytest -v -rs -p no:cacheprovider "$repo/tests/python" "$@"
