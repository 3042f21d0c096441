#!/usr/bin/env bash
# Configures and builds kvfold into build/ (or $1), with -j2 and warnings as
# errors (KVFOLD_WERROR; off by default for users' builds).
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVFOLD_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j2
