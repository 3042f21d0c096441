#!/usr/bin/env bash
# The disk-full tier: kvfold writing onto small filesystems of its own
# (tmpfs mounts) that fill up while it writes.
#
#   scripts/diskfull.sh [BUILD_DIR]     (default: build; needs root to mount)
#
#   1. mirror: the fold on a 4 MiB tmpfs while a writer puts ~16 MiB. The
#      mirror must stop (or wait) naming the lack of space, not crash or
#      hang, never report a cursor (metrics, log) beyond the one the fold
#      holds, and leave a fold that opens and equals the truth at its
#      cursor. After a remount with room, a restart --until-caught-up must
#      equal the reference fold.
#   2. export: to dir: on a 4 MiB tmpfs already holding a small artifact.
#      The export must fail clearly, LATEST must not move, the earlier
#      artifact must verify and seed; after a remount the export succeeds
#      and a seed from it equals the source fold.
#   3. seed: into a fold on a 10 MiB tmpfs. It must fail clearly, the
#      half-seeded fold must never pass for complete (status: no cursor;
#      mirror: refused); after a remount a re-run finishes it and it equals
#      the source fold.
#
# The truth is a reference mirror on the normal disk (--until-caught-up).
# Prints one line per scenario and then `diskfull: N scenarios, D diverged`;
# exits 1 when D > 0. Without the right to mount it prints
# `diskfull: skipped: <reason>` and exits 0.
set -euo pipefail
set -o errtrace # the ERR trap below also reports failures inside functions
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin" # Debian installs nats-server in sbin
export LC_ALL=C                     # byte order for sort/comm, as kvfold dump sorts
# shellcheck source=scripts/nats-server.sh
source scripts/nats-server.sh # start_nats_server, stop_nats_server

build=$(cd "${1:-build}" && pwd)
kvfold=$build/kvfold
sample_writer=$build/sample_writer
for bin in "$kvfold" "$sample_writer"; do
  [ -x "$bin" ] || { echo "diskfull: $bin is missing; build first (scripts/build.sh)" >&2; exit 1; }
done
nats_bin=${KVFOLD_NATS_SERVER:-nats-server}
command -v "$nats_bin" >/dev/null || { echo "diskfull: no nats-server ($nats_bin)" >&2; exit 1; }

bucket=diskfull
value_bytes=4096 # random base64: neither RocksDB nor zstd can shrink it much
bulk_keys=4000   # ~16 MiB of values: four times the small filesystems
small_fs=4m      # fold (scenario 1) and artifact directory (scenario 2)
seed_fs=10m      # scenario 3: room for the seed's first ~4 MiB chunk (and RocksDB's
                 # WAL preallocation), not for all four
big_fs=256m      # after freeing space
step_timeout=60  # no kvfold command may take longer: a hang is a finding

start=$SECONDS
work=$(mktemp -d -t kvfold-diskfull-XXXXXX)
# kvfold's readers (status, dump) keep a scratch directory under TMPDIR: one
# left by a reader killed on a time bound goes with $work.
mkdir "$work/tmp"
export TMPDIR=$work/tmp
mounts=()
cleanup() {
  local pid m
  # Our own background jobs first (an open file keeps a tmpfs busy); jobs
  # already reaped are not listed, so no stranger's pid is signalled.
  for pid in $(jobs -p); do
    [ "$pid" = "${nats_pid:-}" ] || kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in $(jobs -p); do
    [ "$pid" = "${nats_pid:-}" ] || wait_bounded "$pid" 10
  done
  stop_nats_server
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "diskfull: aborted at line $LINENO: $BASH_COMMAND" >&2' ERR

# ---------------------------------------------------------------- helpers

mount_small() { # DIR SIZE
  mkdir -p "$1"
  mount -t tmpfs -o "size=$2,mode=0755" tmpfs "$1"
  mounts+=("$1")
}
grow() { mount -o "remount,size=$big_fs" "$1"; }

# Runs a command under a time bound: stdout in $work/NAME.out, stderr in
# $work/NAME.err, exit status in $rc (124: it hung and was killed).
run() {
  local name=$1
  shift
  rc=0
  timeout -k 5 "$step_timeout" "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
}

# Waits at most SECS for PID; its exit status in $rc, 124 if it had to be
# stopped (TERM, then KILL).
wait_bounded() { # PID SECS
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rc=124
    return
  fi
  rc=0
  wait "$pid" || rc=$?
}

# The error kvfold printed last (its ERROR line), on one line.
errmsg() { # FILE
  local line
  line=$(grep -a 'ERROR' "$1" | tail -n 1 || true)
  [ -n "$line" ] || line=$(tail -n 1 "$1" 2>/dev/null || true)
  printf '%s' "${line:0:500}"
}
# An exit status as words: "1", or "134 (SIGABRT)" for a death by signal.
exit_words() { # RC
  if [ "$1" -gt 128 ] && [ "$1" -ne 124 ]; then
    echo "$1 (SIG$(kill -l $(($1 - 128)) 2>/dev/null || echo "?"))"
  else
    echo "$1"
  fi
}
# A failure must be a stop kvfold chose, not a crash or a hang.
failed_cleanly() { # RC WHAT
  if [ "$1" -eq 0 ]; then
    problem "$2 exited 0"
  elif [ "$1" -eq 124 ]; then
    problem "$2 hung (killed after ${step_timeout} s)"
  elif [ "$1" -gt 128 ]; then
    problem "$2 crashed: exit $(exit_words "$1")"
  fi
}
names_no_space() { grep -qaiE 'no space|ENOSPC|disk (is )?full|out of (disk )?space' "$1"; }

# A field of `kvfold status --json` (a number, or null).
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$1"; }

# kvfold status --json into STATUS_FILE; cursor, keys, tombstones into
# st_cursor, st_keys, st_tomb ("" when status failed).
status_of() { # NAME FOLD
  run "$1" "$kvfold" status --fold "$2" --json
  st_cursor="" st_keys="" st_tomb=""
  if [ "$rc" -eq 0 ]; then
    st_cursor=$(field "$work/$1.out" cursor)
    st_keys=$(field "$work/$1.out" keys)
    st_tomb=$(field "$work/$1.out" tombstones)
  fi
}

# Prepares the NATS protocol for COUNT puts of random VALUE_BYTES values to
# keys PREFIX000001..., so the writer itself is only a copy to a socket.
make_puts() { # FILE PREFIX COUNT
  head -c $(($3 * value_bytes * 3 / 4)) /dev/urandom | base64 -w "$value_bytes" |
    awk -v s="\$KV.$bucket.$2" '{ printf "PUB %s%06d %d\r\n%s\r\n", s, NR, length($0), $0 }' >"$1"
}

# The writer: sends FILE on one plain NATS connection in PARTS pieces (a
# steady stream the mirror's metrics can be watched through, not one
# burst), then puts KEY with a JetStream ack. The stream stores a
# connection's messages in order, so that ack proves everything before it
# stored; prints its stream sequence.
send_puts() { # FILE KEY [PARTS]
  local fd line ack="" part
  split -n "l/${3:-1}" "$1" "$1.part-"
  exec {fd}<>"/dev/tcp/127.0.0.1/$nats_port"
  IFS= read -r -t 5 line <&"$fd" || { echo "no INFO from nats-server" >&2; return 1; }
  printf 'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.diskfull 1\r\n' >&"$fd"
  for part in "$1".part-*; do
    cat "$part" >&"$fd"
    [ "${3:-1}" -eq 1 ] || sleep 0.05 # the pace, not a wait for anything
  done
  rm -f "$1".part-*
  # shellcheck disable=SC2016 # $KV is the subject's literal prefix
  printf 'PUB $KV.%s.%s _INBOX.diskfull 4\r\ndone\r\n' "$bucket" "$2" >&"$fd"
  while IFS= read -r -t 30 line <&"$fd"; do
    case $line in
      MSG*) IFS= read -r -t 5 ack <&"$fd" || true; break ;;
      -ERR*) echo "nats-server: $line" >&2; break ;;
    esac
  done
  exec {fd}>&-
  [[ $ack =~ \"seq\":([0-9]+) ]] || { echo "no ack for $2: ${ack:-none}" >&2; return 1; }
  echo "${BASH_REMATCH[1]}"
}

# kvfold_cursor from the mirror's /metrics (nothing if it is not served).
scrape_cursor() { # PORT
  local line
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 0
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  while IFS= read -r -t 2 line <&3; do
    if [[ $line == "kvfold_cursor "* ]]; then echo "${line#kvfold_cursor }"; fi
  done
  exec 3>&-
}

max_of() { awk 'BEGIN { m = "" } $1 != "" && (m == "" || $1 + 0 > m + 0) { m = $1 } END { print m }' "$@"; }

# Per-scenario bookkeeping: problems make a scenario diverge; logs named
# in s_logs are shown (their tails) when it does.
scenarios=0
diverged=0
begin() {
  s_name=$1 s_problems=() s_logs=() s_exit="-" s_msg="" s_compared=""
  scenarios=$((scenarios + 1))
}
problem() { s_problems+=("$*"); }
# Dumps FOLD and compares with the file EXPECTED; WHAT names it in problems.
same_dump() { # NAME FOLD EXPECTED WHAT
  run "$1" "$kvfold" dump --fold "$2"
  if [ "$rc" -ne 0 ]; then
    problem "$4: kvfold dump exit $rc: $(errmsg "$work/$1.err")"
    s_logs+=("$1.err")
  elif ! cmp -s "$work/$1.out" "$3"; then
    problem "$4: dump differs from the truth ($(wc -l <"$work/$1.out") vs $(wc -l <"$3") keys;" \
      "first difference: $(diff "$work/$1.out" "$3" | grep -m1 -E '^[<>]' | cut -c1-80 || true))"
  fi
}
end() {
  local verdict=ok p l
  if [ "${#s_problems[@]}" -gt 0 ]; then
    verdict=DIVERGED
    diverged=$((diverged + 1))
  fi
  echo "diskfull: $s_name: $verdict: $s_compared; exit $s_exit: \"$s_msg\""
  for p in "${s_problems[@]}"; do echo "  - $p"; done
  if [ "$verdict" != ok ]; then
    for l in "${s_logs[@]}"; do
      [ -s "$work/$l" ] || continue
      echo "  -- tail of $l:"
      tail -n 15 "$work/$l" | cut -c1-300 | sed 's/^/     /'
    done
  fi
}

# ---------------------------------------------------------------- setup

# Without CAP_SYS_ADMIN there is no tier: say so, do not pretend to run it.
mkdir "$work/probe"
if ! why=$(mount -t tmpfs -o size=1m tmpfs "$work/probe" 2>&1); then
  why=${why%%$'\n'*} # mount's first line says it; the rest points at dmesg
  echo "diskfull: skipped: cannot mount a tmpfs (${why:-mount failed}; needs root or CAP_SYS_ADMIN)"
  exit 0
fi
mounts+=("$work/probe")
umount "$work/probe"
mounts=()

# Its store on the normal disk: only kvfold's side may run out of space.
mkdir "$work/nats"
start_nats_server "$work/nats"
nats_port=${nats_url##*:}

# Phase A, before any scenario: overwrites and deletes (sample_writer, which
# also creates the bucket) and a few random values. Phase B only adds new
# keys, so a fold at any cursor holds exactly the truth's entries at or
# below that cursor (the check of scenario 1).
"$sample_writer" "$nats_url" "$bucket" 300 >/dev/null
make_puts "$work/small.proto" small. 40
send_puts "$work/small.proto" small.done >"$work/small.seq"
make_puts "$work/bulk.proto" bulk. "$bulk_keys"

# The reference fold on the normal disk: the truth at the end of phase A,
# and the source of the artifact already in place in scenario 2.
ref=$work/ref
run ref-a "$kvfold" mirror --server "$nats_url" --bucket "$bucket" --fold "$ref" --until-caught-up
[ "$rc" -eq 0 ] || { cat "$work/ref-a.err" >&2; exit 1; }
run ref-a-dump "$kvfold" dump --fold "$ref"
status_of ref-a-status "$ref"
cursor_a=$st_cursor
cp "$work/ref-a-dump.out" "$work/truth-a.dump"

mount_small "$work/e" "$small_fs"
arts=dir:$work/e/arts
run export-a "$kvfold" export --fold "$ref" --to "$arts" --json
[ "$rc" -eq 0 ] || { cat "$work/export-a.err" >&2; exit 1; }
artifact_a=$(sed -n 's/.*"artifact":"\([^"]*\)".*/\1/p' "$work/export-a.out")
cp "$work/e/arts/LATEST" "$work/latest-a"

# ---------------------------------------------------------------- 1. mirror

begin mirror
fold1=$work/m/fold
mount_small "$work/m" "$small_fs"
# Follows the bucket (no --until-caught-up: the writer is still writing);
# -v logs every commit's cursor, /metrics serves kvfold_cursor.
timeout -k 5 "$step_timeout" "$kvfold" -v mirror --server "$nats_url" --bucket "$bucket" \
  --fold "$fold1" --batch 100 --metrics-addr 127.0.0.1:0 2>"$work/s1-mirror.err" &
mirror_pid=$!
s_logs+=(s1-mirror.err)
metrics_port=""
for _ in $(seq 1 100); do
  metrics_port=$(sed -n 's|.*serving metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' \
    "$work/s1-mirror.err" | head -n 1)
  [ -n "$metrics_port" ] && break
  kill -0 "$mirror_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$metrics_port" ] || problem "the mirror never served metrics"
# Every cursor the mirror reports while it runs, as fast as it serves them.
(
  while kill -0 "$mirror_pid" 2>/dev/null; do
    # Its own subshell: a refused connection ends only this scrape.
    [ -z "$metrics_port" ] || (scrape_cursor "$metrics_port") >>"$work/s1-metrics" 2>/dev/null || true
    sleep 0.05
  done
) &
scraper_pid=$!
send_puts "$work/bulk.proto" bulk.done 40 >"$work/bulk.seq" 2>"$work/writer.err" &
writer_pid=$!
wait_bounded "$writer_pid" 60
[ "$rc" -eq 0 ] || { cat "$work/writer.err" >&2; exit 1; }
seq_b=$(cat "$work/bulk.seq")
# The disk is full long before the writer ends; a mirror still running
# now waits (allowed if it says why) or hangs.
wait_bounded "$mirror_pid" 20
mirror_rc=$rc
wait_bounded "$scraper_pid" 10
s_exit=$(exit_words "$mirror_rc")
s_msg=$(errmsg "$work/s1-mirror.err")
if [ "$mirror_rc" -eq 124 ]; then
  s_exit="none (still running 20 s after the writer, stopped by SIGTERM)"
fi

# The truth: the reference fold caught up with everything written.
run ref-b "$kvfold" mirror --server "$nats_url" --bucket "$bucket" --fold "$ref" --until-caught-up
[ "$rc" -eq 0 ] || { cat "$work/ref-b.err" >&2; exit 1; }
run truth-dump "$kvfold" dump --fold "$ref"
truth=$work/truth.dump
mv "$work/truth-dump.out" "$truth"
status_of truth-status "$ref"
truth_cursor=$st_cursor truth_keys=$st_keys truth_tomb=$st_tomb
[ "$truth_cursor" = "$seq_b" ] || { echo "reference cursor $truth_cursor, stream at $seq_b" >&2; exit 1; }

# Waiting (still running) is allowed when it says why; see the log check.
[ "$mirror_rc" -eq 124 ] || failed_cleanly "$mirror_rc" "the mirror on a full disk"
names_no_space "$work/s1-mirror.err" || problem "the mirror's log does not name the lack of space"
status_of s1-status "$fold1"
s_logs+=(s1-status.err)
cursor_fail=$st_cursor
reported_metrics=$(max_of "$work/s1-metrics" 2>/dev/null || true)
reported_log=$(grep -ao 'committed through [0-9]*' "$work/s1-mirror.err" | awk '{ print $3 }' | max_of || true)
if [ "$rc" -ne 0 ]; then
  problem "kvfold status on the failed fold: exit $rc: $(errmsg "$work/s1-status.err")"
elif [ "$cursor_fail" = null ]; then
  problem "the fold has no cursor after the failure (nothing committed before the disk filled?)"
else
  # Never acknowledged beyond what the fold holds.
  for r in "metrics:$reported_metrics" "log:$reported_log"; do
    if [ -n "${r#*:}" ] && [ "${r#*:}" -gt "$cursor_fail" ]; then
      problem "the mirror reported cursor ${r#*:} (${r%%:*}) but the fold holds $cursor_fail"
    fi
  done
  [ -n "$reported_log$reported_metrics" ] || problem "the mirror reported no cursor at all"
  # Not torn: it dumps, its counters match the dump, and it is exactly the
  # truth at its cursor (every entry at or below it, nothing else).
  run s1-dump "$kvfold" dump --fold "$fold1"
  s_logs+=(s1-dump.err)
  if [ "$rc" -ne 0 ]; then
    problem "kvfold dump on the failed fold: exit $rc: $(errmsg "$work/s1-dump.err")"
  else
    dumped=$(wc -l <"$work/s1-dump.out")
    [ "$dumped" = "$st_keys" ] || problem "status says $st_keys keys, dump has $dumped"
    [ "${#st_tomb}" -lt 10 ] || problem "status says $st_tomb tombstones (counter underflow?)"
    extra=$(comm -23 "$work/s1-dump.out" "$truth" | wc -l)
    awk -F'\t' -v c="$cursor_fail" '$2 <= c' "$truth" >"$work/truth-at-fail"
    missing=$(comm -13 "$work/s1-dump.out" "$work/truth-at-fail" | wc -l)
    [ "$extra" -eq 0 ] || problem "$extra entries of the failed fold are not in the truth"
    [ "$missing" -eq 0 ] || problem "$missing entries of the truth at cursor $cursor_fail are missing"
  fi
fi
# Room again: the same fold must resume and converge.
grow "$work/m"
run s1-restart "$kvfold" mirror --server "$nats_url" --bucket "$bucket" --fold "$fold1" \
  --until-caught-up
s_logs+=(s1-restart.err)
[ "$rc" -eq 0 ] || problem "the restart after a remount to $big_fs: exit $rc: $(errmsg "$work/s1-restart.err")"
status_of s1-status-after "$fold1"
[ "$st_cursor" = "$truth_cursor" ] || problem "after the restart: cursor $st_cursor, the truth's $truth_cursor"
[ "$st_tomb" = "$truth_tomb" ] || problem "after the restart: $st_tomb tombstones, the truth has $truth_tomb"
same_dump s1-dump-after "$fold1" "$truth" "after the restart"
s_compared="fold on a $small_fs tmpfs filled at cursor ${cursor_fail:-?} of $truth_cursor"
s_compared+=" (reported: metrics ${reported_metrics:-none}, log ${reported_log:-none});"
s_compared+=" failed fold = truth at its cursor; after remount, restart --until-caught-up:"
s_compared+=" dump ($st_keys keys) and cursor $st_cursor vs reference"
end

# ---------------------------------------------------------------- 2. export

begin export
run s2-export "$kvfold" export --fold "$ref" --to "$arts" --json
s_logs+=(s2-export.err)
s_exit=$(exit_words "$rc")
s_msg=$(errmsg "$work/s2-export.err")
failed_cleanly "$rc" "the export into a full directory"
names_no_space "$work/s2-export.err" || problem "the export's error does not name the lack of space"
cmp -s "$work/e/arts/LATEST" "$work/latest-a" || problem "LATEST changed after the failed export"
run s2-verify "$kvfold" artifacts verify "$arts"
s_logs+=(s2-verify.err)
[ "$rc" -eq 0 ] || problem "artifacts verify (latest) after the failure: exit $rc: $(errmsg "$work/s2-verify.err")"
run s2-verify-a "$kvfold" artifacts verify "$arts" "$artifact_a"
[ "$rc" -eq 0 ] || problem "artifacts verify $artifact_a: exit $rc: $(errmsg "$work/s2-verify-a.err")"
run s2-list "$kvfold" artifacts list "$arts"
s_logs+=(s2-list.err)
[ "$rc" -eq 0 ] || problem "artifacts list after the failure: exit $rc: $(errmsg "$work/s2-list.err")"
# Seeds a new fold ($work/NAME, "seed" read as "seeded") from the latest
# artifact at $arts and checks its cursor and dump:
#   seed_equals NAME CURSOR DUMP WHAT
seed_equals() {
  local name=$1 cursor=$2 dump=$3 what=$4 fold="$work/${1/seed/seeded}"
  run "$name" "$kvfold" seed --fold "$fold" --from "$arts"
  s_logs+=("$name.err")
  [ "$rc" -eq 0 ] || problem "seed from $what: exit $rc: $(errmsg "$work/$name.err")"
  status_of "$name-status" "$fold"
  [ "$st_cursor" = "$cursor" ] || problem "seeded from $what: cursor $st_cursor, not $cursor"
  same_dump "$name-dump" "$fold" "$dump" "seed from $what"
}
# The earlier artifact is still whole: a seed from the location gives the
# reference as it was when it was exported.
seed_equals s2-seed-a "$cursor_a" "$work/truth-a.dump" "the earlier artifact"
# Room again: the export goes through and a seed from it equals the source.
grow "$work/e"
run s2-export-again "$kvfold" export --fold "$ref" --to "$arts" --json
s_logs+=(s2-export-again.err)
[ "$rc" -eq 0 ] || problem "the export after a remount to $big_fs: exit $rc: $(errmsg "$work/s2-export-again.err")"
exported_cursor=$(field "$work/s2-export-again.out" cursor)
[ "$exported_cursor" = "$truth_cursor" ] || problem "the new artifact's cursor is $exported_cursor, not $truth_cursor"
seed_equals s2-seed-b "$truth_cursor" "$truth" "the new artifact"
s_compared="export of $truth_keys keys to dir: on a $small_fs tmpfs holding artifact $artifact_a (cursor $cursor_a):"
s_compared+=" LATEST bytes, verify, list, seed of the earlier artifact vs the truth at $cursor_a;"
s_compared+=" after remount, export (cursor ${exported_cursor:-?}) then seed vs the reference"
end

# ---------------------------------------------------------------- 3. seed

begin seed
arts3=dir:$work/arts3 # on the normal disk: only the fold runs out of space
run s3-export "$kvfold" export --fold "$ref" --to "$arts3"
[ "$rc" -eq 0 ] || { cat "$work/s3-export.err" >&2; exit 1; }
fold3=$work/s/fold
mount_small "$work/s" "$seed_fs"
run s3-seed "$kvfold" seed --fold "$fold3" --from "$arts3"
s_logs+=(s3-seed.err)
s_exit=$(exit_words "$rc")
s_msg=$(errmsg "$work/s3-seed.err")
failed_cleanly "$rc" "the seed into a full filesystem"
names_no_space "$work/s3-seed.err" || problem "the seed's error does not name the lack of space"
# Half-seeded is never complete: no cursor.
status_of s3-status "$fold3"
half_keys=${st_keys:-0}
state="nothing committed (status: $(errmsg "$work/s3-status.err"))"
if [ "$rc" -eq 0 ]; then
  [ "$st_cursor" = null ] || problem "the half-seeded fold reports cursor $st_cursor"
  state="half-seeded: $half_keys keys, no cursor"
fi
grow "$work/s"
if [ "$rc" -eq 0 ] && [ "$half_keys" -gt 0 ]; then
  # With room again, a mirror must still refuse it until the seed is finished.
  run s3-mirror-refused "$kvfold" mirror --server "$nats_url" --bucket "$bucket" --fold "$fold3" \
    --until-caught-up
  s_logs+=(s3-mirror-refused.err)
  if [ "$rc" -eq 0 ]; then
    problem "kvfold mirror took the half-seeded fold (exit 0)"
  elif ! grep -qai 'seed' "$work/s3-mirror-refused.err"; then
    problem "kvfold mirror on the half-seeded fold: exit $rc without naming the seed: $(errmsg "$work/s3-mirror-refused.err")"
  else
    state+="; mirror refused it (exit $rc: $(errmsg "$work/s3-mirror-refused.err"))"
  fi
  status_of s3-status-refused "$fold3"
  [ "$st_cursor" = null ] || problem "after the refused mirror the half-seeded fold has cursor $st_cursor"
fi
run s3-seed-again "$kvfold" seed --fold "$fold3" --from "$arts3"
s_logs+=(s3-seed-again.err)
[ "$rc" -eq 0 ] || problem "the seed re-run after a remount to $big_fs: exit $rc: $(errmsg "$work/s3-seed-again.err")"
status_of s3-status-after "$fold3"
[ "$st_cursor" = "$truth_cursor" ] || problem "after the re-run: cursor $st_cursor, not $truth_cursor"
same_dump s3-dump-after "$fold3" "$truth" "after the seed re-run"
# And it resumes as a mirror.
run s3-mirror "$kvfold" mirror --server "$nats_url" --bucket "$bucket" --fold "$fold3" --until-caught-up
s_logs+=(s3-mirror.err)
[ "$rc" -eq 0 ] || problem "mirror after the finished seed: exit $rc: $(errmsg "$work/s3-mirror.err")"
same_dump s3-dump-mirrored "$fold3" "$truth" "mirror after the finished seed"
s_compared="seed of $truth_keys keys into a $seed_fs tmpfs; $state;"
s_compared+=" after remount, re-run seed: cursor $st_cursor and dump vs the reference, then a mirror"
end

echo "diskfull: took $((SECONDS - start)) s"
echo "diskfull: $scenarios scenarios, $diverged diverged"
if [ "$diverged" -gt 0 ]; then exit 1; fi
