#!/usr/bin/env bash
# The main job end to end on an embedded default: installs what is missing,
# builds, starts its own nats-server on a loopback port in a temp dir, writes
# sample data to a bucket, mirrors it into a fold, prints `status` and part
# of `dump`, exports an artifact and seeds a second fold from it (which then
# resumes mirroring delta-only), and stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

scripts/install-deps.sh
scripts/build.sh build >/dev/null

work=$(mktemp -d -t kvfold-demo-XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# -p -1: the server picks a free port and logs it.
nats-server -js -a 127.0.0.1 -p -1 -sd "$work/store" -l "$work/server.log" &
server_pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*Listening for client connections on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.log" 2>/dev/null | head -1 || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "demo: nats-server did not start; see $work/server.log" >&2; exit 1; }
url="nats://127.0.0.1:$port"
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
