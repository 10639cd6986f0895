#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The .deb's life in a Debian N root (11, 12 or 13; debootstrap minbase, cached):
# install with apt (dependencies resolve from the Debian archive), files and
# modes, token, unit enabled, `fabric-agent version` and `inspect`; edit
# agent.yaml and upgrade to a higher release non-interactively (the edit and
# the token are kept, the daemon is restarted, not stopped); remove (config
# and state kept, daemon stopped); purge (everything the package created is
# gone: the root matches its pre-install listing except for the dependencies
# apt pulled in and dpkg/apt's own bookkeeping).
#
# No services run in the root: policy-rc.d answers 101 ("not allowed") and
# records what deb-systemd-invoke asked for, so the start/restart/stop calls
# of the maintainer scripts are checked without starting anything.
# /run/systemd/system exists in the root (the scripts' "systemd is running"
# test); the root has systemd's systemctl (not as init), which works offline
# in a chroot: deb-systemd-helper enables the unit through it, as on a host.
#   deb_chroot.sh SOURCE_DIR PACKAGES_DIR N
set -uo pipefail
n=${3:-12}
FA_TEST_NAME=packaging:deb-lifecycle-debian$n
source "$(dirname "$0")/lib.sh"

src=$1
fa_packages "$2"
work=$(mktemp -d /var/tmp/fa-deb-chroot.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/root"
t0=$(date +%s)
fa_unpack_root "$root" "$n"
log "Debian $(cat "$root/etc/debian_version") root unpacked in $(($(date +%s) - t0)) s"

# Test scaffolding, outside anything the package touches.
fa_policy_root "$root"
mkdir -p "$root/tmp/pkgs" "$root/tmp/fixtures"
cp "$DEB1" "$DEB2" "$root/tmp/pkgs/"
cp -a "$src/tests/fixtures/a-ib-8gpu" "$root/tmp/fixtures/"
deb1=/tmp/pkgs/$(basename "$DEB1")
deb2=/tmp/pkgs/$(basename "$DEB2")

# What exists before the package (and its dependencies) arrive.
snapshot() {
  in_root "$root" find / -xdev \( -path /proc -o -path /sys -o -path /tmp \) -prune -o -print | sort
}
t0=$(date +%s)
out=$(in_root "$root" apt-get update -q 2>&1)
check "apt-get update in the root: $out" test $? -eq 0
log "apt-get update: $(($(date +%s) - t0)) s"
# A provider's host has the openssl tool and with it the release's
# /etc/ssl/openssl.cnf, which the compiled-in OpenSSL reads (the TLS check).
out=$(in_root "$root" apt-get install -y -q --no-install-recommends openssl </dev/null 2>&1)
check "apt-get install openssl (the host's openssl.cnf): $out" test $? -eq 0
snapshot >"$work/before"
in_root "$root" dpkg-query -W -f '${Package}\n' | sort >"$work/pkgs-before"

# --- install ---
t0=$(date +%s)
out=$(in_root "$root" apt-get install -y -q --no-install-recommends "$deb1" </dev/null 2>&1)
rc=$?
log "apt-get install: $(($(date +%s) - t0)) s"
check "apt-get install ./fabric-agent (release 1): $out" test $rc -eq 0
status=$(in_root "$root" dpkg-query -W -f '${Status} ${Version}' fabric-agent 2>&1)
expect_match "installed" '^install ok installed [0-9.]+-1$' "$status"
check "apt-get check: dependencies satisfied" in_root "$root" apt-get check -q
expect_eq "dpkg --audit: nothing half-installed" "" "$(in_root "$root" dpkg --audit 2>&1)"
for lib in libibverbs1 libibumad3 libsystemd0 libnl-3-200 libnl-route-3-200 libnl-genl-3-200; do
  expect_match "dependency $lib installed by apt" '^install ok installed$' \
    "$(in_root "$root" dpkg-query -W -f '${Status}' "$lib" 2>&1)"
done

expect_eq "/usr/bin/fabric-agent" "755 root root" "$(stat_of "$root/usr/bin/fabric-agent")"
expect_eq "/usr/bin/fabric-agent-runtime" "755 root root" "$(stat_of "$root/usr/bin/fabric-agent-runtime")"
expect_eq "unit" "644 root root" "$(stat_of "$root/usr/lib/systemd/system/fabric-agent.service")"
expect_eq "agent.yaml" "644 root root" "$(stat_of "$root/etc/fabric-agent/agent.yaml")"
expect_eq "state dir" "700 root root" "$(stat_of "$root/var/lib/fabric-agent")"
expect_eq "token" "600 root root" "$(stat_of "$root/var/lib/fabric-agent/token")"
check "token is 64 hex digits" grep -Eqx '[0-9a-f]{64}' "$root/var/lib/fabric-agent/token"
token=$(cat "$root/var/lib/fabric-agent/token" 2>/dev/null)
expect_eq "man page" "644 root root" "$(stat_of "$root/usr/share/man/man8/fabric-agent.8.gz")"
expect_eq "copyright" "644 root root" "$(stat_of "$root/usr/share/doc/fabric-agent/copyright")"
expect_eq "changelog.Debian.gz" "644 root root" "$(stat_of "$root/usr/share/doc/fabric-agent/changelog.Debian.gz")"
expect_match "conffile registered" '^ /etc/fabric-agent/agent\.yaml [0-9a-f]{32}$' \
  "$(in_root "$root" dpkg-query -W -f '${Conffiles}\n' fabric-agent)"
check "unit enabled (deb-systemd-helper)" test -L "$root/etc/systemd/system/multi-user.target.wants/fabric-agent.service"
expect_eq "systemctl is-enabled" enabled "$(in_root "$root" systemctl --root=/ is-enabled fabric-agent.service 2>&1)"
expect_match "postinst asked to start the daemon" '^fabric-agent\.service start$' "$(cat "$root/var/log/fa-policy-rc.log" 2>&1)"

out=$(in_root "$root" fabric-agent version 2>&1)
expect_match "fabric-agent version" '^fabric-agent [0-9]+\.[0-9]+\.[0-9]+$' "$out"
# inspect reads /etc/fabric-agent/agent.yaml: the shipped conffile must load.
out=$(in_root "$root" fabric-agent inspect 2>&1)
check "fabric-agent inspect (this host's /sys, shipped config): $out" test $? -eq 0
out=$(in_root "$root" fabric-agent inspect --json --sysfs-root /tmp/fixtures/a-ib-8gpu 2>&1)
expect_match "inspect --json on the InfiniBand fixture" '"kind": "infiniband"' "$out"

# The packaged daemon with the package's token, then over mutual TLS.
fa_check_daemon "$root" "$token"

# The same over mutual TLS, with the OpenSSL compiled into the binary on
# both ends and the root's /etc/ssl/openssl.cnf (Debian 12's and 13's are
# OpenSSL 3's): a CA, the server's certificate for 127.0.0.1 and a
# client's, made on the host, and a self-signed one the server must refuse.
tls=$root/tmp/tls
mkdir -p "$tls"
(
  cd "$tls" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=fa-test-ca \
      -keyout ca.key -out ca.pem &&
    for who in server client; do
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=fa-test-$who" \
        -keyout "$who.key" -out "$who.csr" &&
        openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out "$who.pem" \
          -extfile <(echo "subjectAltName=IP:127.0.0.1")
    done &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=fa-test-other \
      -keyout other.key -out other.pem
) >"$work/openssl.log" 2>&1 || cat "$work/openssl.log" >&2
cat >"$tls/agent.yaml" <<EOF
listen: 127.0.0.1:7443
tls:
  cert: /tmp/tls/server.pem
  key: /tmp/tls/server.key
  client_ca: /tmp/tls/ca.pem
EOF
out=$(in_root_netns "$root" /bin/sh -c '
  fabric-agent run --config /tmp/tls/agent.yaml >/var/log/fa-run.log 2>&1 &
  pid=$!
  i=0
  st() { fabric-agent status --url https://127.0.0.1:7443 --ca-file /tmp/tls/ca.pem "$@"; }
  until st --cert /tmp/tls/client.pem --key /tmp/tls/client.key >/tmp/fa-status.out 2>&1; do
    kill -0 $pid 2>/dev/null || break
    i=$((i + 1)); [ $i -lt 150 ] || break
    sleep 0.2
  done
  st --cert /tmp/tls/client.pem --key /tmp/tls/client.key >/tmp/fa-status.out 2>&1; echo "status_rc=$?"
  cat /tmp/fa-status.out
  # A client certificate of another CA is refused in the handshake.
  st --cert /tmp/tls/other.pem --key /tmp/tls/other.key >/dev/null 2>&1; echo "foreign_rc=$?"
  kill -TERM $pid; wait $pid; echo "run_rc=$?"' 2>&1)
log "daemon over TLS in the root: $(printf '%s' "$out" | head -n 2 | tr '\n' ' ')"
expect_match "fabric-agent status over mutual TLS" '^status_rc=0$' "$out"
expect_match "status over TLS shows the daemon at https://" '^agent +fabric-agent [0-9.]+ at https://127\.0\.0\.1:7443' "$out"
expect_match "a client certificate of another CA is refused" '^foreign_rc=[1-9]' "$out"
expect_match "the TLS daemon exits 0 on SIGTERM" '^run_rc=0$' "$out"
rm -rf "$tls" "$root/var/log/fa-run.log" "$root/tmp/fa-status.out"

# --- edit, upgrade non-interactively ---
# Two edits: provider_id, and overlay.interface, which inspect reports back
# as NCCL_SOCKET_IFNAME (so the installed binary is seen using the edit).
sed -i -e 's/^#provider_id: ""$/provider_id: "chroot-edit"/' -e 's/^#overlay:$/overlay:/' \
  -e 's/^#  interface: wg0$/  interface: wg7/' "$root/etc/fabric-agent/agent.yaml"
check "edit applied" grep -qx 'provider_id: "chroot-edit"' "$root/etc/fabric-agent/agent.yaml"
expect_match "inspect uses the edited config" '"NCCL_SOCKET_IFNAME": "wg7"' \
  "$(in_root "$root" fabric-agent inspect --json --sysfs-root /tmp/fixtures/a-ib-8gpu 2>&1)"
: >"$root/var/log/fa-policy-rc.log"
t0=$(date +%s)
out=$(in_root "$root" apt-get install -y -q --no-install-recommends "$deb2" </dev/null 2>&1)
rc=$?
log "apt-get install (upgrade): $(($(date +%s) - t0)) s"
check "upgrade to release 2 without a prompt: $out" test $rc -eq 0
expect_match "upgraded" '^install ok installed [0-9.]+-2$' "$(in_root "$root" dpkg-query -W -f '${Status} ${Version}' fabric-agent 2>&1)"
check "upgrade keeps the edit" grep -qx 'provider_id: "chroot-edit"' "$root/etc/fabric-agent/agent.yaml"
check "no .dpkg-dist/.dpkg-new/.dpkg-old" sh -c "! ls '$root/etc/fabric-agent/' | grep -q dpkg"
expect_eq "upgrade keeps the token" "$token" "$(cat "$root/var/lib/fabric-agent/token" 2>/dev/null)"
policy=$(cat "$root/var/log/fa-policy-rc.log" 2>&1)
expect_match "upgrade restarts the daemon" '^fabric-agent\.service restart$' "$policy"
expect_no_match "upgrade does not stop it first" 'stop' "$policy"
expect_match "the upgraded binary uses the kept edit" '"NCCL_SOCKET_IFNAME": "wg7"' \
  "$(in_root "$root" fabric-agent inspect --json --sysfs-root /tmp/fixtures/a-ib-8gpu 2>&1)"

# --- a fleet tool's drop-in beside the conffile ---
expect_eq "drop-in dir" "755 root root" "$(stat_of "$root/etc/fabric-agent/agent.yaml.d")"
printf 'overlay:\n  interface: wg8\n' >"$root/etc/fabric-agent/agent.yaml.d/50-fleet.yaml"
expect_match "inspect uses the drop-in over the edited conffile" '"NCCL_SOCKET_IFNAME": "wg8"' \
  "$(in_root "$root" fabric-agent inspect --json --sysfs-root /tmp/fixtures/a-ib-8gpu 2>&1)"
rm -f "$root/etc/fabric-agent/agent.yaml.d/50-fleet.yaml"

# --- remove: config and state stay ---
: >"$root/var/log/fa-policy-rc.log"
out=$(in_root "$root" apt-get remove -y -q fabric-agent </dev/null 2>&1)
check "apt-get remove: $out" test $? -eq 0
expect_match "config-files state" '^deinstall ok config-files' "$(in_root "$root" dpkg-query -W -f '${Status}' fabric-agent 2>&1)"
expect_match "prerm stopped the daemon" '^fabric-agent\.service stop$' "$(cat "$root/var/log/fa-policy-rc.log" 2>&1)"
check "binary removed" test ! -e "$root/usr/bin/fabric-agent"
check "runtime removed" test ! -e "$root/usr/bin/fabric-agent-runtime"
check "unit removed" test ! -e "$root/usr/lib/systemd/system/fabric-agent.service"
expect_eq "unit masked until purge (deb-systemd-helper)" /dev/null "$(readlink "$root/etc/systemd/system/fabric-agent.service")"
check "remove keeps the edited config" grep -qx 'provider_id: "chroot-edit"' "$root/etc/fabric-agent/agent.yaml"
expect_eq "remove keeps the token" "$token" "$(cat "$root/var/lib/fabric-agent/token" 2>/dev/null)"

# --- purge: nothing the package created is left ---
out=$(in_root "$root" apt-get purge -y -q fabric-agent </dev/null 2>&1)
check "apt-get purge: $out" test $? -eq 0
expect_eq "not known to dpkg" "" "$(in_root "$root" dpkg-query -W -f '${Status}' fabric-agent 2>/dev/null)"
for p in /etc/fabric-agent /etc/fabric-agent/agent.yaml.d /var/lib/fabric-agent /etc/systemd/system/multi-user.target.wants/fabric-agent.service \
  /etc/systemd/system/fabric-agent.service /usr/share/doc/fabric-agent; do
  check "purge removed $p" test ! -e "$root$p" -a ! -L "$root$p"
done
rm -f "$root/var/log/fa-policy-rc.log"
snapshot >"$work/after"
in_root "$root" dpkg-query -W -f '${Package}\n' | sort >"$work/pkgs-after"
# Paths new since before the install must belong to a dependency apt pulled
# in, or be dpkg/apt bookkeeping, or be a directory deb-systemd-helper keeps
# for every package (its state dirs, target .wants dirs).
comm -13 "$work/pkgs-before" "$work/pkgs-after" >"$work/new-pkgs"
log "dependencies apt installed: $(tr '\n' ' ' <"$work/new-pkgs")"
: >"$work/owned"
while read -r p; do in_root "$root" dpkg -L "$p" </dev/null >>"$work/owned" 2>/dev/null; done <"$work/new-pkgs"
# dpkg names some files by their pre-/usr-merge path (/lib/...); find sees /usr/lib/...
sed -E 'p; s#^/(bin|sbin|lib|lib32|lib64|libx32)(/|$)#/usr/\1\2#' "$work/owned" | sort -u >"$work/owned.merged"
mv "$work/owned.merged" "$work/owned"
leftover=""
while IFS= read -r p; do
  case "$p" in
    /var/lib/dpkg/* | /var/lib/apt/* | /var/cache/apt/* | /var/cache/debconf/* | /var/log/* | /var/cache/ldconfig/* | /etc/ld.so.cache) continue ;;
    # adduser's lock and groupadd's backups, when a dependency's postinst
    # adds a system group (libibverbs1 adds "rdma").
    /run/adduser | /etc/group- | /etc/gshadow- | /etc/passwd- | /etc/shadow-) continue ;;
  esac
  if grep -qxF -- "$p" "$work/owned"; then continue; fi
  if [ -d "$root$p" ] && [ ! -L "$root$p" ]; then
    case "$p" in
      /etc/systemd/system | /etc/systemd/system/* | /var/lib/systemd | /var/lib/systemd/*)
        [ -z "$(find "$root$p" ! -type d)" ] && continue ;;
    esac
  fi
  leftover+="$p"$'\n'
done < <(comm -13 "$work/before" "$work/after")
expect_eq "purge leaves nothing else behind" "" "$leftover"
check "nothing named fabric-agent left anywhere" sh -c "! grep -q fabric-agent '$work/after'"

finish
