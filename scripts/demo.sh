#!/usr/bin/env bash
# The main job end to end on an embedded default: installs what is missing,
# builds, starts its own nats-server on a loopback port in a temp dir, writes
# sample data to a bucket, mirrors it into a fold, prints `status` and part
# of `dump`, exports an artifact and seeds a second fold from it (which then
# resumes mirroring delta-only), runs a mirror that serves Prometheus
# metrics and prints some of them, and stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

scripts/install-deps.sh
scripts/build.sh build >/dev/null

work=$(mktemp -d -t kvfold-demo-XXXXXX)
source scripts/nats-server.sh
cleanup() {
  stop_nats_server
  rm -rf "$work"
}
trap cleanup EXIT

start_nats_server "$work"
url=$nats_url
echo "== nats-server with JetStream on $url"

build/sample_writer "$url" demo 1000
echo "== kvfold mirror --until-caught-up"
build/kvfold mirror --server "$url" --bucket demo --fold "$work/fold" --until-caught-up
echo "== kvfold status"
build/kvfold status --fold "$work/fold"
echo "== kvfold dump (first 5 lines)"
{ build/kvfold dump --fold "$work/fold" || true; } | head -5
echo "== kvfold dump --json --scope config.1 (first 3 lines)"
{ build/kvfold dump --fold "$work/fold" --json --scope config.1 || true; } | head -3
echo "== more writes, then a delta-only resume"
build/sample_writer "$url" demo 20 >/dev/null
build/kvfold mirror --server "$url" --bucket demo --fold "$work/fold" --until-caught-up
build/kvfold status --fold "$work/fold" --json
echo "== kvfold export to a directory, inspect it, seed a second node's fold from it"
build/kvfold export --fold "$work/fold" --to "dir:$work/artifacts"
build/kvfold artifacts inspect "dir:$work/artifacts"
build/kvfold seed --fold "$work/fold2" --from "dir:$work/artifacts"
build/sample_writer "$url" demo 30 >/dev/null
build/kvfold mirror --server "$url" --bucket demo --fold "$work/fold2" --until-caught-up
build/kvfold status --fold "$work/fold2"
echo "== a mirror that keeps following, with Prometheus metrics (--metrics-addr; port 0 picks one)"
build/kvfold mirror --server "$url" --bucket demo --fold "$work/fold" \
  --metrics-addr 127.0.0.1:0 2>"$work/mirror.log" &
mirror_pid=$!
metrics_port=""
for _ in $(seq 1 100); do
  metrics_port=$(sed -n 's|.*serving metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' \
    "$work/mirror.log" | head -1)
  [ -n "$metrics_port" ] && break
  sleep 0.1
done
[ -n "$metrics_port" ] || { cat "$work/mirror.log" >&2; exit 1; }
build/sample_writer "$url" demo 40 >/dev/null
sleep 1
# GET /metrics with bash alone (no curl needed).
exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
echo "GET http://127.0.0.1:$metrics_port/metrics (some of it):"
grep -E '^kvfold_(cursor|stream_last_sequence|lag_messages|commits_total|changes_total\{op="(put|delete)",origin="live"\})' <&3
exec 3<&-
kill -TERM "$mirror_pid"
wait "$mirror_pid"
cat "$work/mirror.log"
