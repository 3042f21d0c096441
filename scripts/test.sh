#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs dependencies, checks the
# formatting (scripts/format.sh), builds, runs the unit + simulation tests
# and the live tests (each live test starts its own nats-server, or a
# 3-node cluster, on free loopback ports), the process
# kill campaign, the fault-schedule simulation and the exhaustive model;
# compiles a Release shared build with warnings as errors and checks the
# installed package; builds with ASan+UBSan (Debug) and runs the unit +
# simulation and the live tests again under it (nats.c calls back on its
# own threads: lifetime bugs show up there); and runs the tests once per
# mutation point to show each correctness step is guarded by a test.
# ThreadSanitizer, like the longer campaigns, is in scripts/nightly.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"   # Debian installs nats-server in sbin

scripts/install-deps.sh
# Every build below compiles through ccache (CMake reads the launcher from
# the environment), cached outside the clone: a repeat run on this machine
# recompiles only what changed. Paths are hashed relative to the clone, so
# a fresh clone elsewhere hits the same cache.
export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
export CCACHE_DIR=${KVFOLD_CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kvfold/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
ccache --zero-stats >/dev/null
# The S3 transport's live tests start s3rver (from the npm registry); in
# CI a missing one fails them instead of skipping them.
KVFOLD_S3RVER=$(scripts/fetch-s3rver.sh)
export KVFOLD_S3RVER KVFOLD_REQUIRE_S3RVER=1
start=$(date +%s)
# Marks the end of a step with the minutes and seconds since the start.
step() { local t=$(( $(date +%s) - start )); printf 'test.sh: [%d:%02d] %s\n' $((t / 60)) $((t % 60)) "$1"; }

scripts/format.sh --check
scripts/build.sh build
step "format check and build"
(cd build && ctest --output-on-failure -L 'unit|live')
step "plain unit + live tests (nats-server $(nats-server --version | sed 's/.*v//'))"
# The server matrix: the live tier again on the newest nats-server of
# Debian's trixie (2.10.x) and sid (2.15.x), fetched into a cache beside
# the system's package (scripts/fetch-nats-servers.sh). Tests that need a
# feature a server lacks read it from the server and skip.
# (S3, the directory transport and the client's move off a silent server
# do not depend on the server: once is enough.)
servers=$(scripts/fetch-nats-servers.sh)
while read -r suite version bin; do
  (cd build && KVFOLD_NATS_SERVER="$bin" GTEST_FILTER='-S3LiveTest.*:*TransportLiveTest.*/dir:*TransportLiveTest.*/s3:SilentServerLiveTest.*' \
     ctest --output-on-failure -L live)
  step "live tests on nats-server $version ($suite)"
done <<<"$servers"
# Real faults around real processes: network namespaces with partitions,
# loss and cut links (`netfaults:`), and filesystems that fill up under
# the fold, an export and a seed (`diskfull:`). Each says plainly when this
# machine cannot run it (no CAP_NET_ADMIN, no mount) instead of its line.
# The cluster scenario runs on the newest server: on 2.9 a replica that
# rejoins after the partition can drift from the others (raft catch-up
# fixes of later releases), and a drifted cluster has no single truth.
NETFAULTS_CLUSTER_SERVER=$(tail -1 <<<"$servers" | awk '{print $3}') \
  scripts/netfaults.sh build
step "network faults"
scripts/diskfull.sh build
step "full disks"
# The tiers that print their counts: process kills (`kills:`), the
# fault-schedule simulation (`sim:`) and the exhaustive model (`model:`).
build/tests/kvfold_crash_tests --gtest_brief=1
step "kill campaign"
build/tests/kvfold_sim
step "simulation"
build/tests/kvfold_model
step "model"

# Users build Release and Debug too: both must compile without warnings
# (Debug is the sanitizer build below; Release optimizes harder and warns
# where RelWithDebInfo does not).
# It is also the shared-library build.
# It is also the Debian package's build: scripts/package.sh builds the
# .deb, installs it with dpkg, verifies the systemd unit and purges it.
scripts/package.sh build-release
step "Release shared build and Debian package"
# The alert rules parse and fire as their tests say (the dashboard and the
# rules are also checked against the served series by DeployFilesTest).
promtool check rules deploy/prometheus/kvfold-alerts.yml
(cd deploy/prometheus && promtool test rules kvfold-alerts.test.yml)

# The package as users consume it: every public header compiles on its own;
# the static (build) and shared (build-release) installs each build the
# example out of tree with find_package, and the static one with pkg-config.
for h in include/kvfold/*.h; do
  echo "#include \"kvfold/$(basename "$h")\"" |
    g++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -Iinclude -x c++ - ||
    { echo "test.sh: $h does not compile on its own" >&2; exit 1; }
done
pkg=$(mktemp -d -t kvfold-pkg-XXXXXX)
trap 'rm -rf "$pkg"' EXIT
for kind in static:build shared:build-release; do
  name=${kind%%:*} dir=${kind#*:}
  cmake --install "$dir" --prefix "$pkg/$name" >/dev/null
  cmake -S examples -B "$pkg/examples-$name" -DCMAKE_PREFIX_PATH="$pkg/$name" >/dev/null
  cmake --build "$pkg/examples-$name" >/dev/null
  # Usage (exit 2) proves the binary loads and runs.
  libdir=$(dirname "$(find "$pkg/$name" -name kvfold.pc)")/..
  rc=0; LD_LIBRARY_PATH="$libdir" "$pkg/examples-$name/embed_mirror" 2>/dev/null || rc=$?
  [ "$rc" = 2 ] || { echo "test.sh: the $name example did not run (exit $rc)" >&2; exit 1; }
done
PKG_CONFIG_PATH="$(dirname "$(find "$pkg/static" -name kvfold.pc)")" \
  g++ -std=c++20 examples/embed_mirror.cc -o "$pkg/embed_mirror_pc" \
    $(PKG_CONFIG_PATH="$(dirname "$(find "$pkg/static" -name kvfold.pc)")" pkg-config --cflags --libs --static kvfold)
rc=0; "$pkg/embed_mirror_pc" 2>/dev/null || rc=$?
[ "$rc" = 2 ] || { echo "test.sh: the pkg-config example did not run (exit $rc)" >&2; exit 1; }
echo "test.sh: package installs and builds out of tree (static and shared, CMake and pkg-config)"
# The tutorials, as built against the installed package, run against a
# local nats-server.
scripts/examples.sh "$pkg/examples-static" build
step "package"

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKVFOLD_SANITIZE=ON -DKVFOLD_MUTATIONS=ON \
  -DKVFOLD_WERROR=ON -DKVFOLD_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-asan -j2 --target kvfold_unit_tests kvfold_live_tests kvfold_cli
step "ASan build"
# The 3-node cluster test runs in the plain tier only: under a sanitizer's
# slowdown its consumer creates time out through every leader election.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   GTEST_FILTER='-ClusterLiveTest.*' ctest --output-on-failure -L 'unit|live')
step "ASan tests"

# ThreadSanitizer is a deep tier (scripts/tsan.sh, run by scripts/nightly.sh):
# its own build and a second pass of the unit and live tests cost about 11
# minutes, past CI's budget.

# Every correctness step has a test that fails without it (run-time switch).
cmake --build build-asan -j2 --target kvfold_sim
step "sim (ASan) build"
scripts/mutations.sh build-asan
step "mutations"

echo "test.sh: ccache: $(ccache --print-stats | awk -F'\t' '$1 ~ /^direct_cache_hit|^preprocessed_cache_hit|^cache_miss/ {printf "%s %s ", $1, $2}')"
echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
