#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The .deb as built: control fields, run-time dependencies (computed by
# dpkg-shlibdeps from the binary's NEEDED libraries, each a soname every
# supported distribution ships; the glibc it needs no newer than Debian
# 11's; yaml-cpp and OpenSSL compiled in, current with Debian 11's), files,
# owners and modes, conffiles, maintainer scripts, a stripped binary with no
# debug sections, and lintian with no error and no warning left unexplained
# (each override carries a one-line reason).
#   deb_contents.sh SOURCE_DIR BUILD_DIR PACKAGES_DIR
set -uo pipefail
FA_TEST_NAME=packaging:deb
source "$(dirname "$0")/lib.sh"

src=$1
build=$2
fa_packages "$3"
work=$(mktemp -d /var/tmp/fa-deb-contents.XXXXXX)
trap 'rm -rf "$work"' EXIT

version=$(dpkg-deb -f "$DEB1" Version)
expect_match "Version is upstream-release" '^[0-9]+\.[0-9]+\.[0-9]+-1$' "$version"
expect_eq "Package" fabric-agent "$(dpkg-deb -f "$DEB1" Package)"
expect_eq "Architecture" amd64 "$(dpkg-deb -f "$DEB1" Architecture)"
expect_eq "Section" net "$(dpkg-deb -f "$DEB1" Section)"
expect_eq "release 2 is newer" 0 "$(dpkg --compare-versions "$(dpkg-deb -f "$DEB2" Version)" gt "$version"; echo $?)"

# Run-time dependencies. The binary loads its libraries as NEEDED entries,
# and dpkg-shlibdeps turns each into the Debian package that ships it, with
# the minimum version the binary's symbols need.
depends_field=$(dpkg-deb -f "$DEB1" Depends)
depends=$(tr ',' '\n' <<<"$depends_field" | sed 's/^ *//; s/ .*//; s/:any$//')
log "Depends: $depends_field"
dpkg-deb -x "$DEB1" "$work/data"
needed=$(readelf -d "$work/data/usr/bin/fabric-agent" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
log "NEEDED: $(tr '\n' ' ' <<<"$needed")"
for so in libibverbs.so.1 libibumad.so.3 libnl-3.so.200 libnl-genl-3.so.200 libnl-route-3.so.200 libsystemd.so.0; do
  expect_line "the packaged binary has NEEDED $so" "$so" "$needed"
done
# One .deb serves Debian 11 to 13 and Ubuntu 22.04/24.04: each NEEDED soname
# is one all of them ship (yaml-cpp's and OpenSSL's differ between them).
stable="libibverbs.so.1 libibumad.so.3 libnl-3.so.200 libnl-route-3.so.200 libnl-genl-3.so.200 libsystemd.so.0
libstdc++.so.6 libgcc_s.so.1 libm.so.6 libc.so.6 libpthread.so.0 libdl.so.2"
expect_eq "every NEEDED soname is one each supported distribution ships" "" \
  "$(grep -vxF -f <(tr ' ' '\n' <<<"$stable") <<<"$needed")"
for lib in libibverbs1 libibumad3 libnl-3-200 libnl-genl-3-200 libnl-route-3-200 libsystemd0 libstdc++6 libc6; do
  expect_line "Depends names $lib" "$lib" "$depends"
done
expect_no_match "Depends names no yaml-cpp or OpenSSL package (compiled in)" '^lib(yaml-cpp|ssl)' "$depends"
# shlibdeps writes every library's minimum version; a hand-written list would not.
expect_match "Depends carries shlibdeps' versions (libc6 (>= 2.x))" '(^|, )libc6 \(>= 2\.[0-9]+\)' "$depends_field"
expect_match "Depends carries shlibdeps' versions (libstdc++6 (>= N))" '(^|, )libstdc\+\+6 \(>= [0-9.]+\)' "$depends_field"
# The glibc the binary needs: its highest GLIBC_2.N version (and 2.36 for
# DT_RELR's GLIBC_ABI_DT_RELR, a version without symbols), at most Debian 11's.
glibc_need=$(readelf -V -W "$work/data/usr/bin/fabric-agent" |
  sed -n 's/.*Name: GLIBC_\(2\.[0-9.]*\) .*/\1/p; s/.*Name: GLIBC_ABI_DT_RELR .*/2.36/p' | sort -V | tail -n1)
log "glibc needed: $glibc_need"
libc_floor=$(tr ',' '\n' <<<"$depends_field" | sed -n 's/^ *libc6 (>= \([^)]*\)).*/\1/p' | sort -V | tail -n1)
check "Depends' libc6 (>= ${libc_floor:-none}) covers the glibc the binary needs ($glibc_need)" \
  dpkg --compare-versions "${libc_floor:-0}" ge "$glibc_need"
check "the binary needs glibc $glibc_need, at most Debian 11's 2.31" dpkg --compare-versions "$glibc_need" le 2.31
# What is compiled in is the build root's current version (scripts/package.sh
# upgrades it from Debian 11's security suite before each build).
root=$build/release/root
for dev in libssl-dev libyaml-cpp-dev; do
  check "the build root's $dev is the newest its apt knows" \
    test "$(chroot "$root" dpkg-query -W -f '${Version}' "$dev")" = \
    "$(chroot "$root" apt-cache policy "$dev" | sed -n 's/^ *Candidate: //p')"
done
ssl_upstream=$(chroot "$root" dpkg-query -W -f '${Version}' libssl-dev | sed 's/-.*//')
expect_match "the binary carries the build root's OpenSSL ($ssl_upstream)" "^OpenSSL ${ssl_upstream//./\\.} " \
  "$(strings "$work/data/usr/bin/fabric-agent" | grep '^OpenSSL ')"
for so in $needed; do
  path=$(ldconfig -p | awk -v so="$so" '$1 == so && /x86-64/ { print $NF; exit }')
  pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n1 | cut -d: -f1)
  [ -n "$pkg" ] || pkg=$(dpkg -S "$path" 2>/dev/null | head -n1 | cut -d: -f1)
  if [ -z "$pkg" ]; then fail "no Debian package found for NEEDED $so ($path)"; continue; fi
  # The library's shlibs may name a virtual package it provides.
  ok=no
  for name in $pkg $(dpkg-query -W -f '${Provides}' "$pkg" | tr ',' '\n' | sed 's/^ *//; s/ .*//'); do
    grep -Fxq -- "$name" <<<"$depends" && ok=yes
  done
  expect_eq "NEEDED $so ($pkg or what it provides) is declared in Depends" yes "$ok"
done
expect_match "Recommends wireguard-go (hosts whose kernel has no WireGuard)" '(^|, )wireguard-go($|,)' \
  "$(dpkg-deb -f "$DEB1" Recommends)"
# docs/packaging.md shows the dependency fields as `dpkg -I` prints them.
expect_eq "docs/packaging.md's dpkg -I block is the package's Depends, Recommends, Suggests" \
  "$(dpkg-deb -I "$DEB1" | grep -E '^ (Depends|Recommends|Suggests): ')" \
  "$(awk 'f == 0 && index($0, "`dpkg -I fabric-agent_") { f = 1; next }
          f == 1 && /^```$/ { f = 2; next } f == 2 && /^```$/ { exit } f == 2' "$src/docs/packaging.md")"

# Files, owners and modes as dpkg will create them.
listing=$(dpkg-deb -c "$DEB1")
expect_match "binary 0755 root" '^-rwxr-xr-x root/root .* \./usr/bin/fabric-agent$' "$listing"
expect_match "runtime 0755 root" '^-rwxr-xr-x root/root .* \./usr/bin/fabric-agent-runtime$' "$listing"
expect_eq "two executables: the binary and the nested-container runtime" \
  "$(printf '%s\n' ./usr/bin/fabric-agent ./usr/bin/fabric-agent-runtime)" \
  "$(awk '$1 ~ /^-..x/ { print $NF }' <<<"$listing" | sort)"
expect_match "unit under lib/systemd/system" '^-rw-r--r-- root/root .* \./usr/lib/systemd/system/fabric-agent\.service$' "$listing"
expect_match "config 0644" '^-rw-r--r-- root/root .* \./etc/fabric-agent/agent\.yaml$' "$listing"
expect_match "drop-in dir 0755" '^drwxr-xr-x root/root .* \./etc/fabric-agent/agent\.yaml\.d/$' "$listing"
expect_match "state dir 0700" '^drwx------ root/root .* \./var/lib/fabric-agent/$' "$listing"
expect_match "man page" '^-rw-r--r-- root/root .* \./usr/share/man/man8/fabric-agent\.8\.gz$' "$listing"
expect_match "copyright" '^-rw-r--r-- root/root .* \./usr/share/doc/fabric-agent/copyright$' "$listing"
expect_match "changelog.Debian.gz" '^-rw-r--r-- root/root .* \./usr/share/doc/fabric-agent/changelog\.Debian\.gz$' "$listing"
expect_match "lintian overrides" '^-rw-r--r-- root/root .* \./usr/share/lintian/overrides/fabric-agent$' "$listing"
expect_no_match "no RPM-only license dir" 'usr/share/licenses' "$listing"
expect_no_match "no token shipped (created on install)" 'var/lib/fabric-agent/.' "$listing"
expect_eq "every entry owned by root/root" "" "$(printf '%s\n' "$listing" | awk '$2 != "root/root"')"

# Control area: conffiles and maintainer scripts.
dpkg-deb -e "$DEB1" "$work/control"
expect_eq "conffiles" "/etc/fabric-agent/agent.yaml" "$(cat "$work/control/conffiles")"
for s in postinst prerm postrm; do
  expect_eq "$s mode" "755 root root" "$(stat_of "$work/control/$s")"
  check "$s is valid sh" sh -n "$work/control/$s"
done
expect_match "postinst creates the token" 'fa_create_token' "$(cat "$work/control/postinst")"
expect_match "postinst enables the unit" 'deb-systemd-helper enable fabric-agent.service' "$(cat "$work/control/postinst")"
expect_match "postinst starts/restarts through deb-systemd-invoke" 'deb-systemd-invoke "\$fa_action" fabric-agent.service' "$(cat "$work/control/postinst")"
expect_match "prerm stops on remove" 'deb-systemd-invoke stop fabric-agent.service' "$(cat "$work/control/prerm")"
expect_match "postrm purges state" 'rm -rf /var/lib/fabric-agent' "$(cat "$work/control/postrm")"

# Data: the shipped files are the sources, the binary is stripped.
check "agent.yaml is packaging/agent.yaml" cmp -s "$src/packaging/agent.yaml" "$work/data/etc/fabric-agent/agent.yaml"
check "unit is systemd/fabric-agent.service" cmp -s "$src/systemd/fabric-agent.service" \
  "$work/data/usr/lib/systemd/system/fabric-agent.service"
check "man page is packaging/fabric-agent.8" cmp -s "$src/packaging/fabric-agent.8" <(zcat "$work/data/usr/share/man/man8/fabric-agent.8.gz")
# The binary: bound at start, position-independent, stripped, the build
# tree's build id.
bid() { readelf -n "$1" | sed -n 's/.*Build ID: //p'; }
f=usr/bin/fabric-agent
dynamic=$(readelf -d -W "$work/data/$f")
expect_match "$f: full RELRO: bound at start (BIND_NOW)" '\(FLAGS\).*BIND_NOW' "$dynamic"
expect_match "$f: position-independent (PIE)" '\(FLAGS_1\).*PIE' "$dynamic"
expect_match "$f: RELRO segment" 'GNU_RELRO' "$(readelf -l -W "$work/data/$f")"
sections=$(readelf -S -W "$work/data/$f")
expect_no_match "$f: no symbol table" '\.symtab' "$sections"
expect_no_match "$f: no debug sections" '\.debug_' "$sections"
expect_match "$f: build id kept (matches the unstripped build binary)" '\.note\.gnu\.build-id' "$sections"
expect_eq "$f: same build id as the build tree's (release/build/agent/fabric-agent)" \
  "$(bid "$build/release/build/agent/fabric-agent")" "$(bid "$work/data/$f")"
# The runtime is bind-mounted into renters' images: a static PIE, no NEEDED
# library, hardened and stripped the same way.
f=usr/bin/fabric-agent-runtime
dynamic=$(readelf -d -W "$work/data/$f")
expect_no_match "$f: no shared library needed (static)" '\(NEEDED\)' "$dynamic"
expect_match "$f: position-independent (PIE)" '\(FLAGS_1\).*PIE' "$dynamic"
expect_match "$f: bound at start (BIND_NOW)" '\(FLAGS\).*BIND_NOW' "$dynamic"
sections=$(readelf -S -W "$work/data/$f")
expect_no_match "$f: no symbol table" '\.symtab' "$sections"
expect_eq "$f: same build id as the build tree's" "$(bid "$build/release/build/agent/fabric-agent-runtime")" \
  "$(bid "$work/data/$f")"

# lintian: no error, no warning; every override has a reason on the line above.
overrides="$src/packaging/deb/lintian-overrides"
prev=""
while IFS= read -r line; do
  case "$line" in
    '' | '#'*) ;;
    *) expect_match "override '$line' has a one-line reason above it" '^# [^ ].{9,}' "$prev" ;;
  esac
  prev=$line
done <"$overrides"
start=$(date +%s)
lint=$(lintian --fail-on error,warning --display-info "$DEB1" 2>&1)
rc=$?
log "lintian ($(($(date +%s) - start)) s, exit $rc):"
printf '%s\n' "$lint" | sed 's/^/  /' >&2
expect_eq "lintian: no error or warning left" 0 "$rc"
expect_no_match "lintian: no unused override" 'unused-override|mismatched-override' "$lint"
expect_no_match "lintian: no hardening tag" 'hardening-' "$lint"

finish
