#!/usr/bin/env bash
# Compiles every ```cpp block of the README and docs/embedding.md against
# the public headers, so the code a user copies compiles. Each block must be
# a whole translation unit (its includes and a main): nothing is wrapped
# around it. Syntax only by default (the public headers need no generated
# header and no dependency's header); with KVFOLD_LINK_FLAGS (an installed
# package's `pkg-config --cflags --libs --static kvfold`) each block is also
# linked against it, as scripts/test.sh does.
#   scripts/check-readme.sh [FILE.md...]   (paths from the repository root)
# Prints one line per block; fails if any block does not compile, or if a
# file has no cpp block at all.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${CXX:-g++}
files=("$@")
((${#files[@]} > 0)) || files=(README.md docs/embedding.md)

work=$(mktemp -d -t kvfold-check-readme-XXXXXX)
trap 'rm -rf "$work"' EXIT

failed=0
for md in "${files[@]}"; do
  [ -f "$md" ] || { echo "check-readme: $md: no such file" >&2; exit 1; }
  # One file per block, named by the line of its opening fence.
  rm -f "$work"/block-*.cc
  awk -v out="$work" '
    /^```cpp[[:space:]]*$/ && !inside { inside = 1; file = sprintf("%s/block-%06d.cc", out, NR); next }
    /^```[[:space:]]*$/ && inside { inside = 0; close(file); next }
    inside { print > file }
    END { if (inside) { print "unterminated cpp block" > "/dev/stderr"; exit 1 } }
  ' "$md"
  blocks=("$work"/block-*.cc)
  if [ ! -e "${blocks[0]}" ]; then
    echo "check-readme: $md: no cpp block" >&2
    failed=1
    continue
  fi
  for block in "${blocks[@]}"; do
    line=$((10#$(basename "$block" .cc | sed 's/^block-//')))
    lines=$(wc -l <"$block")
    if [ -n "${KVFOLD_LINK_FLAGS:-}" ]; then
      # shellcheck disable=SC2086  # the flags are words, as pkg-config prints them
      ok=0
      "$CXX" -std=c++20 -Wall -Wextra -Werror -x c++ "$block" -x none -o "$work/block" \
        $KVFOLD_LINK_FLAGS 2>"$work/err" || ok=$?
      what="compiles and links"
    else
      ok=0
      "$CXX" -std=c++20 -Wall -Wextra -Werror -fsyntax-only -Iinclude -x c++ "$block" \
        2>"$work/err" || ok=$?
      what="compiles"
    fi
    if [ "$ok" = 0 ]; then
      echo "check-readme: $md:$line ($lines lines) $what"
    else
      echo "check-readme: $md:$line ($lines lines) does NOT compile:" >&2
      sed "s|$block|$md (block at line $line)|" "$work/err" >&2
      failed=1
    fi
  done
done
exit "$failed"
