#!/usr/bin/env bash
# ThreadSanitizer over every test with threads: nats.c's callback threads,
# the background committer, the export worker, readers beside a writer.
# A deep tier (scripts/nightly.sh runs it; CI does not: about 11 minutes on
# 2 cores). Builds build-tsan and runs the unit + simulation and the live
# tests but the 3-node cluster (under TSan's slowdown its consumer creates
# time out through every leader election).
#   scripts/tsan.sh [BUILD_DIR]      (default build-tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"   # Debian installs nats-server in sbin
dir=${1:-build-tsan}
# The S3 transport's live tests too, as in scripts/test.sh: a missing
# s3rver fails them instead of skipping them.
KVFOLD_S3RVER=${KVFOLD_S3RVER:-$(scripts/fetch-s3rver.sh)}
export KVFOLD_S3RVER KVFOLD_REQUIRE_S3RVER=1
# -O1, the least TSan's docs allow: it compiles in half the time of -O2.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" \
  -DKVFOLD_TSAN=ON -DKVFOLD_WERROR=ON -DKVFOLD_BUILD_EXAMPLES=OFF -DKVFOLD_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" -j2 --target kvfold_unit_tests kvfold_live_tests kvfold_cli
# ASLR off: some kernels map memory where TSan's shadow expects none.
# history_size=7: the most history TSan keeps, so a race shows both stacks.
supp=$PWD/tests/tsan.supp
(cd "$dir" && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=7 suppressions=$supp" \
   GTEST_FILTER='-ClusterLiveTest.*' setarch "$(uname -m)" -R ctest --output-on-failure -L 'unit|live')
