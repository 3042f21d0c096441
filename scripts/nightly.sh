#!/usr/bin/env bash
# The deep tiers, for a nightly run (not in CI; hours on 2 cores), on the
# build scripts/test.sh makes (build/) and a clang fuzzing build:
#   - ThreadSanitizer over the unit + simulation and live tests
#     (scripts/tsan.sh: its own build, build-tsan);
#   - the kill campaign at ten times its CI size (KVFOLD_KILLS=300);
#   - the fault-schedule simulation at ten times its CI size (--deep: every
#     pair of commit faults, every commit fault crossed with every store
#     fault);
#   - the soak: 30 minutes (KVFOLD_SOAK_MINUTES) on a 3-node cluster with
#     kills, node restarts and, as root, the network scenarios of
#     scripts/netfaults.sh; on the newest server (per-message TTL) when
#     scripts/fetch-nats-servers.sh finds one;
#   - netfaults' cluster scenario on the system's nats-server (CI runs it
#     on the newest);
#   - each libFuzzer target for 10 minutes (scripts/fuzz.sh).
# Prints each tier's count line (`kills:`, `sim:`, `soak:`, and per target
# libFuzzer's `Done N runs` with its coverage) and fails if any tier fails.
#   scripts/nightly.sh [--skip-fuzz]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"
[ -x build/tests/kvfold_sim ] || scripts/build.sh build

# A failure of TSan, of netfaults' cluster scenario or of a fuzzer sets the
# exit code and the later tiers still run; the others stop the run.
rc=0
scripts/tsan.sh build-tsan || rc=$?
KVFOLD_KILLS=${KVFOLD_KILLS:-300} build/tests/kvfold_crash_tests --gtest_brief=1
build/tests/kvfold_sim --deep

# Without the newer servers (no archive reachable), the system's: the
# soak then runs without TTL keys and says so.
newest=$(scripts/fetch-nats-servers.sh | tail -1 | awk '{print $3}') || newest=$(command -v nats-server)
KVFOLD_NATS_SERVER=${KVFOLD_NATS_SERVER:-$newest} \
  KVFOLD_SOAK_MINUTES=${KVFOLD_SOAK_MINUTES:-30} \
  KVFOLD_SOAK_NETFAULTS=$PWD/scripts/netfaults.sh \
  build/tests/kvfold_live_tests --gtest_filter='SoakLiveTest.*'
# CI partitions its cluster on the newest server; here the system's (2.9
# on Debian 12), whose replicas may drift after a partition: the scenario
# says so plainly when they do (see docs/testing.md).
NETFAULTS_SCENARIOS=cluster NETFAULTS_CLUSTER_SERVER=$(command -v nats-server) scripts/netfaults.sh build ||
  rc=$?

[ "${1:-}" = "--skip-fuzz" ] && exit "$rc"
scripts/fuzz.sh || rc=$?
exit "$rc"
