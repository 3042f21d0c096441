# Sourced by the scripts that need a throwaway nats-server:
#   start_nats_server DIR   starts one with JetStream on a free loopback
#                           port, storing in DIR; sets $nats_url and
#                           $nats_pid (stop it with stop_nats_server).
# The binary is $KVFOLD_NATS_SERVER when set (as for the tests), else
# nats-server on PATH.
start_nats_server() {
  local dir=$1 port=""
  # -p -1: the server picks a free port and logs it.
  "${KVFOLD_NATS_SERVER:-nats-server}" -js -a 127.0.0.1 -p -1 -sd "$dir/store" -l "$dir/server.log" &
  nats_pid=$!
  for _ in $(seq 1 100); do
    port=$(sed -n 's/.*Listening for client connections on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
      "$dir/server.log" 2>/dev/null | head -1 || true)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "nats-server did not start; see $dir/server.log" >&2; return 1; }
  nats_url="nats://127.0.0.1:$port"
}

stop_nats_server() {
  if [ -n "${nats_pid:-}" ]; then
    kill "$nats_pid" 2>/dev/null || true
    wait "$nats_pid" 2>/dev/null || true
    nats_pid=""
  fi
}
