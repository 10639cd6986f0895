#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The two executables (docs/packaging.md, "Two executables"): the front
# bin/fabric-agent runs `mesh` and `version` itself and execs the whole agent
# (../libexec/fabric-agent/fabric-agent) for the rest.
#   front.sh FRONT WHOLE STATIC(1|0)
# Checks: the front is static (STATIC=1: no interpreter, no NEEDED) and holds
# no code of the shared libraries the whole agent loads (OpenSSL, rdma-core,
# libsystemd); it prints the same usage and version as the whole agent; a
# forwarded command gives the whole agent's output and exit status, in the
# same process (exec, not a child); its `mesh pubkey` (X25519 in a child of
# the whole agent) matches `wg pubkey`; and a front without the whole agent
# beside it says where it looked, with exit status 127.
set -euo pipefail
front=$1 whole=$2 static=$3
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
work=$(mktemp -d /tmp/fa-front.XXXXXX)
trap 'rm -rf "$work"' EXIT

# (Whole outputs in variables: grep -q on a pipe would end it early and
# pipefail would take the writer's SIGPIPE for a failure.)
if [ "$static" = 1 ]; then
  headers=$(readelf -l -W "$front")
  dynamic=$(readelf -d -W "$front")
  ! grep -q INTERP <<<"$headers" || fail "$front has a program interpreter (not static)"
  ! grep -q NEEDED <<<"$dynamic" || fail "$front needs shared libraries: $(grep NEEDED <<<"$dynamic")"
fi
syms=$(nm "$front")
shared=$(grep -E ' [TtWw] (EVP_|OPENSSL_|SSL_|ibv_|umad_|sd_notify|_ZN2fa11dl_load)' <<<"$syms" || true)
[ -z "$shared" ] || fail "$front holds code of the shared libraries (or the loader around them): $(head -3 <<<"$shared")"
syms=$(nm "$whole")
grep -q ' T EVP_PKEY_new_raw_private_key$' <<<"$syms" || fail "$whole has no OpenSSL wrappers: is it the whole agent?"

[ "$("$front" --version)" = "$("$whole" --version)" ] || fail "--version differs"
[ "$("$front" help)" = "$("$whole" help)" ] || fail "help differs"
rc=0; "$front" nosuchcommand 2>"$work/e1" || rc=$?
[ "$rc" = 2 ] && grep -q "unknown command 'nosuchcommand'" "$work/e1" || fail "unknown command: rc $rc, $(cat "$work/e1")"

# A forwarded command: the whole agent's answer, status and pid.
a=$("$front" inspect --help 2>&1) || true
b=$("$whole" inspect --help 2>&1) || true
[ -n "$a" ] && [ "$a" = "$b" ] || fail "inspect --help through the front: '$a', whole agent: '$b'"
rc=0; "$front" inspect --no-such-flag >/dev/null 2>&1 || rc=$?
rc2=0; "$whole" inspect --no-such-flag >/dev/null 2>&1 || rc2=$?
[ "$rc" = "$rc2" ] && [ "$rc" != 0 ] || fail "exit status through the front $rc, whole agent $rc2"
# The whole agent's daemon, started through the front, is the same process:
# a shell's $! is the pid the front had, and its exe is the whole agent.
cat >"$work/agent.yaml" <<YAML
listen: 127.0.0.1:0
token_file: $work/token
state_dir: $work/state
YAML
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
"$front" run --config "$work/agent.yaml" >/dev/null 2>&1 &
pid=$!
exe=
for _ in $(seq 100); do
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  [ "$exe" != "$(readlink -f "$whole")" ] || break
  sleep 0.02
done
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
[ "$exe" = "$(readlink -f "$whole")" ] || fail "pid $pid of '$front run' runs '$exe', not the whole agent $(readlink -f "$whole")"

if command -v wg >/dev/null; then
  k=$(wg genkey)
  [ "$(echo "$k" | "$front" mesh pubkey)" = "$(echo "$k" | wg pubkey)" ] || fail "mesh pubkey through the front != wg pubkey"
fi

# Alone, the front names the path it looked for.
mkdir -p "$work/p/bin"
cp "$front" "$work/p/bin/fabric-agent"
rc=0; "$work/p/bin/fabric-agent" inspect >/dev/null 2>"$work/e2" || rc=$?
[ "$rc" = 127 ] && grep -qF "cannot run the agent at $work/p/libexec/fabric-agent/fabric-agent: No such file or directory" "$work/e2" ||
  fail "front without the whole agent: rc $rc, $(cat "$work/e2")"
rc=0; echo "$(wg genkey 2>/dev/null || echo AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=)" |
  "$work/p/bin/fabric-agent" mesh pubkey >/dev/null 2>"$work/e3" || rc=$?
[ "$rc" = 1 ] && grep -qF "$work/p/libexec/fabric-agent/fabric-agent" "$work/e3" ||
  fail "mesh pubkey without the whole agent: rc $rc, $(cat "$work/e3")"
"$work/p/bin/fabric-agent" --version >/dev/null || fail "--version needs the whole agent"

[ "$fails" = 0 ] || exit 1
echo "ok: $front is a front of $whole"
