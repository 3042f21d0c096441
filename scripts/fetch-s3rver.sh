#!/usr/bin/env bash
# Installs s3rver, the S3-protocol server the S3 transport's live tests
# start on loopback, from the npm registry with this machine's Node.js and
# npm (Debian's nodejs and npm when missing), into a cache directory:
#   scripts/fetch-s3rver.sh [CACHE_DIR]
# Prints the path of a launcher that runs it. Idempotent. No lock file is
# kept: the version is pinned here.
set -euo pipefail
version=3.7.1
cache=${1:-${KVFOLD_S3RVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvfold/s3rver}}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
dir="$cache/$version"
launcher="$dir/s3rver"
if [ ! -x "$launcher" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "fetch-s3rver: installing Debian's nodejs and npm" >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  mkdir -p "$dir"
  npm install --silent --no-audit --no-fund --no-package-lock --no-save --prefix "$dir" \
    "s3rver@$version" >&2
  # s3rver's continuation tokens use a cipher OpenSSL 3 keeps in its legacy
  # provider; without it a truncated listing answers 500.
  cat > "$launcher" <<LAUNCHER
#!/bin/sh
NODE_OPTIONS=--openssl-legacy-provider exec "$dir/node_modules/.bin/s3rver" "\$@"
LAUNCHER
  chmod +x "$launcher"
fi
echo "$launcher"
