#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The release packages (`make package`; docs/packaging.md, "Where the
# packages install"): built in a Debian 11 root, the oldest base the
# packages support, so the binary needs only its glibc (2.31) and its
# libstdc++ (GCC 10), which every newer target has. yaml-cpp and OpenSSL,
# whose sonames differ between the targets, are compiled in from that
# root's static archives (-DFA_PORTABLE=ON); every other library stays shared.
#
#   scripts/package.sh BUILD_DIR OUT_DIR RELEASE...
#
# BUILD_DIR/release/root   the root, unpacked from the cached tarball of
#                          tests/packaging/lib.sh (replaced when that changes)
#                          and brought up to date from Debian 11's security
#                          suite on every run, so what is compiled in carries
#                          every fix Debian has published for it
# BUILD_DIR/release/build  the build tree, incremental (ninja rebuilds what a
#                          changed source, header or archive touches);
#                          agent/fabric-agent is the unstripped binary with the
#                          packaged one's build id
# OUT_DIR                  the .deb and the .rpm of RELEASE, or OUT_DIR/rN
#                          for each of several releases
# The source tree is mounted read-only at /src in the root. Environment:
# FA_WERROR (ON|OFF, default ON), JOBS (default: nproc). Needs root.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FA_TEST_NAME=package
# shellcheck source=../tests/packaging/lib.sh
source "$src/tests/packaging/lib.sh"

[ $# -ge 3 ] || die "usage: scripts/package.sh BUILD_DIR OUT_DIR RELEASE..."
build=$(realpath -m "$1")
out=$(realpath -m "$2")
shift 2
for r in "$@"; do
  [[ $r =~ ^[1-9][0-9]*$ ]] || die "RELEASE '$r': want the package revision, a positive integer (1, 2, ...)"
done
case "${FA_WERROR:-ON}" in
  ON | OFF) ;;
  *) die "FA_WERROR '${FA_WERROR}': want ON or OFF" ;;
esac
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot)"
t0=$(date +%s)

rel=$build/release
root=$rel/root
# Its own apt cache: the Debian 11 test root's apt may run at the same time.
export FA_ROOT_APT=$FA_PKG_CACHE/apt-debian11-build
mkdir -p "$rel"
# One build at a time in this tree (make package and the packaging tests share it).
exec 8>"$rel/lock"
flock 8
tarball=$(fa_build_root_tarball)
if [ "$(cat "$rel/root.from" 2>/dev/null)" != "$tarball" ]; then
  log "unpacking the build root ($(basename "$tarball"))"
  rm -rf "$root" "$rel/build" "$rel/root.from"
  mkdir -p "$root"
  zstd -q -dc "$tarball" | tar -C "$root" --numeric-owner -xf -
  echo "$tarball" >"$rel/root.from"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
if ! in_root "$root" sh -c 'apt-get update -q && apt-get dist-upgrade -y -q --no-install-recommends' \
  </dev/null >"$rel/apt.log" 2>&1; then
  tail -n 20 "$rel/apt.log" >&2
  die "bringing the build root up to date failed (log: $rel/apt.log)"
fi
upgraded=$(sed -n 's/^Unpacking \([^ ]*\) .*/\1/p' "$rel/apt.log" | tr '\n' ' ')
log "build root up to date${upgraded:+ (upgraded: $upgraded)}"
log "compiled in: $(in_root "$root" dpkg-query -W -f '${source:Package} ${Version}, ' libssl-dev libyaml-cpp-dev | sed 's/, $//')"

mkdir -p "$rel/build"
t1=$(date +%s)
if ! FA_ROOT_BIND="$src:/src:ro $rel/build:/build" in_root "$root" sh -c '
  set -e
  [ -f /build/build.ninja ] ||
    cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFA_PORTABLE=ON -DFA_TESTS=OFF -DFA_WERROR="$1"
  nice -n 10 ninja -C /build -j "$2"' sh "${FA_WERROR:-ON}" "${JOBS:-$(nproc)}" \
  </dev/null >"$rel/build.log" 2>&1; then
  tail -n 40 "$rel/build.log" >&2
  die "the build in the Debian 11 root failed (log: $rel/build.log)"
fi
log "built in the Debian 11 root in $(($(date +%s) - t1)) s"

for r in "$@"; do
  dest=$out
  [ $# -eq 1 ] || dest=$out/r$r
  rm -rf "$rel/build/packages-r$r"
  if ! FA_ROOT_BIND="$src:/src:ro $rel/build:/build" in_root "$root" \
    cpack --config /build/CPackConfig.cmake -B "/build/packages-r$r" \
    -D CPACK_DEBIAN_PACKAGE_RELEASE="$r" -D CPACK_RPM_PACKAGE_RELEASE="$r" </dev/null >"$rel/cpack-r$r.log" 2>&1; then
    cat "$rel/cpack-r$r.log" >&2
    die "cpack (release $r) failed (log: $rel/cpack-r$r.log)"
  fi
  mkdir -p "$dest"
  rm -f "$dest"/fabric-agent_*_amd64.deb "$dest"/fabric-agent-*.x86_64.rpm
  cp "$rel/build/packages-r$r"/*.deb "$rel/build/packages-r$r"/*.rpm "$dest/"
  rm -rf "$rel/build/packages-r$r"
  for f in "$dest"/*.deb "$dest"/*.rpm; do log "$f: $(stat -c %s "$f") bytes"; done
done
log "done in $(($(date +%s) - t0)) s"
