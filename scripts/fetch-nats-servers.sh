#!/usr/bin/env bash
# Fetches the newer nats-server builds the live tier also runs against:
# the newest nats-server of Debian's trixie and of sid, as .debs unpacked
# into a cache directory (never installed over the system's package; the
# system's own nats-server stays). Debian's builds are Go binaries that
# need only libc, so they run on Debian 12.
#   scripts/fetch-nats-servers.sh [CACHE_DIR]
# Prints one line per suite, "SUITE VERSION BINARY", on stdout, sorted by
# version: the newest server is the last line. Idempotent: a version
# already unpacked is not fetched again.
#
# The archive is the one this machine's apt already uses for Debian
# (read from its sources), with a private sources list and state
# directory, so the system's apt configuration is left as it is.
set -euo pipefail
cache=${1:-${KVFOLD_NATS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvfold/nats-servers}}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# The Debian archive's URI and keyring from the system's sources (deb822
# or one-line format): the entry that serves the system's own suite.
archive_uri="" keyring=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  archive_uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  keyring=$(awk '/^Signed-By:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$archive_uri" ] && [ -f /etc/apt/sources.list ]; then
  archive_uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}' \
    /etc/apt/sources.list)
fi
[ -n "$archive_uri" ] || { echo "fetch-nats-servers: no Debian archive in this machine's apt sources" >&2; exit 1; }
keyring=${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}

state="$cache/apt"
mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
list="$state/sources.list"
{
  echo "deb [signed-by=$keyring] $archive_uri trixie main"
  echo "deb [signed-by=$keyring] $archive_uri sid main"
} >"$list"
apt_opts=(-o "Dir::Etc::sourcelist=$list" -o Dir::Etc::sourceparts=/dev/null
  -o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache"
  -o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" -qq update >&2

lines=""
for suite in trixie sid; do
  # The newest version the suite offers (madison lists every suite's).
  version=$(apt-cache "${apt_opts[@]}" madison nats-server |
    awk -v s="$suite" -F'|' '$3 ~ ("[ /]" s "/") {gsub(/ /, "", $2); print $2}' |
    sort -V | tail -1)
  [ -n "$version" ] || { echo "fetch-nats-servers: $suite offers no nats-server" >&2; exit 1; }
  dest="$cache/$suite-$version"
  if [ ! -x "$dest/usr/bin/nats-server" ] && [ ! -x "$dest/usr/sbin/nats-server" ]; then
    tmp=$(mktemp -d "$cache/.fetch-XXXXXX")
    (cd "$tmp" && apt-get "${apt_opts[@]}" -qq download "nats-server=$version" >&2)
    dpkg -x "$tmp"/nats-server_*.deb "$tmp/root"
    rm -rf "$dest"
    mv "$tmp/root" "$dest"
    rm -rf "$tmp"
  fi
  # Only the newest version of each suite is kept.
  for old in "$cache/$suite"-*; do
    [ "$old" = "$dest" ] || rm -rf "$old"
  done
  bin="$dest/usr/bin/nats-server"
  [ -x "$bin" ] || bin="$dest/usr/sbin/nats-server"
  "$bin" --version >/dev/null || { echo "fetch-nats-servers: $bin does not run here" >&2; exit 1; }
  lines+="$suite $version $bin"$'\n'
done
printf '%s' "$lines" | sort -b -k2,2V
