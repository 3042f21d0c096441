#!/usr/bin/env bash
# Formats every tracked C++ file with clang-format (.clang-format: Google
# style, 100 columns), or with --check lists the files that differ and
# fails. CI runs --check; the version is Debian 12's clang-format (14).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if ((${#bad[@]} > 0)); then
    echo "format.sh: not clang-formatted (run scripts/format.sh): ${bad[*]}" >&2
    exit 1
  fi
  echo "format.sh: ${#files[@]} files clang-formatted"
  exit 0
fi
clang-format -i "${files[@]}"
