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
# (KVFOLD_TEST_PORTS). Prints `mutation NAME: caught by TIER` per mutant, in
# the list's order, then exactly one line `mutations: K/N caught`, and lists
# the survivors. KVFOLD_MUTATION_NATS_SERVER, when set, names a nats-server
# with limit markers (2.11+) for the live tests that need one.
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

# Prints the first tier that fails with mutant $1, or nothing. A mutant
# that makes a tier hang is caught too, after the timeout.
caught_by() {
  local m=$1 log=$2
  # --gtest_fail_fast: the first failing test is enough to catch it. The S3
  # tests need s3rver (KVFOLD_S3RVER, which test.sh exports); without it
  # they skip and their mutants survive.
  KVFOLD_MUTATION="$m" timeout 180 "$unit" --gtest_brief=1 --gtest_fail_fast >"$log" 2>&1 ||
    { echo unit; return; }
  KVFOLD_MUTATION="$m" timeout 120 "$live" --gtest_brief=1 --gtest_fail_fast \
    --gtest_filter='DeliveryGapLiveTest.*:AuditLiveTest.*:WatchLiveTest.LimitMarker*:CliLiveTest.ProbesAnswer*:CliLiveTest.SecretsGiven*:*TransportLiveTest.AnObjectLargerThanAskedIsRefusedUnread/obj:S3LiveTest.AMultipartCompletion*:S3LiveTest.ARotatedSessionToken*' \
    >"$log" 2>&1 ||
    { echo live; return; }
  # Rules that only a server with limit markers or per-message TTL (2.11+)
  # exercises, on the newest server when test.sh names it.
  if [ -n "${KVFOLD_MUTATION_NATS_SERVER:-}" ]; then
    KVFOLD_MUTATION="$m" KVFOLD_NATS_SERVER="$KVFOLD_MUTATION_NATS_SERVER" timeout 120 "$live" \
      --gtest_brief=1 --gtest_fail_fast --gtest_filter='AuditLiveTest.*Marker*:RepairLiveTest.TtlKeysWithoutLimitMarkers*:RepairLiveTest.AnExpiryWithHistory*' >"$log" 2>&1 ||
      { echo "live (newest server)"; return; }
  fi
  # The idle heartbeat rule: a test that waits out heartbeats (20 s), for
  # its own points only.
  case "$m" in
    quiet-*)
      KVFOLD_MUTATION="$m" timeout 120 "$live" --gtest_brief=1 --gtest_fail_fast \
        --gtest_filter='WatchLiveTest.AnIdle*' >"$log" 2>&1 || { echo "live (idle)"; return; }
      ;;
  esac
  KVFOLD_MUTATION="$m" timeout 600 "$sim" --quick --fail-fast --threads 2 >"$log" 2>&1 ||
    { echo sim; return; }
  echo ""
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

survivors=()
while read -r _ m tier; do
  if [ -z "$tier" ]; then
    echo "mutation $m: NOT caught"
    survivors+=("$m")
  else
    echo "mutation $m: caught by $tier"
  fi
done < <(cat "$work"/result.* | sort -n)
total=$(echo "$mutants" | wc -w)
echo "mutations: $((total - ${#survivors[@]}))/$total caught"
if [ "${#survivors[@]}" -gt 0 ]; then
  echo "mutations: survivors: ${survivors[*]}" >&2
  exit 1
fi
