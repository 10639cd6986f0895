#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A provider's Debian 12 host moves from the package as it was built before
# the release builds moved to Debian 11 (built on Debian 12 with cpack, linked
# against Debian 12's libyaml-cpp0.7 and libssl3, needing glibc 2.36) to the
# release package (built in the Debian 11 root, yaml-cpp and OpenSSL compiled
# in): `apt-get install` of the new .deb upgrades without a prompt, keeps the
# edited agent.yaml and the token, restarts the daemon, and the new binary
# runs with neither of the old package's libraries installed (autoremove).
#
# The older package is made here from the build tree of this checkout
# (BUILD_DIR, built on this Debian 12 machine; in `make test` the sanitizer
# tree) with cpack as such a package was made, at revision 0; the release
# package is revision 1. What is upgraded is the package (its dependencies,
# conffiles, scripts, the token): the older binary itself never runs here, so
# a sanitizer tree's instrumented one stands in for it as well as any.
#   deb_upgrade.sh SOURCE_DIR BUILD_DIR PACKAGES_DIR
set -uo pipefail
FA_TEST_NAME=packaging:deb-upgrade-from-debian12-build
source "$(dirname "$0")/lib.sh"

src=$1
build=$2
fa_packages "$3"
work=$(mktemp -d /var/tmp/fa-deb-upgrade.XXXXXX)
trap 'rm -rf "$work"' EXIT

# --- the package as built on Debian 12 ---
t0=$(date +%s)
if ! cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/prev" \
  -D CPACK_DEBIAN_PACKAGE_RELEASE=0 </dev/null >"$work/cpack.log" 2>&1; then
  cat "$work/cpack.log" >&2
  die "cpack in $build failed"
fi
prev=$(ls "$work"/prev/fabric-agent_*_amd64.deb 2>/dev/null | head -n1)
[ -n "$prev" ] || die "cpack made no fabric-agent_*_amd64.deb in $work/prev"
prev_version=$(dpkg-deb -f "$prev" Version)
# Revision 0 is written as none (0.1.0): below the release's 0.1.0-1.
check "the older package's version $prev_version is below the release's" \
  dpkg --compare-versions "$prev_version" lt "$(dpkg-deb -f "$DEB1" Version)"
log "the Debian 12 build's package: $(basename "$prev"), $(stat -c %s "$prev") bytes, $(($(date +%s) - t0)) s"
prev_depends=$(dpkg-deb -f "$prev" Depends)
expect_match "the older package needs Debian 12's yaml-cpp" 'libyaml-cpp0\.7' "$prev_depends"
expect_match "the older package needs OpenSSL 3" 'libssl3' "$prev_depends"
new_depends=$(dpkg-deb -f "$DEB1" Depends)
expect_no_match "the release package needs no yaml-cpp package" 'libyaml-cpp' "$new_depends"
expect_no_match "the release package needs no libssl package" 'libssl' "$new_depends"

# --- a Debian 12 root with the older package, as a provider has it ---
root=$work/root
fa_unpack_root "$root" 12
fa_policy_root "$root"
mkdir -p "$root/tmp/pkgs" "$root/tmp/fixtures"
cp "$prev" "$DEB1" "$root/tmp/pkgs/"
cp -a "$src/tests/fixtures/a-ib-8gpu" "$root/tmp/fixtures/"
out=$(in_root "$root" apt-get update -q 2>&1)
check "apt-get update in the root: $out" test $? -eq 0
out=$(in_root "$root" apt-get install -y -q --no-install-recommends openssl "/tmp/pkgs/$(basename "$prev")" </dev/null 2>&1)
check "apt-get install the Debian 12 build's package: $out" test $? -eq 0
expect_eq "the older package installed" "install ok installed $prev_version" \
  "$(in_root "$root" dpkg-query -W -f '${Status} ${Version}' fabric-agent 2>&1)"
for lib in libyaml-cpp0.7 libssl3; do
  expect_match "$lib installed for the older package" '^install ok installed$' \
    "$(in_root "$root" dpkg-query -W -f '${Status}' "$lib" 2>&1)"
done
token=$(cat "$root/var/lib/fabric-agent/token" 2>/dev/null)
check "the older package made a token" grep -Eqx '[0-9a-f]{64}' <<<"$token"
sed -i -e 's/^#provider_id: ""$/provider_id: "upgrade-edit"/' -e 's/^#overlay:$/overlay:/' \
  -e 's/^#  interface: wg0$/  interface: wg7/' "$root/etc/fabric-agent/agent.yaml"
check "edit applied" grep -qx 'provider_id: "upgrade-edit"' "$root/etc/fabric-agent/agent.yaml"

# --- upgrade to the release package ---
: >"$root/var/log/fa-policy-rc.log"
t0=$(date +%s)
out=$(in_root "$root" apt-get install -y -q --no-install-recommends "/tmp/pkgs/$(basename "$DEB1")" </dev/null 2>&1)
rc=$?
log "apt-get install (upgrade): $(($(date +%s) - t0)) s"
check "upgrade to the release package without a prompt: $out" test $rc -eq 0
expect_match "upgraded" '^install ok installed [0-9.]+-1$' \
  "$(in_root "$root" dpkg-query -W -f '${Status} ${Version}' fabric-agent 2>&1)"
check "apt-get check: dependencies satisfied" in_root "$root" apt-get check -q
expect_eq "dpkg --audit: nothing half-installed" "" "$(in_root "$root" dpkg --audit 2>&1)"
check "upgrade keeps the edit" grep -qx 'provider_id: "upgrade-edit"' "$root/etc/fabric-agent/agent.yaml"
check "no .dpkg-dist/.dpkg-new/.dpkg-old" sh -c "! ls '$root/etc/fabric-agent/' | grep -q dpkg"
expect_eq "upgrade keeps the token" "$token" "$(cat "$root/var/lib/fabric-agent/token" 2>/dev/null)"
expect_eq "token still 0600" "600 root root" "$(stat_of "$root/var/lib/fabric-agent/token")"
policy=$(cat "$root/var/log/fa-policy-rc.log" 2>&1)
expect_match "upgrade restarts the daemon" '^fabric-agent\.service restart$' "$policy"
expect_no_match "upgrade does not stop it first" 'stop' "$policy"
expect_eq "unit still enabled" enabled "$(in_root "$root" systemctl --root=/ is-enabled fabric-agent.service 2>&1)"

# --- the old package's libraries go; the release binary does not miss them ---
out=$(in_root "$root" apt-get autoremove -y -q </dev/null 2>&1)
check "apt-get autoremove: $out" test $? -eq 0
expect_match "autoremove took libyaml-cpp0.7" '^(not-installed|deinstall|unknown)|^$' \
  "$(in_root "$root" dpkg-query -W -f '${Status}' libyaml-cpp0.7 2>/dev/null)"
needed=$(readelf -d "$root/usr/bin/fabric-agent" 2>&1 | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
expect_no_match "the release binary links no yaml-cpp or OpenSSL library" 'libyaml-cpp|libssl|libcrypto' "$needed"
expect_match "fabric-agent version" '^fabric-agent [0-9]+\.[0-9]+\.[0-9]+$' "$(in_root "$root" fabric-agent version 2>&1)"
expect_match "the upgraded binary uses the kept edit" '"NCCL_SOCKET_IFNAME": "wg7"' \
  "$(in_root "$root" fabric-agent inspect --json --sysfs-root /tmp/fixtures/a-ib-8gpu 2>&1)"
fa_check_daemon "$root" "$token"

finish
