#!/usr/bin/env bash
# Installs what kiln needs to build and test, from Debian's packages, where it is missing.
set -euo pipefail
packages=(cmake ninja-build g++ llvm-14-dev libfmt-dev libgtest-dev zlib1g-dev libncurses-dev
          python3-venv python3-setuptools python3-wheel python3-numpy python3-pytest) # the last line: tests/python
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
