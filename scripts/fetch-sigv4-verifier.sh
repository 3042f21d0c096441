#!/usr/bin/env bash
# Installs the AWS SDK for JavaScript's SigV4 signer (@smithy/signature-v4,
# hashing with @aws-crypto/sha256-js), which tests/live/s3_sigv4_proxy.js
# uses to check every request the S3 live tests send (s3rver checks no
# signature), from the npm registry with this machine's Node.js and npm
# (Debian's nodejs and npm when missing), into a cache directory:
#   scripts/fetch-sigv4-verifier.sh [CACHE_DIR]
# Prints the path of a launcher that runs node with them on its module
# path (KVFOLD_S3_SIGV4; the live tests run the proxy's script with it).
# Idempotent. No lock file is kept: the versions are pinned here.
set -euo pipefail
signer=5.7.5
sha256=5.2.0
cache=${1:-${KVFOLD_SIGV4_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvfold/sigv4}}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
dir="$cache/signature-v4-$signer-sha256-js-$sha256"
launcher="$dir/node"
if [ ! -x "$launcher" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "fetch-sigv4-verifier: installing Debian's nodejs and npm" >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  mkdir -p "$dir"
  npm install --silent --no-audit --no-fund --no-package-lock --no-save --prefix "$dir" \
    "@smithy/signature-v4@$signer" "@aws-crypto/sha256-js@$sha256" >&2
  cat > "$launcher" <<LAUNCHER
#!/bin/sh
NODE_PATH="$dir/node_modules" exec node "\$@"
LAUNCHER
  chmod +x "$launcher"
fi
echo "$launcher"
