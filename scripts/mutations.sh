#!/usr/bin/env bash
# Runs the tests once per mutation point (see src/core/mutation.h), switched
# at run time by KVFOLD_MUTATION in a build made with -DKVFOLD_MUTATIONS=ON,
# and fails unless every mutant is caught. A mutant is tried against the
# unit + simulation tests first, then the live tests that drive the real
# delivery through a dropping proxy (a real nats-server), then the
# fault-schedule simulation's quick tier (faults inside the store); the
# first tier that fails catches it.
#   scripts/mutations.sh [BUILD_DIR] [JOBS]
# BUILD_DIR (default build, as test.sh builds it) must be configured with
# -DKVFOLD_MUTATIONS=ON. JOBS workers (default 2) take the mutants in turn,
# side by side, each with a port range of its own for the live tier
# (KVFOLD_TEST_PORTS). Prints `mutation NAME: caught by TIER (TEST)` per
# mutant, in the list's order, then exactly one line `mutations: K/N
# caught`, and lists the survivors. The test that caught a mutant last time
# runs first (scripts/mutation-catchers; see caught_by below).
# KVFOLD_MUTATION_NATS_SERVER, when set, names a nats-server with limit
# markers (2.11+) for the live tests that need one.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
jobs=${2:-2}
unit="$dir/tests/kvfold_unit_tests"
sim="$dir/tests/kvfold_sim"
live="$dir/tests/kvfold_live_tests"
for bin in "$unit" "$sim" "$live"; do
  [ -x "$bin" ] || { echo "mutations: $bin not built (scripts/test.sh builds it)" >&2; exit 1; }
done
mutants=$(sed -n 's/^ *"\([a-z0-9-]*\)",.*/\1/p' src/core/mutation.cc)
# A point the code checks but the list lacks can never be switched on: it
# would pass here untried.
unlisted=$(grep -rhoE 'KVFOLD_MUTANT\("[a-z0-9-]+"\)' src | sed -E 's/.*\("(.*)"\)/\1/' | sort -u |
  grep -vxF -f <(echo "$mutants") || true)
if [ -n "$unlisted" ]; then
  echo "mutations: points missing from src/core/mutation.cc's list: $unlisted" >&2
  exit 1
fi
work=$(mktemp -d -t kvfold-mutants-XXXXXX)
trap 'rm -rf "$work"' EXIT

# run_tier M TIER FILTER LOG: runs TIER's tests with mutant M switched on,
# only those FILTER names when given, and fails when one fails (or hangs:
# the timeout catches it too). --gtest_fail_fast: the first failing test is
# enough. A tier this run cannot hold (no newest server) passes.
live_filter='DeliveryGapLiveTest.*:WatchLiveTest.HeartbeatsKeep*:WatchLiveTest.ASlowConsumer*:DeltaDeliveryLiveTest.*:WatchLiveTest.AResume*:AuditLiveTest.*:WatchLiveTest.LimitMarker*:CliLiveTest.ProbesAnswer*:CliLiveTest.SecretsGiven*:*TransportLiveTest.AnObjectLargerThanAskedIsRefusedUnread/obj:S3LiveTest.AMultipartCompletion*:S3LiveTest.ARotatedSessionToken*'
run_tier() {
  local m=$1 tier=$2 filter=$3 log=$4
  case "$tier" in
    unit)
      KVFOLD_MUTATION="$m" timeout 180 "$unit" --gtest_brief=1 --gtest_fail_fast \
        --gtest_filter="${filter:-*}" ;;
    # The live tests that drive the real delivery through a dropping proxy
    # (the S3 tests need s3rver, KVFOLD_S3RVER, which test.sh exports).
    live)
      KVFOLD_MUTATION="$m" timeout 120 "$live" --gtest_brief=1 --gtest_fail_fast \
        --gtest_filter="${filter:-$live_filter}" ;;
    # Rules that only a server with limit markers or per-message TTL (2.11+)
    # exercises, on the newest server when test.sh names it.
    live-newest)
      [ -n "${KVFOLD_MUTATION_NATS_SERVER:-}" ] || return 0
      KVFOLD_MUTATION="$m" KVFOLD_NATS_SERVER="$KVFOLD_MUTATION_NATS_SERVER" timeout 120 "$live" \
        --gtest_brief=1 --gtest_fail_fast \
        --gtest_filter="${filter:-DeltaDeliveryLiveTest.AnAbsence*:AuditLiveTest.*Marker*:RepairLiveTest.TtlKeysWithoutLimitMarkers*:RepairLiveTest.AnExpiryWithHistory*}" ;;
    # The idle heartbeat rule: a test that waits out heartbeats (20 s).
    live-idle)
      KVFOLD_MUTATION="$m" timeout 120 "$live" --gtest_brief=1 --gtest_fail_fast \
        --gtest_filter="${filter:-WatchLiveTest.AnIdle*}" ;;
    sim)
      KVFOLD_MUTATION="$m" timeout 600 "$sim" --quick --fail-fast --threads 2 ;;
  esac >"$log" 2>&1
}

# The test that caught each mutant last time (scripts/mutation-catchers,
# "NAME TIER TEST") runs first, alone: most mutants are caught in a second
# instead of after every test before theirs. A hint that no longer catches
# its mutant only costs time: the tiers then run whole, as without one.
declare -A hint
if [ -f scripts/mutation-catchers ]; then
  while read -r name tier test; do
    [ -n "$name" ] && [ "${name:0:1}" != "#" ] && hint[$name]="$tier $test"
  done <scripts/mutation-catchers
fi

# passes_alone TIER TEST: whether TEST passes on its own with no mutant, so
# that its failure with one is the mutant's doing (a test that fails run
# alone would otherwise catch every mutant hinted to it). Once per test and
# worker (its result kept in $work/alone.$w); a whole tier ("-") is run
# without a mutant by the other tiers of test.sh.
passes_alone() {
  local tier=$1 test=$2 seen="$work/alone.$w"
  [ "$test" = - ] && return 0
  touch "$seen"
  if ! grep -qxF "$tier $test" "$seen" && ! grep -qxF "! $tier $test" "$seen"; then
    if run_tier "" "$tier" "$test" "$work/alone-log.$w"; then
      echo "$tier $test" >>"$seen"
    else
      echo "! $tier $test" >>"$seen"
      echo "mutations: $test ($tier) fails with no mutant: its hints are not taken" >&2
    fi
  fi
  grep -qxF "$tier $test" "$seen"
}

# Prints "TIER TEST" for the first tier (and its first failing test, "-"
# when none is named, as for a hang or the simulation) that fails with
# mutant $1, or nothing. Tiers in order: the unit + simulation tests, the
# live tests, those on the newest server, the idle test for the quiet-*
# points only, then the fault-schedule simulation's quick tier.
caught_by() {
  local m=$1 log=$2 tier test tiers="unit live live-newest"
  case "$m" in quiet-*) tiers="$tiers live-idle" ;; esac
  tiers="$tiers sim"
  if [ -n "${hint[$m]:-}" ]; then
    read -r tier test <<<"${hint[$m]}"
    if ! run_tier "$m" "$tier" "${test#-}" "$log" && passes_alone "$tier" "$test"; then
      echo "$tier $test hinted"
      return
    fi
  fi
  for tier in $tiers; do
    if ! run_tier "$m" "$tier" "" "$log"; then
      test=$(sed -nE 's/^\[  FAILED  \] ([^ ,]+)[ ,].*/\1/p' "$log" | head -1)
      echo "$tier ${test:--}"
      return
    fi
  done
}

# Worker w takes mutants w, w+jobs, ...; its ports are its share of
# KVFOLD_TEST_PORTS (default 10000-31999), so workers never collide.
range=${KVFOLD_TEST_PORTS:-10000-31999}
low=${range%-*} span=$(((${range#*-} - ${range%-*} + 1) / jobs))
worker() {
  local w=$1 i=0 m
  export KVFOLD_TEST_PORTS="$((low + w * span))-$((low + (w + 1) * span - 1))"
  for m in $mutants; do
    if [ $((i % jobs)) = "$w" ]; then
      echo "$i $m $(caught_by "$m" "$work/log.$w")"
    fi
    i=$((i + 1))
  done >"$work/result.$w"
}
pids=()
for w in $(seq 0 $((jobs - 1))); do
  worker "$w" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

# The catchers found, as scripts/mutation-catchers wants them (copy it
# there when hints went stale or mutants were added).
catchers="$dir/mutation-catchers"
echo "# mutant tier test (written by scripts/mutations.sh)" >"$catchers"
survivors=() stale=0
while read -r _ m tier test hinted; do
  if [ -z "$tier" ]; then
    echo "mutation $m: NOT caught"
    survivors+=("$m")
  else
    echo "mutation $m: caught by $tier ($test)"
    echo "$m $tier $test" >>"$catchers"
    [ -n "$hinted" ] || stale=$((stale + 1))
  fi
done < <(cat "$work"/result.* | sort -n)
[ "$stale" = 0 ] || echo "mutations: $stale mutants caught without a hint; fresh hints in $catchers"
total=$(echo "$mutants" | wc -w)
# Every mutant has its line: one without (a worker that died) is no catch.
if [ "$(cat "$work"/result.* | wc -l)" != "$total" ]; then
  echo "mutations: $(cat "$work"/result.* | wc -l) results for $total mutants" >&2
  exit 1
fi
echo "mutations: $((total - ${#survivors[@]}))/$total caught"
if [ "${#survivors[@]}" -gt 0 ]; then
  echo "mutations: survivors: ${survivors[*]}" >&2
  exit 1
fi
