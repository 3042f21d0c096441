#!/usr/bin/env bash
# Runs the unit + simulation tests once per mutation point (see
# src/core/mutation.h), switched at run time by KVFOLD_MUTATION in a build
# made with -DKVFOLD_MUTATIONS=ON, and fails unless every mutant is caught.
#   scripts/mutations.sh [BUILD_DIR]      (default build-asan, as test.sh builds it)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-asan}
bin="$dir/tests/kvfold_unit_tests"
[ -x "$bin" ] || { echo "mutations: $bin not built (scripts/test.sh builds it)" >&2; exit 1; }
mutants=$(sed -n 's/^ *"\([a-z0-9-]*\)",.*/\1/p' src/core/mutation.cc)
survived=0
for m in $mutants; do
  # A mutant that makes a test hang is caught too, after the timeout.
  if KVFOLD_MUTATION="$m" timeout 120 "$bin" --gtest_brief=1 >/tmp/kvfold-mutant-$$.log 2>&1; then
    echo "mutation $m: NOT caught"
    survived=$((survived + 1))
  else
    failed=$(grep -c '^\[  FAILED  \].*ms)$' /tmp/kvfold-mutant-$$.log || true)
    echo "mutation $m: caught ($failed failing tests)"
  fi
done
rm -f /tmp/kvfold-mutant-$$.log
total=$(echo "$mutants" | wc -w)
echo "mutations: $((total - survived)) of $total caught"
[ "$survived" -eq 0 ]
