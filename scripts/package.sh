#!/usr/bin/env bash
# Builds the Debian package from a Release build in $1 (default
# build-release) and checks it on this machine:
#   scripts/package.sh [BUILD_DIR]   -> BUILD_DIR/kvfold_<version>_<arch>.deb
# The check installs it with dpkg -i (as root), verifies the unit with
# systemd-analyze, runs the installed binary, and purges the package again
# (unless KVFOLD_KEEP_PACKAGE=1). The kvfold user and /etc/kvfold stay, as
# Debian leaves a package's users. Not root: it fails, unless
# KVFOLD_PACKAGE_BUILD_ONLY=1 asks for the build alone.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-release}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_INSTALL_PREFIX=/usr -DKVFOLD_INSTALL_SERVICE=ON -DKVFOLD_WERROR=ON \
  -DKVFOLD_BUILD_TESTS=OFF -DKVFOLD_BUILD_EXAMPLES=OFF -DKVFOLD_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" -j2
(cd "$dir" && cpack -G DEB >/dev/null)
deb=$(ls "$dir"/kvfold_*.deb)
echo "package.sh: built $deb"
dpkg-deb --info "$deb" | grep -E '^ (Package|Version|Depends):' | sed 's/^ /package.sh:   /'
contents=$(dpkg-deb --contents "$deb")
for f in ./usr/bin/kvfold ./usr/lib/systemd/system/kvfold-mirror@.service \
         ./usr/lib/sysusers.d/kvfold.conf ./usr/include/kvfold/kvfold.h \
         /pkgconfig/kvfold.pc /cmake/kvfold/kvfoldConfig.cmake /libkvfold.so.0.1 \
         /examples/mirror.env /examples/grafana/kvfold-dashboard.json \
         /examples/prometheus/kvfold-alerts.yml; do
  grep -q -- "$f\( ->.*\)\?\$" <<<"$contents" || { echo "package.sh: $deb lacks $f" >&2; exit 1; }
done

if [ "$(id -u)" != 0 ]; then
  if [ "${KVFOLD_PACKAGE_BUILD_ONLY:-}" = 1 ]; then
    echo "package.sh: built only (KVFOLD_PACKAGE_BUILD_ONLY=1): not installed nor checked"
    exit 0
  fi
  echo "package.sh: installing and checking the package needs root (KVFOLD_PACKAGE_BUILD_ONLY=1 builds only)" >&2
  exit 1
fi
if dpkg-query -W -f='${Status}' kvfold 2>/dev/null | grep -q "install ok installed"; then
  echo "package.sh: a kvfold package is installed already; not touching it" >&2
  exit 1
fi
cleanup() { [ "${KVFOLD_KEEP_PACKAGE:-}" = 1 ] || dpkg --purge kvfold >/dev/null; }
trap cleanup EXIT
dpkg -i "$deb" >/dev/null
/usr/bin/kvfold --version
getent passwd kvfold >/dev/null || { echo "package.sh: postinst made no kvfold user" >&2; exit 1; }
# An instance name is needed to verify a template; verify reads the unit
# as systemd would (and refuses unknown options, a missing binary).
units=$(mktemp -d)
trap 'rm -rf "$units"; cleanup' EXIT
cp /usr/lib/systemd/system/kvfold-mirror@.service "$units/kvfold-mirror@check.service"
SYSTEMD_LOG_LEVEL=notice systemd-analyze verify "$units/kvfold-mirror@check.service"
echo "package.sh: installed, unit verified, kvfold user present"
