#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs dependencies, checks the
# formatting (scripts/format.sh), builds once (with the mutation points
# compiled in, off unless switched on at run time), then runs the tiers in
# two lanes side by side, each with a port range of its own
# (KVFOLD_TEST_PORTS): one of tiers that mostly wait on servers, one of
# tiers that mostly use the CPU, so that the two cores stay busy to the end:
#   waiting:  the unit + simulation and live tests (each live test starts
#             its own nats-server, or a 3-node cluster, on loopback) on
#             Debian's nats-server and the newest of trixie and sid; the
#             ASan+UBSan unit + simulation and live tests (nats.c calls
#             back on its own threads: lifetime bugs show up there), once
#             the other lane built them; network faults in namespaces and
#             full disks;
#   CPU:      the ASan+UBSan (Debug) build; the process kill campaign, the
#             fault-schedule simulation and the exhaustive model; a Release
#             shared build with warnings as errors, the Debian package, the
#             installed package built against out of tree, and the
#             tutorials; every mutation point, each switched on at run time
#             to show its correctness step is guarded by a test.
# A lane runs every tier even after one failed. Each lane's output is
# printed whole when both are done, each tier's with the time it took;
# `[m:ss]` marks the end of each tier.
# ThreadSanitizer, like the longer campaigns, is in scripts/nightly.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"   # Debian installs nats-server in sbin

scripts/install-deps.sh
# Every build compiles through ccache (CMake reads the launcher from the
# environment), cached outside the clone: a repeat run on this machine
# recompiles only what changed. Paths are hashed relative to the clone, so
# a fresh clone elsewhere hits the same cache.
export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
export CCACHE_DIR=${KVFOLD_CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kvfold/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
ccache --zero-stats >/dev/null
# The S3 transport's live tests start s3rver (from the npm registry), and
# in front of it a proxy that checks every request's signature with the
# AWS SDK's signer (also from the npm registry); in CI a missing one fails
# them instead of skipping them.
KVFOLD_S3RVER=$(scripts/fetch-s3rver.sh)
KVFOLD_S3_SIGV4=$(scripts/fetch-sigv4-verifier.sh)
export KVFOLD_S3RVER KVFOLD_REQUIRE_S3RVER=1 KVFOLD_S3_SIGV4 KVFOLD_REQUIRE_S3_SIGV4=1
# The server matrix: the live tier again on the newest nats-server of
# Debian's trixie (2.10.x) and sid (2.15.x), fetched into a cache beside
# the system's package (scripts/fetch-nats-servers.sh). Tests that need a
# feature a server lacks read it from the server and skip.
servers=$(scripts/fetch-nats-servers.sh)
start=$(date +%s)
# Marks the end of a stage with the minutes and seconds since the start.
step() { local t=$(( $(date +%s) - start )); printf 'test.sh: [%d:%02d] %s\n' $((t / 60)) $((t % 60)) "$1"; }

# lane NAME PORTS TIER...: runs the tiers (shell functions) one after
# another in the background as lane NAME, with its test ports in PORTS
# ("LOW-HIGH"), its output kept in a log; every tier runs, and the lane
# fails if one did. join_lanes: waits for both, prints each one's log in
# order, and fails if any tier failed.
logs=$(mktemp -d -t kvfold-test-XXXXXX)
pkg=$(mktemp -d -t kvfold-pkg-XXXXXX)
trap 'rm -rf "$logs" "$pkg"' EXIT
lanes=()
lane() {
  local name=$1 ports=$2
  shift 2
  (
    echo "$BASHPID" >"$logs/$name.pid"
    export KVFOLD_TEST_PORTS=$ports
    failed=""
    for tier in "$@"; do
      t0=$(date +%s)
      # Not `("$tier") || ...`: errexit is off in a command whose status is
      # tested, and a failing step inside the tier would go unnoticed.
      set +e
      (set -e; "$tier")
      rc=$?
      set -e
      echo "test.sh: tier $tier took $(( $(date +%s) - t0 )) s (exit $rc)"
      step "$tier"
      [ "$rc" = 0 ] || { failed="$failed $tier"; echo "test.sh: tier $tier failed" >>"$logs/failed"; }
    done
    touch "$logs/$name.done"
    [ -z "$failed" ]
  ) >"$logs/$name.log" 2>&1 &
  lanes+=("$name:$!")
}
join_lanes() {
  local t
  for t in "${lanes[@]}"; do
    wait "${t#*:}" || true
    # A lane that died between its tiers (killed, a full disk under its
    # bookkeeping) ran fewer than all: it fails too.
    [ -e "$logs/${t%%:*}.done" ] || echo "test.sh: lane ${t%%:*} did not finish" >>"$logs/failed"
  done
  for t in "${lanes[@]}"; do
    sed "s/^/[${t%%:*}] /" "$logs/${t%%:*}.log"
  done
  if [ -s "$logs/failed" ]; then
    # A failed tier's log can be long and a CI page shows only its ends:
    # repeat what failed (test names, sanitizer reports, assertion lines)
    # last, where it is read.
    for t in "${lanes[@]}"; do
      t=${t%%:*}
      echo "test.sh: what failed in lane $t:"
      grep -E -A12 '^\[  FAILED  \]|Failure$|survivors:|ERROR: (Address|Leak)Sanitizer|runtime error:|^SUMMARY:|\*\*\*(Failed|Exception)|: error: |test.sh: .* (not|failed|did not)' \
        "$logs/$t.log" | head -80 | sed "s/^/[$t] /" || true
      # A test binary killed by a signal: the test it was in and its stack
      # (tests/crash_report.cc), and the last test started, if no report.
      grep -E -A40 '^\*\*\* signal [0-9]+ ' "$logs/$t.log" | head -60 | sed "s/^/[$t] /" || true
      grep -E '^\[ RUN      \]' "$logs/$t.log" | tail -1 | sed "s/^/[$t] last started: /" || true
    done
    echo "test.sh: FAILED: $(sed 's/^test.sh: //' "$logs/failed" | paste -sd ';' -)" >&2
    exit 1
  fi
}

# live_on SUITE VERSION BIN: the live tests on one more server. (S3, the
# directory transport and the client's move off a silent server do not
# depend on the server: the plain run covers them.)
live_on() {
  if (cd build && KVFOLD_NATS_SERVER="$3" GTEST_FILTER='-S3LiveTest.*:*TransportLiveTest.*/dir:*TransportLiveTest.*/s3:SilentServerLiveTest.*' \
        ctest --output-on-failure -L live); then
    echo "test.sh: live tests passed on nats-server $2 ($1)"
  else
    echo "test.sh: live tests failed on nats-server $2 ($1)"
    return 1
  fi
}

# The unit and live tests on the default server, then the live tests on
# every other but the newest (live_newest runs it in the CPU lane, once
# that lane's CPU work is done). Every server runs even after one failed:
# a failure on the first must not hide how the others fare.
live_matrix() {
  local failed=0 default suite version bin
  default=$(nats-server --version | sed 's/.*v//')
  if (cd build && ctest --output-on-failure -L 'unit|live'); then
    echo "test.sh: plain unit + live tests passed (nats-server $default)"
  else
    echo "test.sh: plain unit + live tests failed (nats-server $default)"
    failed=1
  fi
  while read -r suite version bin; do
    live_on "$suite" "$version" "$bin" || failed=1
  done < <(head -n -1 <<<"$servers")
  return "$failed"
}
live_newest() {
  # shellcheck disable=SC2046
  live_on $(tail -1 <<<"$servers")
}

# The tiers that print their counts: process kills (`kills:`), the
# fault-schedule simulation (`sim:`) and the exhaustive model (`model:`).
deep_tiers() {
  build/tests/kvfold_crash_tests --gtest_brief=1
  build/tests/kvfold_sim
  build/tests/kvfold_model
}

# Real faults around real processes: network namespaces with partitions,
# loss and cut links (`netfaults:`), and filesystems that fill up under
# the fold, an export and a seed (`diskfull:`). Each says plainly when this
# machine cannot run it (no CAP_NET_ADMIN, no mount) instead of its line.
# The cluster scenario runs on the newest server: on 2.9 a replica that
# rejoins after the partition can drift from the others (raft catch-up
# fixes of later releases), and a drifted cluster has no single truth.
fault_tiers() {
  NETFAULTS_CLUSTER_SERVER=$(tail -1 <<<"$servers" | awk '{print $3}') \
    scripts/netfaults.sh build
  scripts/diskfull.sh build
}

# Users build Release and Debug too: both must compile without warnings
# (Debug is the sanitizer build below; Release optimizes harder and warns
# where RelWithDebInfo does not). The Release build is also the shared
# library and the Debian package's build: scripts/package.sh builds the
# .deb, installs it with dpkg, verifies the systemd unit and purges it.
# Then the package as users consume it: every public header compiles on
# its own; the static (build) and shared (build-release) installs each
# build the example out of tree with find_package, and the static one with
# pkg-config; the tutorials, built against the installed package, run
# against a local nats-server; the README's code compiles and links.
package_tier() {
  scripts/package.sh build-release
  # The alert rules parse and fire as their tests say (the dashboard and the
  # rules are also checked against the served series by DeployFilesTest).
  promtool check rules deploy/prometheus/kvfold-alerts.yml
  (cd deploy/prometheus && promtool test rules kvfold-alerts.test.yml)
  local h name dir kind libdir rc pc
  for h in include/kvfold/*.h; do
    echo "#include \"kvfold/$(basename "$h")\"" |
      g++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -Iinclude -x c++ - ||
      { echo "test.sh: $h does not compile on its own" >&2; return 1; }
  done
  for kind in static:build shared:build-release; do
    name=${kind%%:*} dir=${kind#*:}
    cmake --install "$dir" --prefix "$pkg/$name" >/dev/null
    cmake -S examples -B "$pkg/examples-$name" -DCMAKE_PREFIX_PATH="$pkg/$name" >/dev/null
    cmake --build "$pkg/examples-$name" >/dev/null
    # Usage (exit 2) proves the binary loads and runs.
    libdir=$(dirname "$(find "$pkg/$name" -name kvfold.pc)")/..
    rc=0; LD_LIBRARY_PATH="$libdir" "$pkg/examples-$name/embed_mirror" 2>/dev/null || rc=$?
    [ "$rc" = 2 ] || { echo "test.sh: the $name example did not run (exit $rc)" >&2; return 1; }
  done
  pc="$(dirname "$(find "$pkg/static" -name kvfold.pc)")"
  g++ -std=c++20 examples/embed_mirror.cc -o "$pkg/embed_mirror_pc" \
    $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs --static kvfold)
  rc=0; "$pkg/embed_mirror_pc" 2>/dev/null || rc=$?
  [ "$rc" = 2 ] || { echo "test.sh: the pkg-config example did not run (exit $rc)" >&2; return 1; }
  # The README's and docs/embedding.md's code, linked against the package.
  KVFOLD_LINK_FLAGS="$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs --static kvfold)" \
    scripts/check-readme.sh
  echo "test.sh: package installs and builds out of tree (static and shared, CMake and pkg-config)"
  scripts/examples.sh "$pkg/examples-static" build
}

# The ASan+UBSan build, in the CPU lane; its tests wait for it in the
# other (asan.done or asan.failed in $logs says how it ended).
asan_build() {
  local rc=0
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKVFOLD_SANITIZE=ON \
    -DKVFOLD_WERROR=ON -DKVFOLD_BUILD_EXAMPLES=OFF >/dev/null &&
    cmake --build build-asan -j2 --target kvfold_unit_tests kvfold_live_tests kvfold_cli || rc=$?
  if [ "$rc" = 0 ]; then touch "$logs/asan.done"; else touch "$logs/asan.failed"; fi
  return "$rc"
}
# The 3-node cluster test runs in the plain tier only: under a sanitizer's
# slowdown its consumer creates time out through every leader election.
asan_tests() {
  while [ ! -e "$logs/asan.done" ]; do
    [ -e "$logs/asan.failed" ] && { echo "test.sh: the ASan build failed (CPU lane)" >&2; return 1; }
    # The CPU lane gone without a word (killed): no build is coming.
    if [ -e "$logs/cpu.pid" ] && ! kill -0 "$(cat "$logs/cpu.pid")" 2>/dev/null && [ ! -e "$logs/asan.done" ]; then
      echo "test.sh: the CPU lane ended before the ASan build did" >&2
      return 1
    fi
    sleep 5
  done
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     GTEST_FILTER='-ClusterLiveTest.*' ctest --output-on-failure -L 'unit|live')
}

# Every correctness step has a test that fails without it (run-time switch).
mutations() {
  KVFOLD_MUTATION_NATS_SERVER=$(tail -1 <<<"$servers" | awk '{print $3}') scripts/mutations.sh build 2
}

scripts/format.sh --check
scripts/check-readme.sh   # the README's code compiles (and links, in the package tier)
# The test build compiles the mutation points (src/core/mutation.h): each
# is inert unless KVFOLD_MUTATION names it, so the tiers below test the
# product's behaviour and scripts/mutations.sh switches one on per run.
scripts/build.sh build -DKVFOLD_MUTATIONS=ON
step "format check and build"

# The CPU lane starts with the ASan build, which the waiting lane needs
# after its live tiers; the mutations, whose workers are many short test
# runs, end it.
lane waiting 10000-17999 live_matrix asan_tests fault_tiers
lane cpu 18000-31999 asan_build deep_tiers package_tier mutations live_newest
join_lanes

# ThreadSanitizer is a deep tier (scripts/tsan.sh, run by scripts/nightly.sh):
# its own build and a second pass of the unit and live tests cost about 11
# minutes, past CI's budget.
echo "test.sh: ccache: $(ccache --print-stats | awk -F'\t' '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss)$/ {printf "%s %s ", $1, $2}')"
echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
