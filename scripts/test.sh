#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs dependencies, builds, runs
# the unit + simulation tests and the live tests (each live test starts its
# own nats-server on a free loopback port), compiles a Release build with
# warnings as errors, then builds with ASan+UBSan (Debug) and runs the
# unit + simulation and the live tests again under the sanitizers
# (nats.c calls back on its own threads: lifetime bugs show up there), and
# the unit tests once per mutation point to show each correctness step is
# guarded by a test.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"   # Debian installs nats-server in sbin

scripts/install-deps.sh
start=$(date +%s)

scripts/build.sh build
(cd build && ctest --output-on-failure)

# Users build Release and Debug too: both must compile without warnings
# (Debug is the sanitizer build below; Release optimizes harder and warns
# where RelWithDebInfo does not).
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DKVFOLD_WERROR=ON \
  -DKVFOLD_BUILD_BENCH=OFF >/dev/null
cmake --build build-release -j2

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKVFOLD_SANITIZE=ON -DKVFOLD_MUTATIONS=ON \
  -DKVFOLD_WERROR=ON -DKVFOLD_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-asan -j2 --target kvfold_unit_tests kvfold_live_tests kvfold_cli
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -L 'unit|live')

# Every correctness step has a test that fails without it (run-time switch).
scripts/mutations.sh build-asan

echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
