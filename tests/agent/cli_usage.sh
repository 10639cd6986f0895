#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every command the man page names answers --help (and -h) with its usage on
# stdout and exit 0, as the page says, and an unknown option with one line
# naming it and exit 2 (the page's EXIT STATUS for a usage error).
#   cli_usage.sh FABRIC-AGENT MAN-PAGE
set -euo pipefail
# A command that ignored --help would go on to run (the daemon, a probe):
# each gets 20 s.
bin=$1 man=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The commands of the man page's COMMANDS section: each synopsis line
# `.B fabric\-agent WORD... [\-\-option ...]`, up to its first option.
mapfile -t cmds < <(sed -n '/^\.SH COMMANDS/,/^\.SH /p' "$man" |
  sed -n 's/^\.B fabric\\-agent \([a-z].*\)$/\1/p' | sed 's/\\-/-/g; s/ --.*//' | sort -u)
[ "${#cmds[@]}" -ge 10 ] || { echo "FAIL: only ${#cmds[@]} commands read from $man: ${cmds[*]}"; exit 1; }

for c in "${cmds[@]}"; do
  read -ra words <<<"$c"
  for h in --help -h; do
    rc=0
    timeout -k 1 20 "$bin" "${words[@]}" "$h" >"$tmp/out" 2>"$tmp/err" </dev/null || rc=$?
    [ "$rc" -eq 0 ] || bad "'fabric-agent $c $h' exited $rc: $(head -n 2 "$tmp/err")"
    grep -q '^usage: ' "$tmp/out" || bad "'fabric-agent $c $h' printed no usage on stdout: $(head -c 200 "$tmp/out")"
  done
  rc=0
  timeout -k 1 20 "$bin" "${words[@]}" --no-such-option >"$tmp/out" 2>"$tmp/err" </dev/null || rc=$?
  [ "$rc" -eq 2 ] || bad "'fabric-agent $c --no-such-option' exited $rc, not 2: $(head -n 2 "$tmp/err")"
  grep -q -- "--no-such-option" "$tmp/err" || bad "'fabric-agent $c --no-such-option': stderr does not name the option: $(head -n 2 "$tmp/err")"
done
# A value that is no number is a usage error too (the probe said 1 for it).
for c in "probe rdma serve --port x" "probe rdma run --peer 127.0.0.1 --duration x" "probe rdma run"; do
  read -ra words <<<"$c"
  rc=0
  timeout -k 1 20 "$bin" "${words[@]}" >/dev/null 2>"$tmp/err" </dev/null || rc=$?
  [ "$rc" -eq 2 ] || bad "'fabric-agent $c' exited $rc, not 2: $(head -n 2 "$tmp/err")"
done
[ "$fails" -eq 0 ] || exit 1
echo "cli usage: ${#cmds[@]} commands (${cmds[*]}): --help, -h, an unknown option"
