#!/usr/bin/env bash
# Fuzzing at depth: builds the libFuzzer targets with clang (ASan+UBSan) in
# build-fuzz/ and runs each for KVFOLD_FUZZ_SECONDS (default 600), in
# KVFOLD_FUZZ_JOBS lanes at once (default 1).
#   scripts/fuzz.sh [TARGET...]     (default: every target)
# Seeds come from tests/fuzz/corpus/<target> (kept in the repo with every
# regression input; parser_robustness_test.cc replays them in each CI run).
# What a run learns goes to build-fuzz/corpus/<target>; a crash leaves its
# input in build-fuzz/crash-<target>-*. Prints per target libFuzzer's
# `Done N runs in S second(s)` and its final coverage (`cov:`, `ft:`,
# corpus size), and fails if any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
all=(manifestframe manifestenvelope chunkobject chunkrecords pointer objectmeta leaserecord foldrecord
  ackreply base64 objectname)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
seconds=${KVFOLD_FUZZ_SECONDS:-600}
jobs=${KVFOLD_FUZZ_JOBS:-1}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: KVFOLD_FUZZ_SECONDS must be a positive number, not '$seconds'" >&2; exit 2; }
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: KVFOLD_FUZZ_JOBS must be a positive number, not '$jobs'" >&2; exit 2; }

CXX=clang++ CC=clang cmake -S . -B build-fuzz -DKVFOLD_BUILD_FUZZERS=ON -DKVFOLD_BUILD_BENCH=OFF \
  -DKVFOLD_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined" >/dev/null
cmake --build build-fuzz -j2 --target "${targets[@]/#/fuzz_}" >/dev/null

# One target: its log in build-fuzz/fuzz-<target>.log, its summary on stdout.
run_one() {
  local t=$1 log=build-fuzz/fuzz-$1.log
  [ -d "tests/fuzz/corpus/$t" ] || { echo "fuzz $t: no seed corpus tests/fuzz/corpus/$t" >&2; return 1; }
  mkdir -p "build-fuzz/corpus/$t"
  local rc=0
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "build-fuzz/tests/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="build-fuzz/crash-$t-" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1 ||
    rc=$?
  local last
  last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE)' "$log" | tail -1 | tr -s ' \t' ' ')
  echo "fuzz $t: $(grep -E '^Done [0-9]+ runs' "$log" || echo 'no Done line') | ${last:-no status line}"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz $t: FAILED (rc $rc), see $log:" >&2
    grep -E '==[0-9]+==ERROR|runtime error|^SUMMARY' "$log" | head -5 >&2
    return 1
  fi
}

failed=0
pids=()
lane() {  # every jobs-th target, from $1
  local rc=0 i
  for ((i = $1; i < ${#targets[@]}; i += jobs)); do run_one "${targets[$i]}" || rc=1; done
  return "$rc"
}
for ((l = 0; l < jobs; ++l)); do
  lane "$l" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit "$failed"
