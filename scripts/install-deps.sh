#!/usr/bin/env bash
# Installs what kvfold needs to build and test, from Debian packages only
# (prometheus for promtool, which checks deploy/prometheus; nftables for the
# faults of scripts/netfaults.sh; s3rver, an npm package, comes from
# scripts/fetch-s3rver.sh).
# Idempotent: installs only what is missing, runs apt-get update at most once.
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang-format ccache
  libnats-dev librocksdb-dev libzstd-dev
  libprotobuf-dev protobuf-compiler libssl-dev libcurl4-openssl-dev
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nats-server openssl
  prometheus
  nftables
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
