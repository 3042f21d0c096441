#!/usr/bin/env bash
# Builds and runs the benchmarks; writes bench/REPORT.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build >/dev/null
build/kvfold_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  | tee bench/REPORT.txt
