# SPDX-License-Identifier: Apache-2.0
# Shared helpers of the packaging tests (sourced, bash).
#
# The Debian 12 root used by the .deb lifecycle test and by `rpm --root` is
# made once with debootstrap (minbase) and cached as a tarball under
# /var/cache/fabric-agent-pkg, created under flock so concurrent runs wait for
# one another instead of bootstrapping twice. Network: debootstrap and apt
# inside the root talk only to the Debian archive ($FA_DEBIAN_MIRROR,
# default deb.debian.org, the registry the host's apt uses).

FA_PKG_CACHE=${FA_PKG_CACHE:-/var/cache/fabric-agent-pkg}
FA_DEBIAN_MIRROR=${FA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
FA_DEBIAN_SECURITY=${FA_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
# Bump when the recipe below changes, so an old cached root is not reused.
FA_ROOT_TARBALL="$FA_PKG_CACHE/debian12-minbase-systemd-v2.tar.zst"

fa_checks=0
fa_failures=0

log() { printf '%s: %s\n' "${FA_TEST_NAME:-packaging}" "$*" >&2; }
fail() {
  fa_failures=$((fa_failures + 1))
  printf '%s: FAIL: %s\n' "${FA_TEST_NAME:-packaging}" "$*" >&2
}
die() {
  printf '%s: FATAL: %s\n' "${FA_TEST_NAME:-packaging}" "$*" >&2
  exit 1
}
pass() { fa_checks=$((fa_checks + 1)); }

# check DESCRIPTION COMMAND...: runs the command, counts a failure if it fails.
check() {
  local what=$1
  shift
  if "$@"; then pass; else fail "$what"; fi
}

# expect_eq DESCRIPTION WANT GOT
expect_eq() {
  if [ "$2" = "$3" ]; then pass; else fail "$1: want '$2', got '$3'"; fi
}

# expect_match DESCRIPTION EXTENDED_REGEX TEXT
expect_match() {
  if grep -Eq -- "$2" <<<"$3"; then pass; else fail "$1: no line matches /$2/ in:
$3"; fi
}

# expect_no_match DESCRIPTION EXTENDED_REGEX TEXT
expect_no_match() {
  if grep -Eq -- "$2" <<<"$3"; then fail "$1: a line matches /$2/ in:
$3"; else pass; fi
}

# expect_line DESCRIPTION LINE TEXT: TEXT has LINE as one whole line (no regex).
expect_line() {
  if grep -Fxq -- "$2" <<<"$3"; then pass; else fail "$1: no line '$2' in:
$3"; fi
}

finish() {
  log "$fa_checks checks passed, $fa_failures failed"
  [ "$fa_failures" -eq 0 ]
}

# stat_of PATH -> "MODE OWNER GROUP" (octal mode without leading zeros)
stat_of() { stat -c '%a %U %G' "$1" 2>/dev/null || echo missing; }

# fa_unit_known SOURCE_DIR: sets HAVE_UNIT when the tree has the systemd unit
# (systemd/, from the daemon's work); until then the unit checks are skipped,
# loudly, and everything else is checked.
fa_unit_known() {
  HAVE_UNIT=""
  if [ -f "$1/systemd/fabric-agent.service" ]; then
    HAVE_UNIT=1
  else
    log "SKIPPING the unit checks: systemd/fabric-agent.service is not in the source tree"
  fi
}

# The packages built by the packaging:build fixture.
fa_packages() {
  local out=$1
  DEB1=$(ls "$out"/r1/fabric-agent_*-1_amd64.deb 2>/dev/null | head -n1)
  DEB2=$(ls "$out"/r2/fabric-agent_*-2_amd64.deb 2>/dev/null | head -n1)
  RPM1=$(ls "$out"/r1/fabric-agent-*-1.x86_64.rpm 2>/dev/null | head -n1)
  RPM2=$(ls "$out"/r2/fabric-agent-*-2.x86_64.rpm 2>/dev/null | head -n1)
  [ -n "$DEB1" ] && [ -n "$DEB2" ] && [ -n "$RPM1" ] && [ -n "$RPM2" ] ||
    die "packages missing under $out (the packaging:build test makes them)"
}

# Makes (once) the cached Debian 12 root tarball: minbase plus systemd.
fa_root_tarball() {
  mkdir -p "$FA_PKG_CACHE/archives/partial"
  exec 9>"$FA_PKG_CACHE/lock"
  flock 9
  if [ ! -s "$FA_ROOT_TARBALL" ]; then
    local dir
    dir=$(mktemp -d /var/tmp/fa-debootstrap.XXXXXX)
    log "debootstrap bookworm (minbase) from $FA_DEBIAN_MIRROR into $dir (once; cached as $FA_ROOT_TARBALL)"
    # systemd (not as init): its systemctl is what deb-systemd-helper and the
    # RPM scriptlets call to enable units, offline, as on a real host.
    if ! debootstrap --variant=minbase --include=systemd --cache-dir="$FA_PKG_CACHE/archives" bookworm "$dir" "$FA_DEBIAN_MIRROR" \
      >"$FA_PKG_CACHE/debootstrap.log" 2>&1; then
      tail -n 30 "$FA_PKG_CACHE/debootstrap.log" >&2
      rm -rf "$dir"
      flock -u 9
      die "debootstrap failed (log: $FA_PKG_CACHE/debootstrap.log)"
    fi
    cat >"$dir/etc/apt/sources.list" <<EOF
deb $FA_DEBIAN_MIRROR bookworm main
deb $FA_DEBIAN_MIRROR bookworm-updates main
deb $FA_DEBIAN_SECURITY bookworm-security main
EOF
    # apt's downloaded .debs live in the host cache (bind-mounted), not in the root.
    rm -f "$dir"/var/cache/apt/archives/*.deb
    tar -C "$dir" --numeric-owner -cf - . | zstd -q -T2 -3 -o "$FA_ROOT_TARBALL.tmp"
    mv "$FA_ROOT_TARBALL.tmp" "$FA_ROOT_TARBALL"
    rm -rf "$dir"
  fi
  flock -u 9
  exec 9>&-
}

# fa_unpack_root DIR: a fresh Debian 12 root in DIR, with DNS for apt.
fa_unpack_root() {
  fa_root_tarball
  mkdir -p "$1"
  zstd -q -dc "$FA_ROOT_TARBALL" | tar -C "$1" --numeric-owner -xf -
  cp /etc/resolv.conf "$1/etc/resolv.conf"
}

# in_root_netns DIR COMMAND...: in_root in a new network namespace too, with
# only its own loopback (up): for running the daemon.
in_root_netns() { FA_ROOT_NETNS=1 in_root "$@"; }

# in_root DIR COMMAND...: runs COMMAND chrooted into DIR, in a private mount
# namespace (proc, a read-only sysfs and the apt archive cache are mounted
# there and vanish with it), with a clean environment.
in_root() {
  local root=$1
  shift
  unshare --mount --propagation private ${FA_ROOT_NETNS:+--net} -- /bin/sh -c '
    set -e
    root=$1; cache=$2; netns=$3; shift 3
    [ -z "$netns" ] || ip link set lo up
    mount -t proc proc "$root/proc"
    mount -t sysfs -o ro sysfs "$root/sys"
    mount --bind "$cache" "$root/var/cache/apt/archives"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"' sh "$root" "$FA_PKG_CACHE/archives" "${FA_ROOT_NETNS:-}" "$@"
}
