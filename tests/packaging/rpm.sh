#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The .rpm: queries on the file (-qpl, -qpR, --scripts, --configfiles, modes,
# changelog, stripped binary), -qpR against the libraries of RHEL 9-class
# systems (rhel9-sonames), then install, upgrade and erase with
# `rpm --root DIR --nodeps` into a Debian 12 root (it has the /bin/sh and
# coreutils the scriptlets run with; --nodeps because its libraries are not
# in an rpm database). The root has systemd's systemctl but no running
# systemd, as in an image build: the scriptlets enable/disable offline.
#   rpm.sh SOURCE_DIR BUILD_DIR PACKAGES_DIR
set -uo pipefail
FA_TEST_NAME=packaging:rpm
source "$(dirname "$0")/lib.sh"

src=$1
build=$2
fa_packages "$3"
work=$(mktemp -d /var/tmp/fa-rpm.XXXXXX)
trap 'rm -rf "$work"' EXIT
q() { rpm -qp --nosignature "$@" 2>&1; }

expect_match "name-version-release" '^fabric-agent-[0-9]+\.[0-9]+\.[0-9]+-1\.x86_64$' "$(q --qf '%{NEVRA}\n' "$RPM1")"
expect_eq "license" "Apache-2.0" "$(q --qf '%{LICENSE}' "$RPM1")"
expect_eq "release 2 is newer" 2 "$(q --qf '%{RELEASE}' "$RPM2")"

# -qpl: the files, nothing Debian-only, no distribution-owned directories.
files=$(q -l "$RPM1")
for f in /usr/bin/fabric-agent /usr/bin/fabric-agent-runtime /usr/lib/systemd/system/fabric-agent.service /etc/fabric-agent/agent.yaml \
  /etc/fabric-agent/agent.yaml.d /var/lib/fabric-agent /usr/share/man/man8/fabric-agent.8.gz /usr/share/licenses/fabric-agent/LICENSE \
  /usr/share/licenses/fabric-agent/copyright /usr/share/doc/fabric-agent/README.md; do
  expect_match "-qpl lists $f" "^${f//./\\.}\$" "$files"
done
expect_no_match "no Debian-only files" 'changelog\.Debian|lintian' "$files"
expect_no_match "does not own system directories" '^(/usr|/usr/bin|/usr/lib|/usr/lib/systemd|/usr/lib/systemd/system|/usr/share|/usr/share/man|/usr/share/man/man8|/etc|/var|/var/lib)$' "$files"

# --configfiles: agent.yaml only (noreplace); the unit is NOT a config file.
expect_eq "--configfiles" "/etc/fabric-agent/agent.yaml" "$(q --configfiles "$RPM1")"
expect_eq "agent.yaml is %config(noreplace) (fflags c+n)" "/etc/fabric-agent/agent.yaml cn" \
  "$(q --qf '[%{FILENAMES} %{FILEFLAGS:fflags}\n]' "$RPM1" | grep '^/etc/fabric-agent/agent.yaml ')"
expect_no_match "the unit has no file flags (not %config)" '^/usr/lib/systemd/system/fabric-agent\.service .' \
  "$(q --qf '[%{FILENAMES} %{FILEFLAGS:fflags}\n]' "$RPM1")"

# Modes and owners (--dump: path size mtime digest mode owner group ...).
dump=$(q --dump "$RPM1")
mode() { printf '%s\n' "$dump" | awk -v p="$1" '$1 == p { print substr($5, length($5) - 2), $6, $7 }'; }
expect_eq "binary mode" "755 root root" "$(mode /usr/bin/fabric-agent)"
expect_eq "runtime mode" "755 root root" "$(mode /usr/bin/fabric-agent-runtime)"
# Two executables: the binary and the nested-container runtime, nothing else.
expect_eq "two executables" "$(printf '%s\n' /usr/bin/fabric-agent /usr/bin/fabric-agent-runtime)" \
  "$(printf '%s\n' "$dump" | awk '$5 ~ /^0100/ && substr($5, length($5) - 2) ~ /[1357]/ { print $1 }' | sort)"
expect_eq "state dir mode" "700 root root" "$(mode /var/lib/fabric-agent)"
expect_eq "config mode" "644 root root" "$(mode /etc/fabric-agent/agent.yaml)"
expect_eq "drop-in dir mode" "755 root root" "$(mode /etc/fabric-agent/agent.yaml.d)"
expect_eq "unit mode" "644 root root" "$(mode /usr/lib/systemd/system/fabric-agent.service)"

# -qpR: rpmbuild's find-requires, one soname per NEEDED library of the
# binary, none named by hand; the packaged binary is the build tree's
# (same build id, checked by packaging:deb).
requires=$(q -R "$RPM1")
log "Requires: $(printf '%s\n' "$requires" | grep -v '^rpmlib' | tr '\n' ' ')"
for so in $(readelf -d "$build/release/build/agent/fabric-agent" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  expect_line "-qpR requires NEEDED $so" "$so()(64bit)" "$requires"
done
for so in libibverbs.so.1 libibumad.so.3 libnl-3.so.200 libnl-genl-3.so.200 libnl-route-3.so.200 libsystemd.so.0; do
  expect_line "-qpR requires $so" "$so()(64bit)" "$requires"
done
# yaml-cpp and OpenSSL are compiled in (FA_PORTABLE): no soname of theirs.
expect_no_match "-qpR: no yaml-cpp or OpenSSL soname (compiled in)" '^lib(yaml-cpp|ssl|crypto)\.so' "$requires"
# RHEL 9-class systems provide each library and symbol version required.
rhel9=$src/tests/packaging/rhel9-sonames
unmet=""
while IFS= read -r req; do
  case "$req" in
    lib*'()(64bit)') so=${req%'()(64bit)'} node="" ;;
    lib*'('*')(64bit)') so=${req%%(*} node=${req#*(} node=${node%%)*} ;;
    *) continue ;;
  esac
  provided=$(awk -v so="$so" '$1 == so { $1 = ""; print "+" $0 }' "$rhel9")
  if [ -z "$provided" ]; then
    unmet+="$req: no RHEL 9 library has this soname"$'\n'
    continue
  fi
  [ -n "$node" ] || continue
  # The family is the node up to its first digit: GLIBC_2.30 -> GLIBC_;
  # GLIBC_PRIVATE and IBVERBS_PRIVATE_33 are families of their own.
  family=${node%%[0-9]*} ok=""
  for newest in ${provided#+}; do
    [ "${newest%%[0-9]*}" = "$family" ] && [ "$family" != "$node" ] || continue
    [ "$(printf '%s\n' "${node#"$family"}" "${newest#"$family"}" | sort -V | tail -n1)" = "${newest#"$family"}" ] && ok=1
  done
  [ -n "$ok" ] || unmet+="$req: RHEL 9 provides$(printf ' %s' ${provided#+}) at newest"$'\n'
done <<<"$requires"
expect_eq "every library -qpR requires is one RHEL 9 provides ($(basename "$rhel9"))" "" "$unmet"
# What rpmbuild adds on its own besides: rpmlib features, the scriptlets'
# shell, the dynamic loader's hash style, the %config file's version.
expect_eq "-qpR names no package by hand" "" \
  "$(printf '%s\n' "$requires" | grep -Ev '^(rpmlib\(|lib[^ ]*\.so|/bin/sh$|rtld\(GNU_HASH\)$|config\(fabric-agent\) = )')"
expect_match "Suggests wireguard-go" '^wireguard-go$' "$(q --suggests "$RPM1")"
# docs/packaging.md shows -qpR without the symbol versions, with the command.
expect_eq "docs/packaging.md's rpm -qpR block is the package's" \
  "$(printf '%s\n' "$requires" | grep -v '\.so\.[0-9.]*([A-Z]')" \
  "$(awk 'f == 0 && index($0, "| grep -v ") && index($0, "rpm -qpR") { f = 1; next }
          f == 1 && /^```$/ { f = 2; next } f == 2 && /^```$/ { exit } f == 2' "$src/docs/packaging.md")"
expect_match "a description of several lines, not the summary alone" \
  'WireGuard runs in the kernel' "$(q --qf '%{DESCRIPTION}' "$RPM1")"

# --scripts: the systemd macros, written out, and the token.
scripts=$(q --scripts "$RPM1")
expect_match "%post applies the preset on first install (%systemd_post)" 'systemctl --no-reload preset fabric-agent\.service' "$scripts"
expect_match "%post creates the token" '^fa_create_token$' "$scripts"
expect_match "%preun disables and stops on erase (%systemd_preun)" 'systemctl --no-reload disable --now fabric-agent\.service' "$scripts"
expect_match "%postun restarts after upgrade (%systemd_postun_with_restart)" 'systemctl try-restart fabric-agent\.service' "$scripts"
# A macro name left in a scriptlet, even in a comment, is expanded by an
# rpmbuild that defines it (a multi-line macro would escape the comment).
expect_no_match "no '%' in scriptlets" '%' "$scripts"
expect_match "%changelog from packaging/changelog" '^\* [A-Z][a-z]{2} [A-Z][a-z]{2} [0-9]+ [0-9]{4} .* - [0-9.]+-1$' "$(q --changelog "$RPM1")"

# The payload: stripped binary, sources shipped as they are.
mkdir -p "$work/payload"
(cd "$work/payload" && rpm2cpio "$RPM1" | cpio -idm --quiet)
for f in usr/bin/fabric-agent usr/bin/fabric-agent-runtime; do
  sections=$(readelf -S -W "$work/payload/$f")
  expect_no_match "$f stripped: no symbol table" '\.symtab' "$sections"
  expect_no_match "$f stripped: no debug sections" '\.debug_' "$sections"
done
check "agent.yaml is packaging/agent.yaml" cmp -s "$src/packaging/agent.yaml" "$work/payload/etc/fabric-agent/agent.yaml"

# Install, upgrade, erase into a root.
root="$work/root"
fa_unpack_root "$root"
R() { rpm --root "$root" --dbpath /var/lib/rpm --nosignature "$@"; }
check "rpm --initdb" R --initdb
out=$(R -i --nodeps "$RPM1" 2>&1)
check "rpm -i --nodeps (release 1): $out" test $? -eq 0
expect_match "installed" '^fabric-agent-.*-1\.x86_64$' "$(R -q fabric-agent 2>&1)"
expect_eq "binary" "755 root root" "$(stat_of "$root/usr/bin/fabric-agent")"
expect_eq "state dir" "700 root root" "$(stat_of "$root/var/lib/fabric-agent")"
expect_eq "token created by %post" "600 root root" "$(stat_of "$root/var/lib/fabric-agent/token")"
check "token is 64 hex digits" grep -Eqx '[0-9a-f]{64}' "$root/var/lib/fabric-agent/token"
token=$(cat "$root/var/lib/fabric-agent/token" 2>/dev/null)
expect_eq "-qc" "/etc/fabric-agent/agent.yaml" "$(R -qc fabric-agent 2>&1)"
# The root's systemd preset enables units it does not name (Debian's).
check "%post applied the preset: unit enabled" test -L "$root/etc/systemd/system/multi-user.target.wants/fabric-agent.service"
check "rpm -V: installed files unchanged" R -V --nodeps fabric-agent

sed -i 's/^#provider_id: ""$/provider_id: "rpm-edit"/' "$root/etc/fabric-agent/agent.yaml"
out=$(R -U --nodeps "$RPM2" 2>&1)
check "rpm -U --nodeps (release 2): $out" test $? -eq 0
expect_match "upgraded" '^fabric-agent-.*-2\.x86_64$' "$(R -q fabric-agent 2>&1)"
check "upgrade keeps the edited agent.yaml" grep -qx 'provider_id: "rpm-edit"' "$root/etc/fabric-agent/agent.yaml"
check "no .rpmnew (the shipped file did not change)" test ! -e "$root/etc/fabric-agent/agent.yaml.rpmnew"
expect_eq "upgrade keeps the token" "$token" "$(cat "$root/var/lib/fabric-agent/token" 2>/dev/null)"

out=$(R -e fabric-agent 2>&1)
check "rpm -e: $out" test $? -eq 0
check "not installed after erase" sh -c "! rpm --root '$root' --dbpath /var/lib/rpm -q fabric-agent >/dev/null 2>&1"
for f in /usr/bin/fabric-agent /usr/bin/fabric-agent-runtime /usr/lib/systemd/system/fabric-agent.service /usr/share/man/man8/fabric-agent.8.gz \
  /etc/fabric-agent/agent.yaml /usr/share/doc/fabric-agent; do
  check "erase removes $f" test ! -e "$root$f"
done
check "%preun disabled the unit" test ! -L "$root/etc/systemd/system/multi-user.target.wants/fabric-agent.service"
check "erase keeps the edited config as .rpmsave" grep -qx 'provider_id: "rpm-edit"' "$root/etc/fabric-agent/agent.yaml.rpmsave"
expect_eq "erase keeps the token (RPM leaves state)" "$token" "$(cat "$root/var/lib/fabric-agent/token" 2>/dev/null)"

finish
