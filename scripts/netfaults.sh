#!/usr/bin/env bash
# Network-fault tier: real processes (nats-server, writers, kvfold mirrors)
# in network namespaces joined by a bridge, real faults on the wire, and a
# check that every mirror ends equal to the truth.
#
#   scripts/netfaults.sh [BUILD_DIR]      (default: build)
#   NETFAULTS_SCENARIOS="cut cluster" scripts/netfaults.sh   (a subset)
#   NETFAULTS_KEEP=1 ...   keeps the temp dir (logs, folds, dumps)
#   KVFOLD_NATS_SERVER=BIN ...   the server (default: nats-server on PATH)
#   NETFAULTS_CLUSTER_SERVER=BIN ...   the cluster scenario's (default: the same)
#
# Topology (every address exists only inside namespaces made here):
#   <P>-sw   the "switch": bridge br0; one veth port p-<host> per host.
#            Faults live here (nft rules on the bridge's forward hook, a port
#            set down, a tbf queue), so the hosts' stacks are the real ones.
#   <P>-srv  nats-server with JetStream      10.231.0.10
#   <P>-wr   the writer                      10.231.0.20
#   <P>-ref  control mirror + the truth      10.231.0.30
#   <P>-ma, <P>-mb  faulted mirrors          10.231.0.41, .42
#   <P>-n1..n3  a 3-node JetStream cluster   10.231.0.51-.53
#
# Scenarios: cut (port down / blackhole), lossy (20% loss + a queue),
# cluster (node 1 partitioned from 2 and 3), asymmetric (one direction
# dropped). Each: mirrors caught up, writes start, fault, writes continue,
# heal, writes stop; then every mirror (faulted and control) must reach the
# stream's last sequence while still running and its dump (key, revision,
# value) must equal the truth: a fresh fold mirrored --until-caught-up over
# a clean link after the writes stopped. Also: the faulted mirrors' retries
# follow the backoff (1 s doubling to 30 s) and their reconnects are
# plausible for the fault's length, and no consumer is left on the stream
# once the mirrors stopped.
#
# Prints `netfaults: skipped: <reason>` and exits 0 when this machine cannot
# make namespaces, a bridge or nft rules; otherwise ends with
# `netfaults: N scenarios, K faults, D diverged` and exits 1 if D > 0 or a
# step did not run. Needs root (or CAP_NET_ADMIN), iproute2 and nftables
# (this tier's kernel may lack netem, so loss is nft's numgen and delay is a
# tbf queue).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"  # Debian puts nats-server, ip, tc, nft in sbin
export LC_ALL=C                      # byte lengths for the NATS protocol, byte order for dumps

build=${1:-build}
# NETFAULTS_SCENARIOS: a subset, e.g. "cut cluster" (default: all four).
selected=${NETFAULTS_SCENARIOS:-cut lossy cluster asymmetric}
nats_bin=${KVFOLD_NATS_SERVER:-}
[ -n "$nats_bin" ] || nats_bin=$(command -v nats-server || true)
# The cluster scenario's nodes may run another build (scripts/test.sh gives
# the newest fetched one): 2.9's raft lets a replica that rejoins after a
# partition drift from the others (fixed in later releases), and then no
# mirror can be judged against one truth.
cluster_bin=${NETFAULTS_CLUSTER_SERVER:-$nats_bin}

# Fault lengths (s). 20 s is beyond the mirror's idle limit (3 heartbeats of
# 5 s), so a blocked delivery must be noticed and re-created.
cut_s=20
lossy_s=60
# A mirror on the cut-off node notices after three heartbeats (15 s) and
# moves at its next failed request (on 2.11+ the node does not answer 503
# but times out, 5 s), about 20 s in. The majority then needs a consumer:
# the cluster places each new one on any of the three nodes, and one
# placed on the cut-off node times out (5 s), so a few tries may go by.
# 60 s leaves time for them.
partition_s=60
asym_s=20
backoff_min_ms=1000 # WatchOptions::reconnect_backoff_min, what the CLI uses
backoff_max_ms=30000
retry_slack=5       # attempts beyond fault_s / backoff_min still plausible
converge_limit=120  # s after the heal for a mirror to reach the head
stream_keys=2500    # k-keys the bench loader cycles through

P="nf$$"
SW="$P-sw"
declare -A IP=([srv]=10.231.0.10 [wr]=10.231.0.20 [ref]=10.231.0.30 [ma]=10.231.0.41
  [mb]=10.231.0.42 [n1]=10.231.0.51 [n2]=10.231.0.52 [n3]=10.231.0.53)
namespaces=()
pids=()
work=""

log() { echo "netfaults: $*"; }
clock() { date -u +%H:%M:%S.%3N; }  # for reading beside the servers' and mirrors' logs

cleanup() {
  local rc=$? pid ns
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  # Whatever still runs inside our namespaces was started by this script.
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  if [ -n "$work" ]; then
    if [ -n "${NETFAULTS_KEEP:-}" ]; then log "kept $work"; else rm -rf "$work"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- can this machine do it at all? -------------------------------------------
skip() {
  log "skipped: $*"
  exit 0
}
command -v ip >/dev/null || skip "no ip (iproute2) on PATH"
ip netns add "$P-probe" 2>/dev/null || skip "cannot create a network namespace (needs root or CAP_NET_ADMIN)"
namespaces+=("$P-probe")
ip -n "$P-probe" link add name br0 type bridge 2>/dev/null ||
  skip "cannot create a bridge inside a network namespace"
command -v nft >/dev/null || { log "nft not found: install nftables (scripts/install-deps.sh)"; exit 1; }
command -v tc >/dev/null || { log "tc not found: install iproute2"; exit 1; }
ip netns exec "$P-probe" nft add table bridge nf 2>/dev/null ||
  skip "this kernel has no nftables bridge family (CONFIG_NF_TABLES_BRIDGE)"
ip netns del "$P-probe"

if [ -z "$nats_bin" ] || [ ! -x "$nats_bin" ]; then
  log "no nats-server (set KVFOLD_NATS_SERVER or install it)"
  exit 1
fi
[ -x "$cluster_bin" ] || { log "NETFAULTS_CLUSTER_SERVER=$cluster_bin is not an executable"; exit 1; }
work=$(mktemp -d -t kvfold-netfaults-XXXXXX)
# The binaries under test are copied once: a rebuild of BUILD_DIR during the
# run must not swap them between scenarios.
mkdir "$work/bin"
for b in kvfold sample_writer kvfold_bench_tool; do
  [ -x "$build/$b" ] || { log "$build/$b is missing: build first (scripts/build.sh $build)"; exit 1; }
  cp "$build/$b" "$work/bin/"
done
BIN=$work/bin
start_time=$(date +%s)

# --- small tools ----------------------------------------------------------------
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# HTTP GET with bash alone (run inside a namespace through `bash -c`).
http_get_inner() {  # HOST PORT PATH: prints the body
  exec 3<>"/dev/tcp/$1/$2" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$3" "$1" >&3
  local line body=0
  while IFS= read -r line || [ -n "$line" ]; do
    if ((body)); then
      printf '%s\n' "$line"
    elif [ "$line" = $'\r' ] || [ -z "$line" ]; then
      body=1
    fi
  done <&3
  exec 3<&-
}
http_get() {  # HOST(name) ADDR PORT PATH
  ip netns exec "$P-$1" timeout 5 bash -c "$(declare -f http_get_inner); http_get_inner \"\$@\"" _ "$2" "$3" "$4"
}

# The NATS protocol with bash alone: CONNECT, SUB _R.>, then the given
# protocol text; prints the payload of each reply until EXPECT arrived.
# (A replicas-3 bucket and KV deletes/purges need no client library.)
nats_raw_inner() {  # ADDR PORT EXPECT PROTO
  exec 3<>"/dev/tcp/$1/$2" || return 1
  local line body got=0
  IFS= read -r line <&3 || return 1  # INFO
  printf 'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\nSUB _R.> 1\r\n%s' "$4" >&3
  while [ "$got" -lt "$3" ] && IFS= read -r line <&3; do
    line=${line%$'\r'}
    case $line in
      PING) printf 'PONG\r\n' >&3 ;;
      MSG\ *)
        IFS= read -r body <&3
        printf '%s\n' "${body%$'\r'}"
        got=$((got + 1))
        ;;
      HMSG\ *) return 3 ;;  # a status, e.g. 503: nobody answered
      -ERR*) return 1 ;;
    esac
  done
  [ "$got" -ge "$3" ]
}
nats_raw() {  # HOST(name) ADDR EXPECT PROTO
  ip netns exec "$P-$1" timeout 10 bash -c "$(declare -f nats_raw_inner); nats_raw_inner \"\$@\"" _ "$2" 4222 "$3" "$4"
}

# KV operations without a client: deletes and purges as kvStore_Delete and
# kvStore_Purge send them, each acknowledged by the stream.
kv_ops() {  # HOST(name) ADDR BUCKET del|purge:KEY...
  local host=$1 addr=$2 bucket=$3 proto="" hdr n=0 op
  shift 3
  for op in "$@"; do
    case ${op%%:*} in
      del) hdr=$'NATS/1.0\r\nKV-Operation: DEL\r\n\r\n' ;;
      purge) hdr=$'NATS/1.0\r\nKV-Operation: PURGE\r\nNats-Rollup: sub\r\n\r\n' ;;
    esac
    n=$((n + 1))
    proto+="HPUB \$KV.$bucket.${op#*:} _R.$n ${#hdr} ${#hdr}"$'\r\n'"$hdr"$'\r\n'
  done
  local acks
  acks=$(nats_raw "$host" "$addr" "$n" "$proto") || return 1
  ! grep -q '"error"' <<<"$acks"
}

# These two print nothing when nobody answers (a mirror that exited, a
# server busy electing): their callers treat that as "not yet".
metrics() { http_get "$1" 127.0.0.1 9464 /metrics 2>/dev/null || true; }  # HOST(name)
# (The awk programs read all their input: an early exit would fail the
# pipe feeding them under pipefail.)
metric() {  # NAME [DEFAULT (0)] < metrics
  awk -v n="$1" -v d="${2-0}" '$1 == n && !found { v = $2; found = 1 } END { print found ? v : d }'
}
# Delivery resets by cause, as "cause=N ..." (non-zero only).
resets_by_cause() {
  sed -n 's/^kvfold_delivery_resets_total{cause="\([a-z_]*\)"} \([0-9]*\)$/\1 \2/p'
}

jsz() { http_get "$1" "${IP[$1]}" 8222 '/jsz?streams=true&consumers=true' 2>/dev/null || true; }  # HOST(name)
# A field of a stream's state in /jsz (pretty-printed JSON: one field per line).
jsz_field() {  # STREAM FIELD < jsz
  awk -v s="\"$1\"," -v f="\"$2\":" '
    $1 == "\"name\":" && $2 ~ /^"KV_/ { cur = $2 }  # not a replica or consumer name
    $1 == "\"consumer_detail\":" { cur = "" }      # past the stream state
    $1 == f && cur == s && !found { v = $2; sub(/,$/, "", v); found = 1 }
    END { print found ? v : "" }'
}
# Consumers a node lists on a stream (its consumer_detail).
jsz_consumers() {  # STREAM < jsz
  awk -v s="\"$1\"," '$1 == "\"stream_name\":" && $2 == s { n++ } END { print n + 0 }'
}

show_tail() {  # FILE LINES LABEL
  echo "---- last $2 lines of $3 ($1)"
  tail -n "$2" "$1" 2>/dev/null | sed 's/^/    /' || true
}

# --- network -----------------------------------------------------------------------
net_init() {
  ip netns add "$SW"
  namespaces+=("$SW")
  ip -n "$SW" link set lo up
  ip -n "$SW" link add name br0 type bridge
  ip -n "$SW" link set br0 up
  ip netns exec "$SW" nft add table bridge nf
}

add_host() {  # NAME: its own namespace, a veth into the switch, its address
  local name=$1 ns="$P-$1"
  ip netns add "$ns"
  namespaces+=("$ns")
  ip -n "$ns" link set lo up
  # Created inside the switch, the peer moved straight into the host.
  ip -n "$SW" link add name "p-$name" type veth peer name eth0 netns "$ns"
  ip -n "$SW" link set "p-$name" master br0
  ip -n "$SW" link set "p-$name" up
  ip -n "$ns" addr add "${IP[$name]}/24" dev eth0
  ip -n "$ns" link set eth0 up
}

faults=0
# A fault is a base chain of its own on the bridge's forward hook: healing
# deletes the chain. Rules name switch ports (iifname = sent by that host,
# oifname = sent to it).
fault_nft() {  # CHAIN RULE...
  local chain=$1 r
  shift
  {
    echo "add chain bridge nf $chain { type filter hook forward priority 0; policy accept; }"
    for r in "$@"; do echo "add rule bridge nf $chain $r"; done
  } | ip netns exec "$SW" nft -f -
  faults=$((faults + 1))
}
heal_nft() { ip netns exec "$SW" nft delete chain bridge nf "$1"; }

# --- processes ----------------------------------------------------------------------
start_bg() {  # HOST(name) LOG CMD...: runs CMD in HOST's namespace; sets $bg_pid
  local ns="$P-$1" out=$2
  shift 2
  ip netns exec "$ns" "$@" >"$out" 2>&1 &
  bg_pid=$!
  pids+=("$bg_pid")
}

# Stops PID with SIGTERM (bounded); sets $stop_rc to its exit status, or
# "hung" if it had to be killed. (Not in a subshell: only this shell can
# wait for its children.)
stop_pid() {  # PID SECONDS
  local pid=$1 i
  stop_rc=0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    stop_rc=hung
    return 0
  fi
  wait "$pid" 2>/dev/null || stop_rc=$?
}

start_server() {  # HOST(name) [EXTRA FLAG...]
  local h=$1
  shift
  mkdir -p "$work/$h"
  start_bg "$h" "$work/$h/stdout" "${server_bin:-$nats_bin}" -js -sd "$work/$h/store" -a "${IP[$h]}" -p 4222 \
    -m 8222 -l "$work/$h/server.log" "$@"
}
wait_healthy() {  # HOST(name) SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    # (Not `| grep -q`: under pipefail its early exit fails the pipe.)
    [[ "$(http_get "$1" "${IP[$1]}" 8222 /healthz 2>/dev/null)" == *'"ok"'* ]] && return 0
    sleep 0.1
  done
  return 1
}

declare -A mpid mhost mlog mfold
scen_now=""  # the running scenario: names its mirrors' folds and logs
start_mirror() {  # TAG HOST(name) URLS BUCKET: metrics on the host's loopback :9464
  local tag=$1 host=$2
  mhost[$tag]=$host
  mlog[$tag]="$work/$scen_now.$tag.log"
  mfold[$tag]="$work/$scen_now.$tag.fold"
  start_bg "$host" "${mlog[$tag]}" "$BIN/kvfold" mirror --server "$3" --bucket "$4" \
    --fold "${mfold[$tag]}" --metrics-addr 127.0.0.1:9464 --log-format json
  mpid[$tag]=$bg_pid
}
mirror_cursor() { metrics "${mhost[$1]}" | metric kvfold_cursor ""; }  # "" when it does not answer
# Waits until mirror TAG's committed cursor reaches TARGET; fails early when
# the process is gone.
wait_cursor() {  # TAG TARGET SECONDS
  local i c
  for ((i = 0; i < $3 * 5; i++)); do
    kill -0 "${mpid[$1]}" 2>/dev/null || return 2
    c=$(mirror_cursor "$1")
    [ -n "$c" ] && [ "$c" -ge "$2" ] && return 0
    sleep 0.2
  done
  return 1
}

# Polls the mirrors together until each one's cursor reaches TARGET. Sets
# reached[TAG] to the seconds since START it took ("" if not within SECONDS,
# "exited" if its process is gone) and, for a TAG=FROM given, resumed[TAG]
# to the seconds since START until its cursor first passed FROM.
declare -A reached resumed
wait_all() {  # START SECONDS TARGET TAG[=FROM]...
  local start=$1 target=$3 spec tag c left deadline
  deadline=$(($(date +%s) + $2))
  shift 3
  for spec in "$@"; do
    reached[${spec%%=*}]=""
    resumed[${spec%%=*}]=""
  done
  while true; do
    left=0
    for spec in "$@"; do
      tag=${spec%%=*}
      [ -z "${reached[$tag]}" ] || continue
      if ! kill -0 "${mpid[$tag]}" 2>/dev/null; then
        reached[$tag]=exited
        continue
      fi
      c=$(mirror_cursor "$tag")
      if [ "$spec" != "$tag" ] && [ -z "${resumed[$tag]}" ] && [ -n "$c" ] && [ "$c" -gt "${spec#*=}" ]; then
        resumed[$tag]=$(elapsed "$start" "$(now)")
      fi
      if [ -n "$c" ] && [ "$c" -ge "$target" ]; then
        reached[$tag]=$(elapsed "$start" "$(now)")
      else
        left=$((left + 1))
      fi
    done
    [ "$left" = 0 ] && return 0
    [ "$(date +%s)" -lt "$deadline" ] || return 0
    sleep 0.2
  done
}

# The stream's last sequence: the highest any node reports (after the
# writes stopped the leader's is the truth and no replica is ahead of it).
# True when HOST answers a message read of STREAM (a 404 for a key nobody
# writes is an answer; a 503 from a cluster still electing is not).
stream_served() {  # HOST(name) STREAM
  local body reply
  body='{"last_by_subj":"$KV.'${2#KV_}'.kvfold-access-check"}'
  reply=$(nats_raw "$1" "${IP[$1]}" 1 "PUB \$JS.API.STREAM.MSG.GET.$2 _R.1 ${#body}"$'\r\n'"$body"$'\r\n' 2>/dev/null) ||
    return 1
  [ -n "$reply" ] && ! grep -q '"code":503' <<<"$reply"
}

# A node's copy of STREAM as its /jsz states it: messages, bytes, first and
# last sequence and timestamp, and interior deletes. Replicas that applied the same log
# state the same; one that drifted (a server fault) does not.
replica_state() {  # STREAM HOST(name)
  local j f out=""
  j=$(jsz "$2")
  for f in messages bytes first_seq first_ts last_seq last_ts num_deleted; do
    out+="$f=$(jsz_field "$1" "$f" <<<"$j") "
  done
  echo "${out% }"
}

last_seq() {  # STREAM HOST(name)...
  local stream=$1 h v best=0
  shift
  for h in "$@"; do
    v=$(jsz "$h" 2>/dev/null | jsz_field "$stream" last_seq)
    if [ -n "$v" ] && [ "$v" -gt "$best" ]; then best=$v; fi
  done
  echo "$best"
}

# --- the writer ---------------------------------------------------------------------------
# Keeps writing until STOP exists: sample_writer's puts, overwrites and
# deletes (single server only: it creates a replicas-1 bucket), the bench
# loader's async puts over a moving window of k-keys, and raw deletes and a
# purge. Counts rounds and failed steps (a cluster without a leader fails
# some writes: the truth is what the stream stored, not what was tried).
writer_loop() {  # URL ADDR BUCKET single|cluster STATS STOP ERRLOG
  local url=$1 addr=$2 bucket=$3 mode=$4 stats=$5 stop=$6 errlog=$7 round=0 failed=0 k
  while [ ! -e "$stop" ]; do
    if [ "$mode" = single ]; then
      timeout 20 ip netns exec "$P-wr" "$BIN/sample_writer" "$url" "$bucket" 200 >/dev/null 2>>"$errlog" ||
        failed=$((failed + 1))
    fi
    timeout 20 ip netns exec "$P-wr" "$BIN/kvfold_bench_tool" load --server "$url" --bucket "$bucket" \
      --keys 150 --first $(((round * 137) % stream_keys)) --history 5 >/dev/null 2>>"$errlog" ||
      failed=$((failed + 1))
    k=$(((round * 53) % stream_keys))
    local ops=("del:$(printf 'k%09d' "$k")" "del:$(printf 'k%09d' $(((k + 7) % stream_keys)))"
      "del:config.$((round % 200))")
    if ((round % 4 == 3)); then ops+=("purge:$(printf 'k%09d' $(((k + 11) % stream_keys)))"); fi
    kv_ops wr "$addr" "$bucket" "${ops[@]}" 2>>"$errlog" || failed=$((failed + 1))
    round=$((round + 1))
    echo "$round $failed" >"$stats.new"
    mv "$stats.new" "$stats"  # whole, for the readers
    sleep 0.3
  done
}
declare -A wpid
start_writer() {  # SCEN URL ADDR BUCKET MODE
  rm -f "$work/$1.stop"
  writer_loop "$2" "$3" "$4" "$5" "$work/$1.wstats" "$work/$1.stop" "$work/$1.writer.err" &
  wpid[$1]=$!
  pids+=("${wpid[$1]}")
}
stop_writer() {  # SCEN: prints "rounds failed"
  local i
  touch "$work/$1.stop"
  for ((i = 0; i < 300; i++)); do
    kill -0 "${wpid[$1]}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${wpid[$1]}" 2>/dev/null; then kill -KILL "${wpid[$1]}" 2>/dev/null || true; fi
  wait "${wpid[$1]}" 2>/dev/null || true
  cat "$work/$1.wstats" 2>/dev/null || echo "0 0"
}
writer_rounds() {
  local r=""
  [ ! -e "$work/$1.wstats" ] || read -r r _ <"$work/$1.wstats" || true
  echo "${r:-0}"
}
wait_rounds() {  # SCEN N: until the writer finished N more rounds (bounded)
  local from i
  from=$(writer_rounds "$1")
  for ((i = 0; i < 200; i++)); do
    [ "$(writer_rounds "$1")" -ge $((from + $2)) ] && return 0
    sleep 0.1
  done
  return 1
}

# --- checks ---------------------------------------------------------------------------------
declare -A failed    # scenario -> 1 when a check failed
declare -A equal scen_faults scen_truth scen_time  # for the closing lines
scenarios_run=0

declare -A failures  # scenario -> its FAIL lines, repeated in the closing lines
fail() {  # SCEN MESSAGE
  log "[$1] FAIL: $2"
  failed[$1]=1
  failures[$1]+="    $2"$'\n'
}

# The truth: a fresh fold on the reference host, mirrored --until-caught-up
# over its clean link once the writes stopped. Prints nothing; sets $truth.
make_truth() {  # SCEN URLS BUCKET TARGET MIN_KEYS
  local scen=$1 fold="$work/$1.truth.fold" rc=0 cursor keys
  truth="$work/$scen.truth.dump"
  timeout 120 ip netns exec "$P-ref" "$BIN/kvfold" mirror --server "$2" --bucket "$3" --fold "$fold" \
    --until-caught-up >"$work/$scen.truth.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    fail "$scen" "the truth mirror (--until-caught-up on a clean link) exited $rc"
    show_tail "$work/$scen.truth.log" 20 "truth mirror log"
    return 1
  fi
  "$BIN/kvfold" dump --fold "$fold" >"$truth"
  cursor=$("$BIN/kvfold" status --fold "$fold" --json | sed -n 's/.*"cursor":\([0-9]*\).*/\1/p')
  keys=$(wc -l <"$truth")
  # An empty or short truth would make every comparison pass.
  if [ "$cursor" != "$4" ] || [ "$keys" -lt "$5" ]; then
    fail "$scen" "the truth fold is at cursor $cursor with $keys keys; expected cursor $4 and >= $5 keys"
    return 1
  fi
  scen_truth[$scen]="$keys keys at sequence $cursor"
  log "[$scen] truth: $keys live keys at cursor $cursor (fresh fold, --until-caught-up on ref's clean link after the writes stopped)"
}

# Snapshot of a mirror's counters (and its log length) when its fault starts.
declare -A snap_reconnects snap_rollup snap_loglines
snapshot() {  # TAG
  local m
  m=$(metrics "${mhost[$1]}")
  snap_reconnects[$1]=$(metric kvfold_reconnects_total <<<"$m")
  snap_rollup[$1]=$(metric 'kvfold_delivery_resets_total{cause="rollup_skip"}' <<<"$m")
  snap_loglines[$1]=$(wc -l <"${mlog[$1]}")
}

# After the heal: a few more writer rounds, then the writes stop and every
# mirror must reach the stream's last sequence while running. Sets
# $target, reached[TAG] (s since the heal) and, for the faulted mirrors,
# resumed[TAG] (s since the heal until its cursor moved).
converge() {  # SCEN HEALED STREAM "HOST..." FAULTED_TAG... -- OTHER_TAG...
  local scen=$1 healed=$2 stream=$3 hosts=$4 tag specs=() faulted=1 w wfail
  shift 4
  for tag in "$@"; do
    [ "$tag" != -- ] || { faulted=0; continue; }
    if ((faulted)); then specs+=("$tag=$(mirror_cursor "$tag")"); else specs+=("$tag"); fi
  done
  wait_rounds "$scen" 3 || fail "$scen" "the writer made no progress after the heal"
  read -r w wfail <<<"$(stop_writer "$scen")"
  # shellcheck disable=SC2086 # a list of hosts
  target=$(last_seq "$stream" $hosts)
  log "[$scen] writes: $w rounds ($wfail failed steps), stopped $(elapsed "$healed" "$(now)") s after the heal; the stream's last sequence $target"
  wait_all "$healed" "$converge_limit" "$target" "${specs[@]}"
}

# Then, per mirror: it reached the head, its retries since the snapshot
# follow the backoff and their number fits the fault, it stops (exit 0) on
# SIGTERM and its dump equals the truth.
# EXPECT_RECONNECT: 1 when the fault outlasted the idle limit (so the
# delivery had to be re-created), 0 when a re-creation is optional.
check_mirror() {  # SCEN TAG FAULT_S EXPECT_RECONNECT
  local scen=$1 tag=$2 fault_s=$3 expect=$4
  local m reconnects rollups resets repairs recreated waits retries prev w bad_backoff="" dump max_retries how
  case ${reached[$tag]} in
    exited)
      fail "$scen" "$tag: the mirror process exited before reaching sequence $target"
      show_tail "${mlog[$tag]}" 30 "$tag's log"
      return 0
      ;;
    "")
      fail "$scen" "$tag: did not reach sequence $target within ${converge_limit} s after the heal (cursor $(mirror_cursor "$tag"))"
      show_tail "${mlog[$tag]}" 30 "$tag's log"
      stop_pid "${mpid[$tag]}" 10
      return 0
      ;;
  esac
  m=$(metrics "${mhost[$tag]}")
  reconnects=$(($(metric kvfold_reconnects_total <<<"$m") - ${snap_reconnects[$tag]:-0}))
  rollups=$(($(metric 'kvfold_delivery_resets_total{cause="rollup_skip"}' <<<"$m") - ${snap_rollup[$tag]:-0}))
  resets=$(resets_by_cause <<<"$m" | awk '$2 > 0 { printf "%s%s=%s", sep, $1, $2; sep = " " }')
  repairs=$(sed -n 's/^kvfold_repairs_total{action="\([a-z]*\)",outcome="\([a-z]*\)"} \([1-9][0-9]*\)$/\1 \2=\3/p' <<<"$m" |
    paste -sd, -)
  stop_pid "${mpid[$tag]}" 20
  if [ "$stop_rc" != 0 ]; then
    fail "$scen" "$tag: exit status $stop_rc on SIGTERM (want 0)"
    show_tail "${mlog[$tag]}" 30 "$tag's log"
  fi
  # Reconnects the fault caused: deliveries opened since the snapshot, less
  # the ones nats-server 2.9's roll-up skips asked for (purges, not faults).
  reconnects=$((reconnects - rollups))
  # The retry waits logged since the snapshot: each is the minimum (a
  # session received something, so the backoff restarted) or double the
  # one before, capped at the maximum.
  waits=$(tail -n +"$((${snap_loglines[$tag]:-0} + 1))" "${mlog[$tag]}" |
    sed -n 's/.*retrying in \([0-9]*\) ms.*/\1/p' | paste -sd' ')
  retries=$(wc -w <<<"$waits")
  prev=0
  for w in $waits; do
    if [ "$w" -lt "$backoff_min_ms" ] || [ "$w" -gt "$backoff_max_ms" ] ||
      { [ "$w" != "$backoff_min_ms" ] && [ "$w" != "$((prev * 2 > backoff_max_ms ? backoff_max_ms : prev * 2))" ]; }; then
      bad_backoff+=" $w"
    fi
    prev=$w
  done
  max_retries=$((fault_s * 1000 / backoff_min_ms + retry_slack))
  [ -z "$bad_backoff" ] ||
    fail "$scen" "$tag: retry waits off the backoff (${backoff_min_ms} ms doubling to ${backoff_max_ms} ms): ${waits}"
  how="at the head ${reached[$tag]} s after the heal"
  if [ "$fault_s" -gt 0 ]; then
    how="resumed ${resumed[$tag]:-?} s and $how"
    if [ "$expect" = 1 ] && [ "$reconnects" -lt 1 ]; then
      fail "$scen" "$tag: no reconnect after a ${fault_s} s fault (longer than the idle limit)"
    fi
    if [ "$reconnects" -gt "$max_retries" ] || [ "$retries" -gt "$max_retries" ]; then
      fail "$scen" "$tag: $reconnects reconnects / $retries retries for a ${fault_s} s fault (at most $max_retries with backoff from ${backoff_min_ms} ms)"
    fi
  fi
  # The stream is never recreated here: a mirror that takes it for a new
  # one (and rebases its fold) misread the stream's state.
  recreated=$(grep -o '"msg":"repair: recreated stream ([^)]*)' "${mlog[$tag]}" | head -3 | sed 's/^"msg":"//') || true
  if [ -n "$recreated" ]; then
    fail "$scen" "$tag took the stream for a recreated one (it never is in this tier) and rebuilt its fold:"
    echo "    ${recreated//$'\n'/$'\n'    }"
  fi
  dump="$work/$scen.$tag.dump"
  "$BIN/kvfold" dump --fold "${mfold[$tag]}" >"$dump"
  if cmp -s "$dump" "$truth"; then
    equal[$scen]+=" $tag"
    log "[$scen] $tag: $how; reconnects $reconnects (resets: ${resets:-none}; roll-up skips $rollups), retries $retries (waits: ${waits:-none} ms), repairs: ${repairs:-none}; dump == truth ($(wc -l <"$dump") keys: key, revision, value)"
  else
    fail "$scen" "$tag: dump differs from the truth ($(wc -l <"$dump") vs $(wc -l <"$truth") keys); first differences:"
    local first
    first=$(diff "$truth" "$dump" | head -10 | sed 's/^/      /' || true)
    echo "$first"
    failures[$scen]+="$first"$'\n'
    show_tail "${mlog[$tag]}" 30 "$tag's log"
  fi
}

# No consumer may remain on the stream once the mirrors stopped. A mirror
# deletes its consumer when it stops; one whose delete was lost in a fault
# is removed by the server after its inactive threshold (30 s), so that is
# waited for (up to 45 s from the stop) at the end of the run, when the
# other scenarios have used the time.
declare -A consumer_check consumers_at_stop stopped_at
consumers_on() {  # STREAM HOST...: the consumers the nodes list on STREAM
  local stream=$1 h n=0
  shift
  for h in "$@"; do n=$((n + $(jsz "$h" 2>/dev/null | jsz_consumers "$stream"))); done
  echo "$n"
}
mirrors_stopped() {  # SCEN STREAM HOST...
  stopped_at[$1]=$(now)
  consumer_check[$1]="${*:2}"
  consumers_at_stop[$1]=$(consumers_on "${@:2}")
  # Consumers left behind: watched while the next scenarios run.
  if [ "${consumers_at_stop[$1]}" != 0 ]; then
    watch_consumers "$@" &
    consumer_watch[$1]=$!
    pids+=("$!")
  fi
}
declare -A consumer_watch
watch_consumers() {  # SCEN STREAM HOST...: writes "gone SECONDS" or "left N"
  local scen=$1 n i
  for ((i = 0; i < 90; i++)); do
    n=$(consumers_on "${@:2}")
    if [ "$n" = 0 ]; then
      echo "gone $(elapsed "${stopped_at[$scen]}" "$(now)")" >"$work/$scen.consumers"
      return 0
    fi
    sleep 0.5
  done
  echo "left $n" >"$work/$scen.consumers"
}
check_consumers() {  # SCEN
  local scen=$1 stream hosts what n h
  read -r stream hosts <<<"${consumer_check[$scen]}"
  if [ "${consumers_at_stop[$scen]}" = 0 ]; then
    log "[$scen] consumers on $stream: none left when the mirrors stopped"
    return 0
  fi
  wait "${consumer_watch[$scen]}" 2>/dev/null || true
  read -r what n <"$work/$scen.consumers" || what=""
  if [ "$what" = gone ]; then
    log "[$scen] consumers on $stream: ${consumers_at_stop[$scen]} left when the mirrors stopped (deletes lost in the fault), gone $n s after the stop (the server's 30 s inactive threshold)"
  else
    fail "$scen" "${n:-some} consumer(s) still on $stream 45 s after the mirrors stopped"
    for h in $hosts; do jsz "$h" | sed -n '/consumer_detail/,$p' | head -30 | sed 's/^/    /' || true; done
  fi
}

# Keeps the fault on for SECONDS, sampling how far each faulted mirror falls
# behind the stream (which shows the fault bites).
hold_fault() {  # SCEN SECONDS STREAM TAG...
  local scen=$1 until stream=$3 tag head c out=""
  until=$(($(date +%s) + $2))
  shift 3
  declare -A lag=()
  for tag in "$@"; do lag[$tag]=0; done
  while [ "$(date +%s)" -lt "$until" ]; do
    head=$(last_seq "$stream" srv)
    for tag in "$@"; do
      c=$(mirror_cursor "$tag")
      if [ -n "$c" ] && [ $((head - c)) -gt "${lag[$tag]}" ]; then lag[$tag]=$((head - c)); fi
    done
    sleep 1
  done
  for tag in "$@"; do out+=" $tag ${lag[$tag]},"; done
  log "[$scen] during the fault, the most each mirror trailed the stream (messages):${out%,}"
}

server_tail() {  # SCEN HOST...
  local h
  shift
  for h in "$@"; do show_tail "$work/$h/server.log" 15 "nats-server $h log"; done
}

# Starts the scenario's mirrors and waits until each holds the bucket.
start_and_catch_up() {  # SCEN URLS BUCKET TARGET TAG:HOST...
  local scen=$1 urls=$2 bucket=$3 target=$4 th tag rc
  shift 4
  for th in "$@"; do start_mirror "${th%%:*}" "${th#*:}" "$urls" "$bucket"; done
  for th in "$@"; do
    tag=${th%%:*}
    rc=0
    wait_cursor "$tag" "$target" 60 || rc=$?
    if [ "$rc" = 2 ]; then
      fail "$scen" "$tag exited before it caught up with the initial load (sequence $target)"
      show_tail "${mlog[$tag]}" 20 "$tag's log"
      return 1
    elif [ "$rc" != 0 ]; then
      fail "$scen" "$tag did not catch up with the initial load (sequence $target) within 60 s"
      show_tail "${mlog[$tag]}" 20 "$tag's log"
      return 1
    fi
  done
}

# --- scenarios ---------------------------------------------------------------------------------
srv_url="nats://${IP[srv]}:4222"

# A bucket with an initial load (sample_writer creates it, history 5); prints
# the stream's last sequence.
single_bucket() {  # BUCKET
  timeout 30 ip netns exec "$P-wr" "$BIN/sample_writer" "$srv_url" "$1" 200 >/dev/null
  timeout 30 ip netns exec "$P-wr" "$BIN/kvfold_bench_tool" load --server "$srv_url" --bucket "$1" \
    --keys "$stream_keys" --history 5 >/dev/null
  last_seq "KV_$1" srv
}
# Live keys after the initial load: 180 of sample_writer's 200, all k-keys;
# the writer then deletes at most a few per round.
min_keys=2000

# Runs the generic part of a single-server scenario around FAULT_FN/HEAL_FN.
run_single() {  # SCEN FAULT_S EXPECT_RECONNECT INJECT_FN HEAL_FN TAG...
  local scen=$1 fault_s=$2 expect=$3 inject=$4 heal=$5 bucket="nf$1" initial healed tag
  shift 5
  local tags=("$@" control) f0=$faults
  scenarios_run=$((scenarios_run + 1))
  scen_now=$scen
  local t0
  t0=$(now)
  initial=$(single_bucket "$bucket") || { fail "$scen" "the initial load failed"; return; }
  local specs=()
  for tag in "$@"; do specs+=("$tag:$tag"); done
  start_and_catch_up "$scen" "$srv_url" "$bucket" "$initial" "${specs[@]}" control:ref || {
    server_tail "$scen" srv
    return
  }
  start_writer "$scen" "$srv_url" "${IP[srv]}" "$bucket" single
  wait_rounds "$scen" 2 || fail "$scen" "the writer made no progress before the fault"
  for tag in "$@"; do snapshot "$tag"; done
  "$inject"
  hold_fault "$scen" "$fault_s" "KV_$bucket" "$@"
  "$heal"
  healed=$(now)
  log "[$scen] healed at $(clock) UTC"
  converge "$scen" "$healed" "KV_$bucket" srv "$@" -- control
  if make_truth "$scen" "$srv_url" "$bucket" "$target" "$min_keys"; then
    for tag in "$@"; do check_mirror "$scen" "$tag" "$fault_s" "$expect"; done
    check_mirror "$scen" control 0 0
  fi
  # Whatever a failed check left running.
  for tag in "${tags[@]}"; do
    if kill -0 "${mpid[$tag]}" 2>/dev/null; then stop_pid "${mpid[$tag]}" 10; fi
  done
  mirrors_stopped "$scen" "KV_$bucket" srv
  [ -z "${failed[$scen]:-}" ] || server_tail "$scen" srv
  scen_faults[$scen]=$((faults - f0))
  scen_time[$scen]=$(elapsed "$t0" "$(now)")
  log "[$scen] ran in ${scen_time[$scen]} s"
}

# 1. cut: ma's switch port goes down (a pulled cable), mb's frames are all
# dropped both ways (a blackhole); both for cut_s.
cut_inject() {
  ip -n "$SW" link set p-ma down
  faults=$((faults + 1))
  fault_nft cut_mb 'iifname "p-mb" drop' 'oifname "p-mb" drop'
  log "[cut] fault: ma's port down, mb blackholed (every frame both ways), for ${cut_s} s from $(clock) UTC"
}
cut_heal() {
  ip -n "$SW" link set p-ma up
  heal_nft cut_mb
}

# 2. lossy: 20% of ma's packets each way dropped at random, behind a 1 Mbit/s
# queue that delays them by up to 200 ms (this kernel has no netem: the
# queue's delay varies with the load, which is the jitter); mb: 20% loss
# only. For lossy_s while the writes go on.
lossy_inject() {
  fault_nft lossy_ma 'iifname "p-ma" ether type ip numgen random mod 100 < 20 drop' \
    'oifname "p-ma" ether type ip numgen random mod 100 < 20 drop'
  tc -n "$SW" qdisc add dev p-ma root tbf rate 1mbit burst 16kb latency 200ms
  tc -n "$P-ma" qdisc add dev eth0 root tbf rate 1mbit burst 16kb latency 200ms
  fault_nft lossy_mb 'iifname "p-mb" ether type ip numgen random mod 100 < 20 drop' \
    'oifname "p-mb" ether type ip numgen random mod 100 < 20 drop'
  log "[lossy] fault: ma 20% loss each way + 1 Mbit/s queue (0-200 ms delay); mb 20% loss each way; for ${lossy_s} s from $(clock) UTC"
}
lossy_heal() {
  heal_nft lossy_ma
  tc -n "$SW" qdisc del dev p-ma root
  tc -n "$P-ma" qdisc del dev eth0 root
  heal_nft lossy_mb
}

# 4. asymmetric: ma hears the server but every IP packet it sends is dropped;
# mb the other way round (it sends, hears nothing). ARP passes: the fault is
# one direction of IP, not a dead neighbour.
asym_inject() {
  fault_nft asym_ma 'iifname "p-ma" ether type ip drop'
  fault_nft asym_mb 'oifname "p-mb" ether type ip drop'
  log "[asymmetric] fault: ma's packets to the server dropped (it still hears it), mb hears nothing (its packets pass), for ${asym_s} s from $(clock) UTC"
}
asym_heal() {
  heal_nft asym_ma
  heal_nft asym_mb
}

# 3. cluster: three nodes with routes; a replicas-3 bucket; mirror ma is
# given all three URLs but connects to node 1 (nodes 2 and 3 are
# unreachable from it until it is connected); node 1 is then partitioned
# from nodes 2 and 3 (not from ma) and loses quorum; heal.
run_cluster() {
  local scen=cluster bucket=nfcl stream=KV_nfcl h i t0 reply initial healed f0=$faults
  scenarios_run=$((scenarios_run + 1))
  scen_now=$scen
  t0=$(now)
  local routes="nats://${IP[n1]}:6222,nats://${IP[n2]}:6222,nats://${IP[n3]}:6222"
  for h in n1 n2 n3; do
    server_bin=$cluster_bin start_server "$h" -n "$h" --cluster_name nfc --cluster "nats://${IP[$h]}:6222" --routes "$routes"
  done
  for h in n1 n2 n3; do
    wait_healthy "$h" 30 || { fail "$scen" "node $h not healthy within 30 s"; server_tail "$scen" n1 n2 n3; return; }
  done
  # The bucket as nats.c's kvStore would create it, with 3 replicas.
  local cfg
  # shellcheck disable=SC2016 # $KV is the subject prefix, not a variable
  cfg='{"name":"'$stream'","subjects":["$KV.'$bucket'.>"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":5,"max_msg_size":-1,"storage":"file","discard":"new","num_replicas":3,"duplicate_window":120000000000,"allow_rollup_hdrs":true,"deny_delete":true,"deny_purge":false,"allow_direct":true}'
  reply=""
  for ((i = 0; i < 60; i++)); do
    reply=$(nats_raw n2 "${IP[n2]}" 1 "PUB \$JS.API.STREAM.CREATE.$stream _R.1 ${#cfg}"$'\r\n'"$cfg"$'\r\n' 2>/dev/null) || true
    grep -q '"config"' <<<"$reply" && ! grep -q '"error"' <<<"$reply" && break
    sleep 0.5
  done
  grep -q '"num_replicas":3' <<<"$reply" || {
    fail "$scen" "could not create the replicas-3 bucket: ${reply:-no reply}"
    server_tail "$scen" n1 n2 n3
    return
  }
  local n2_url="nats://${IP[n2]}:4222"
  local all_urls="nats://${IP[n1]}:4222,$n2_url,nats://${IP[n3]}:4222"
  # The create answers before the stream has a leader on 2.10+; publishes
  # until then are refused (503).
  for ((i = 0; i < 60; i++)); do
    stream_served n2 "$stream" && break
    sleep 0.5
  done
  timeout 60 ip netns exec "$P-wr" "$BIN/kvfold_bench_tool" load --server "$n2_url" --bucket "$bucket" \
    --keys "$stream_keys" >"$work/$scen.load.log" 2>&1 || {
    fail "$scen" "the initial load failed: $(tail -1 "$work/$scen.load.log")"
    server_tail "$scen" n1 n2 n3
    return
  }
  initial=$(last_seq "$stream" n1 n2 n3)
  [ "$initial" -ge "$stream_keys" ] || {
    fail "$scen" "the stream holds $initial messages after an initial load of $stream_keys keys"
    return
  }
  # nats.c picks among the URLs at random: nodes 2 and 3 refuse ma at once
  # (prohibit routes in ma's own namespace) until it is connected to node 1.
  ip -n "$P-ma" route add prohibit "${IP[n2]}/32"
  ip -n "$P-ma" route add prohibit "${IP[n3]}/32"
  start_and_catch_up "$scen" "$all_urls" "$bucket" "$initial" ma:ma || { server_tail "$scen" n1 n2 n3; return; }
  ip -n "$P-ma" route del prohibit "${IP[n2]}/32"
  ip -n "$P-ma" route del prohibit "${IP[n3]}/32"
  # The control mirror and the truth stay off node 1.
  start_and_catch_up "$scen" "$n2_url,nats://${IP[n3]}:4222" "$bucket" "$initial" control:ref || return
  log "[$scen] ma connected to: $(connected_nodes ma) (all three URLs given)"
  start_writer "$scen" "$n2_url" "${IP[n2]}" "$bucket" cluster
  wait_rounds "$scen" 2 || fail "$scen" "the writer made no progress before the partition"
  snapshot ma
  local c0 c1 n1_last head1 followed="" part_start
  c0=$(mirror_cursor ma)
  fault_nft part_n1 "iifname \"p-n1\" ether type ip ip daddr { ${IP[n2]}, ${IP[n3]} } drop" \
    "oifname \"p-n1\" ether type ip ip saddr { ${IP[n2]}, ${IP[n3]} } drop"
  part_start=$(now)
  log "[$scen] fault: node 1 partitioned from nodes 2 and 3 (ma still reaches node 1) for ${partition_s} s from $(clock) UTC"
  # Node 1 stores nothing new once cut off: a cursor past node 1's own last
  # sequence proves ma is following the majority through another node.
  while [ "$(elapsed "$part_start" "$(now)" | cut -d. -f1)" -lt "$partition_s" ]; do
    c1=$(mirror_cursor ma)
    n1_last=$(last_seq "$stream" n1)
    if [ -z "$followed" ] && [ -n "$c1" ] && [ -n "$n1_last" ] && [ "$c1" -gt "$n1_last" ]; then
      followed=$(elapsed "$part_start" "$(now)")
    fi
    sleep 0.5
  done
  head1=$(last_seq "$stream" n2 n3)
  log "[$scen] during the partition: ma's cursor $c0 -> $c1; node 1 stuck at $n1_last, nodes 2 and 3 at $head1; ma connected to: $(connected_nodes ma)"
  if [ -n "$followed" ]; then
    log "[$scen] ma followed the majority ${followed} s into the partition"
  else
    fail "$scen" "ma did not follow the bucket during the ${partition_s} s partition: its cursor stayed at or below node 1's last sequence $n1_last while nodes 2 and 3 went on to $head1 (it was given all three URLs)"
    show_tail "${mlog[ma]}" 40 "ma's log"
  fi
  heal_nft part_n1
  healed=$(now)
  log "[$scen] healed at $(clock) UTC"
  converge "$scen" "$healed" "$stream" "n1 n2 n3" ma -- control
  # The truth is read once the three replicas hold the same copy: the truth
  # mirror's consumer may be placed on any of them (node 1 included), so a
  # replica still catching up, or one that drifted, must not be what it
  # reads. Their states are compared, not only their last sequence.
  local settled="" s1 s2 s3
  for ((i = 0; i < 180; i++)); do
    s1=$(replica_state "$stream" n1) s2=$(replica_state "$stream" n2) s3=$(replica_state "$stream" n3)
    if [[ "$s1" == *"last_seq=$target "* ]] && [ "$s1" = "$s2" ] && [ "$s2" = "$s3" ] &&
      stream_served n2 "$stream" && stream_served n3 "$stream"; then
      settled=$(elapsed "$healed" "$(now)")
      break
    fi
    sleep 0.5
  done
  if [ -n "$settled" ]; then
    log "[$scen] all three replicas hold the same copy ($s1) and serve ${settled} s after the heal"
  else
    fail "$scen" "the three replicas of $stream did not come to the same copy at sequence $target in 180 polls (90 s and more) after the mirrors converged (n1: $s1; n2: $s2; n3: $s3): nats-server's replicas differ, so there is no single truth to compare the mirrors with"
  fi
  if make_truth "$scen" "$n2_url,nats://${IP[n3]}:4222" "$bucket" "$target" "$min_keys"; then
    check_mirror "$scen" ma "$partition_s" 0
    check_mirror "$scen" control 0 0
  fi
  for h in ma control; do
    if kill -0 "${mpid[$h]}" 2>/dev/null; then stop_pid "${mpid[$h]}" 10; fi
  done
  mirrors_stopped "$scen" "$stream" n1 n2 n3
  [ -z "${failed[$scen]:-}" ] || server_tail "$scen" n1 n2 n3
  scen_faults[$scen]=$((faults - f0))
  scen_time[$scen]=$(elapsed "$t0" "$(now)")
  log "[$scen] ran in ${scen_time[$scen]} s"
}
# The cluster nodes a mirror's host is connected to (from each node's /connz).
connected_nodes() {  # HOST(name)
  local h out=""
  for h in n1 n2 n3; do
    if [[ "$(http_get "$h" "${IP[$h]}" 8222 /connz 2>/dev/null)" == *"\"ip\": \"${IP[$1]}\""* ]]; then
      out+="$h "
    fi
  done
  out=${out% }
  echo "${out:-none}"
}

# --- run -------------------------------------------------------------------------------------------
net_init
for h in srv wr ref ma mb n1 n2 n3; do add_host "$h"; done
log "topology: switch $SW (bridge br0, nft table bridge nf), hosts srv ${IP[srv]}, wr ${IP[wr]}, ref ${IP[ref]}, ma ${IP[ma]}, mb ${IP[mb]}, n1-n3 ${IP[n1]}-${IP[n3]#10.231.0.}; nats-server $("$nats_bin" --version | sed 's/.*v//') (the cluster's $("$cluster_bin" --version | sed 's/.*v//'))"
start_server srv
wait_healthy srv 20 || { log "nats-server did not start"; show_tail "$work/srv/server.log" 20 "server log"; exit 1; }

for scen in $selected; do
  case $scen in
    cut) run_single cut "$cut_s" 1 cut_inject cut_heal ma mb ;;
    lossy) run_single lossy "$lossy_s" 0 lossy_inject lossy_heal ma mb ;;
    cluster) run_cluster ;;
    asymmetric) run_single asymmetric "$asym_s" 1 asym_inject asym_heal ma mb ;;
    *) fail "$scen" "no such scenario" ;;
  esac
done

for scen in $selected; do
  if [ -n "${consumer_check[$scen]:-}" ]; then
    check_consumers "$scen"
  else
    fail "$scen" "did not run to the end"
  fi
done

diverged=0
for scen in $selected; do
  what="${scen_faults[$scen]:-0} fault(s); equal to the truth (${scen_truth[$scen]:-none}):${equal[$scen]:- none}; ${scen_time[$scen]:-?} s"
  if [ -n "${failed[$scen]:-}" ]; then
    diverged=$((diverged + 1))
    log "[$scen] FAILED ($what)"
    printf '%s' "${failures[$scen]:-}"  # again here: CI may show only the end
    for d in "$work/$scen".*.dump; do  # which dumps agree with which
      [ -e "$d" ] || continue
      printf '    %s: %s keys, sha256 %s\n' "${d##*/}" "$(wc -l <"$d")" "$(sha256sum <"$d" | cut -c1-16)"
    done
  else
    log "[$scen] passed ($what)"
  fi
done
log "ran in $(($(date +%s) - start_time)) s"
log "$scenarios_run scenarios, $faults faults, $diverged diverged"
[ "$diverged" = 0 ] && [ "$scenarios_run" = "$(wc -w <<<"$selected")" ]
