# SPDX-License-Identifier: Apache-2.0
# Shared helpers of the packaging tests and of the release build
# (scripts/package.sh), sourced, bash.
#
# Debian roots, each made once with debootstrap (minbase) and cached as a
# tarball under /var/cache/fabric-agent-pkg, created under flock so
# concurrent runs wait for one another instead of bootstrapping twice:
#   debianN-minbase-systemd-v2.tar.zst   N = 11, 12, 13: where the .deb is installed and run
#   debian11-build-KEY.tar.zst           the release build's base: Debian 11 with what
#                                        `scripts/deps.sh --build-root` installs (KEY: that
#                                        script and the recipe)
# Network: debootstrap and apt inside the roots talk only to the Debian
# archive ($FA_DEBIAN_MIRROR, default deb.debian.org, the registry the
# host's apt uses, and its security suite).

FA_PKG_CACHE=${FA_PKG_CACHE:-/var/cache/fabric-agent-pkg}
FA_DEBIAN_MIRROR=${FA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
FA_DEBIAN_SECURITY=${FA_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
FA_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Bump when the recipe of fa_root_tarball changes, so an old cached root is not reused.
FA_ROOT_RECIPE=v2
# The Debian 12 root (the default of fa_unpack_root; the lab's machines start from it).
FA_ROOT_TARBALL="$FA_PKG_CACHE/debian12-minbase-systemd-$FA_ROOT_RECIPE.tar.zst"

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

# fa_check_daemon ROOT TOKEN: the packaged daemon in ROOT, run as the unit
# would (its own network namespace, the package's /etc and /var/lib) must
# take the token the package created (not make its own), answer
# `fabric-agent status` with it, and exit 0 on SIGTERM.
fa_check_daemon() {
  local root=$1 token=$2 out run_log
  out=$(in_root_netns "$root" /bin/sh -c '
    fabric-agent run >/var/log/fa-run.log 2>&1 &
    pid=$!
    i=0
    # Readiness: poll until the API answers or the daemon exits (at most 30 s).
    until fabric-agent status >/tmp/fa-status.out 2>&1; do
      kill -0 $pid 2>/dev/null || break
      i=$((i + 1)); [ $i -lt 150 ] || break
      sleep 0.2
    done
    fabric-agent status >/tmp/fa-status.out 2>&1; echo "status_rc=$?"
    cat /tmp/fa-status.out
    kill -TERM $pid; wait $pid; echo "run_rc=$?"' 2>&1)
  log "daemon in the root: $(printf '%s' "$out" | head -n 3 | tr '\n' ' ')"
  expect_match "fabric-agent status answers with the package's token" '^status_rc=0$' "$out"
  expect_match "status shows the daemon" '^agent +fabric-agent [0-9.]+ ' "$out"
  expect_match "the daemon exits 0 on SIGTERM" '^run_rc=0$' "$out"
  run_log=$(cat "$root/var/log/fa-run.log" 2>&1)
  expect_match "the daemon read the token the package created" 'bearer token read from /var/lib/fabric-agent/token' "$run_log"
  expect_no_match "the daemon did not create its own" 'created a bearer token' "$run_log"
  expect_eq "token unchanged by the daemon" "$token" "$(cat "$root/var/lib/fabric-agent/token" 2>/dev/null)"
  rm -f "$root/var/log/fa-run.log" "$root/tmp/fa-status.out"
}

# fa_policy_root ROOT: no services run in ROOT; policy-rc.d answers 101 ("not
# allowed") and records in /var/log/fa-policy-rc.log what deb-systemd-invoke
# asked for. /run/systemd/system exists (the maintainer scripts' "systemd is
# running" test).
fa_policy_root() {
  cat >"$1/usr/sbin/policy-rc.d" <<'EOF'
#!/bin/sh
echo "$*" >> /var/log/fa-policy-rc.log
exit 101
EOF
  chmod 0755 "$1/usr/sbin/policy-rc.d"
  mkdir -p "$1/run/systemd/system"
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

# fa_codename N: the codename of Debian N.
fa_codename() {
  case $1 in
    11) echo bullseye ;;
    12) echo bookworm ;;
    13) echo trixie ;;
    *) die "unknown Debian release '$1' (accepted: 11, 12, 13)" ;;
  esac
}

# fa_debootstrap N DIR [PACKAGES]: Debian N (minbase, plus PACKAGES, comma-
# separated) in DIR, with the release, updates and security suites as its
# apt sources; .debs cached in FA_ROOT_APT or the release's apt cache. Dies on error.
fa_debootstrap() {
  local n=$1 dir=$2 include=${3:-} suite log cache
  suite=$(fa_codename "$n")
  log="$FA_PKG_CACHE/debootstrap-debian$n.log"
  cache=${FA_ROOT_APT:-$FA_PKG_CACHE/apt-debian$n}
  mkdir -p "$cache/partial"
  log "debootstrap $suite (minbase${include:+ + $include}) from $FA_DEBIAN_MIRROR into $dir (once; cached)"
  if ! debootstrap --variant=minbase ${include:+--include="$include"} --cache-dir="$cache" \
    "$suite" "$dir" "$FA_DEBIAN_MIRROR" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -rf "$dir"
    die "debootstrap $suite failed (log: $log)"
  fi
  cat >"$dir/etc/apt/sources.list" <<EOF
deb $FA_DEBIAN_MIRROR $suite main
deb $FA_DEBIAN_MIRROR $suite-updates main
deb $FA_DEBIAN_SECURITY $suite-security main
EOF
}

# fa_pack_root DIR TARBALL: DIR as TARBALL (written atomically), then DIR removed.
fa_pack_root() {
  # apt's downloaded .debs live in the host cache (bind-mounted), not in the root.
  rm -f "$1"/var/cache/apt/archives/*.deb
  tar -C "$1" --numeric-owner -cf - . | zstd -q -T2 -3 -o "$2.tmp"
  mv "$2.tmp" "$2"
  rm -rf "$1"
}

# fa_root_path [N]: the cached root of Debian N (default 12): minbase plus systemd.
fa_root_path() { echo "$FA_PKG_CACHE/debian${1:-12}-minbase-systemd-$FA_ROOT_RECIPE.tar.zst"; }
# fa_root_tarball [N]: makes it, once.
fa_root_tarball() {
  local n=${1:-12} tarball dir
  tarball=$(fa_root_path "$n")
  mkdir -p "$FA_PKG_CACHE"
  exec 9>"$FA_PKG_CACHE/lock-debian$n"
  flock 9
  if [ ! -s "$tarball" ]; then
    dir=$(mktemp -d /var/tmp/fa-debootstrap.XXXXXX)
    # systemd (not as init): its systemctl is what deb-systemd-helper and the
    # RPM scriptlets call to enable units, offline, as on a real host.
    fa_debootstrap "$n" "$dir" systemd
    fa_pack_root "$dir" "$tarball"
  fi
  flock -u 9
  exec 9>&-
}

# fa_build_root_tarball: makes (once) the release build's base, Debian 11
# with what `scripts/deps.sh --build-root` installs (the compilers, the -dev
# libraries, dpkg-shlibdeps, rpmbuild), keyed by that script and this
# recipe (the code of the two functions). Prints its path.
fa_build_root_tarball() {
  local deps="$FA_LIB_DIR/../../scripts/deps.sh" key tarball dir
  key=$( { declare -f fa_debootstrap fa_build_root_tarball; cat "$deps"; } | sha256sum | cut -c1-12)
  tarball="$FA_PKG_CACHE/debian11-build-$key.tar.zst"
  mkdir -p "$FA_PKG_CACHE"
  exec 9>"$FA_PKG_CACHE/lock-debian11-build"
  flock 9
  if [ ! -s "$tarball" ]; then
    dir=$(mktemp -d /var/tmp/fa-debootstrap.XXXXXX)
    fa_debootstrap 11 "$dir" >&2
    cp /etc/resolv.conf "$dir/etc/resolv.conf"
    install -m 0755 "$deps" "$dir/tmp/deps.sh"
    log "Debian 11 build root: scripts/deps.sh --build-root (once; cached as $tarball)"
    if ! in_root "$dir" sh -c 'apt-get update -q && apt-get dist-upgrade -y -q && /tmp/deps.sh --build-root' \
      </dev/null >"$FA_PKG_CACHE/deps-debian11.log" 2>&1; then
      tail -n 30 "$FA_PKG_CACHE/deps-debian11.log" >&2
      rm -rf "$dir"
      die "scripts/deps.sh --build-root in the Debian 11 root failed (log: $FA_PKG_CACHE/deps-debian11.log)"
    fi
    rm -f "$dir/tmp/deps.sh"
    # Earlier recipes' build roots go.
    find "$FA_PKG_CACHE" -maxdepth 1 -name 'debian11-build-*.tar.zst' ! -name "$(basename "$tarball")" -delete
    fa_pack_root "$dir" "$tarball"
  fi
  flock -u 9
  exec 9>&-
  echo "$tarball"
}

# fa_unpack_root DIR [N]: a fresh root of Debian N (default 12) in DIR, with DNS for apt.
fa_unpack_root() {
  fa_root_tarball "${2:-12}"
  mkdir -p "$1"
  zstd -q -dc "$(fa_root_path "${2:-12}")" | tar -C "$1" --numeric-owner -xf -
  cp /etc/resolv.conf "$1/etc/resolv.conf"
}

# in_root_netns DIR COMMAND...: in_root in a new network namespace too, with
# only its own loopback (up): for running the daemon.
in_root_netns() { FA_ROOT_NETNS=1 in_root "$@"; }

# in_root DIR COMMAND...: runs COMMAND chrooted into DIR, in a private mount
# namespace (proc, a read-only sysfs and the apt archive cache of the root's
# Debian release, or FA_ROOT_APT, are mounted there and vanish with it),
# with a clean environment. No systemd runs in a root: SYSTEMD_OFFLINE=1
# tells its systemctl so (Debian 11's would try systemd's bus for `preset`
# otherwise; newer ones see the chroot). FA_ROOT_BIND="HOSTDIR:ROOTDIR[:ro] ..."
# bind-mounts more.
in_root() {
  local root=$1 apt
  shift
  apt=${FA_ROOT_APT:-$FA_PKG_CACHE/apt-debian$(cut -d. -f1 "$root/etc/debian_version")}
  mkdir -p "$apt/partial"
  unshare --mount --propagation private ${FA_ROOT_NETNS:+--net} -- /bin/sh -c '
    set -e
    root=$1; cache=$2; netns=$3; binds=$4; shift 4
    [ -z "$netns" ] || ip link set lo up
    mount -t proc proc "$root/proc"
    mount -t sysfs -o ro sysfs "$root/sys"
    mount --bind "$cache" "$root/var/cache/apt/archives"
    for b in $binds; do
      from=${b%%:*}; rest=${b#*:}; to=${rest%%:*}
      mkdir -p "$root$to"
      mount --bind "$from" "$root$to"
      [ "${rest#*:}" != ro ] || mount -o remount,bind,ro "$root$to"
    done
    exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive SYSTEMD_OFFLINE=1 "$@"' sh "$root" "$apt" "${FA_ROOT_NETNS:-}" "${FA_ROOT_BIND:-}" "$@"
}
