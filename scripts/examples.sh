#!/usr/bin/env bash
# Runs the three tutorials in examples/ against a throwaway nats-server and
# checks what they print:
#   scripts/examples.sh EXAMPLES_DIR [BUILD_DIR]
# EXAMPLES_DIR holds the built tutorials (mirror_service, scheduled_export,
# seed_node); BUILD_DIR (default build) the kvfold binary and sample_writer.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"
examples=${1:?usage: scripts/examples.sh EXAMPLES_DIR [BUILD_DIR]}
build=${2:-build}

work=$(mktemp -d -t kvfold-examples-XXXXXX)
source scripts/nats-server.sh
trap 'stop_nats_server; rm -rf "$work"' EXIT
start_nats_server "$work"
fail() { echo "examples.sh: $*" >&2; exit 1; }

"$build/sample_writer" "$nats_url" routes 200 >/dev/null

# mirror_service: a fold filled by an earlier run is loaded at start, so
# lookups are answered at once; deleted keys have no route.
"$build/kvfold" -q mirror --server "$nats_url" --bucket routes --fold "$work/svc" --until-caught-up
printf 'config.2\nconfig.14\nusers.9\nnope\n' |
  "$examples/mirror_service" "$nats_url" routes "$work/svc" >"$work/svc.out" 2>"$work/svc.err"
expected='config.2 -> value-2
config.14 -> value-14-updated
users.9 -> (no route)
nope -> (no route)'
[ "$(cat "$work/svc.out")" = "$expected" ] ||
  fail "mirror_service answered:"$'\n'"$(cat "$work/svc.out" "$work/svc.err")"
grep -q "loaded 180 routes from the fold" "$work/svc.err" || fail "mirror_service: $(cat "$work/svc.err")"
echo "examples.sh: mirror_service answered from the fold it loaded"
printf '/metrics\n' | "$examples/mirror_service" "$nats_url" routes "$work/svc" >"$work/svc.out" 2>/dev/null
grep -q '^kvfold_caught_up 1$' "$work/svc.out" ||
  fail "mirror_service served no caught-up metrics: $(cat "$work/svc.out")"

# scheduled_export: three rounds a second apart; this node always wins the
# lease, so a round writes an artifact once its watch has caught up (the
# first, unless the machine is slow) and later rounds find nothing newer.
"$examples/scheduled_export" "$nats_url" routes "$work/exp" "dir:$work/arts" 1 3 >"$work/exp.out" \
  2>"$work/exp.err" || fail "scheduled_export: $(cat "$work/exp.err")"
grep -q "^round [0-9]*: wrote " "$work/exp.out" || fail "scheduled_export wrote nothing: $(cat "$work/exp.out" "$work/exp.err")"
echo "examples.sh: scheduled_export: $(head -1 "$work/exp.out")"

# seed_node: a new node from that artifact, then the writes since.
"$build/sample_writer" "$nats_url" routes 50 >/dev/null
"$examples/seed_node" "$nats_url" routes "dir:$work/arts" "$work/seeded" >"$work/seed.out" \
  2>"$work/seed.err" || fail "seed_node: $(cat "$work/seed.err")"
grep -q "^seeded from " "$work/seed.out" || fail "seed_node did not seed: $(cat "$work/seed.out")"
"$build/kvfold" -q mirror --server "$nats_url" --bucket routes --fold "$work/svc" --until-caught-up
[ "$("$build/kvfold" dump --fold "$work/seeded")" = "$("$build/kvfold" dump --fold "$work/svc")" ] ||
  fail "the seeded node differs from a node that mirrored everything"
echo "examples.sh: seed_node: $(tr '\n' ' ' <"$work/seed.out")"
echo "examples.sh: all three tutorials ran"
