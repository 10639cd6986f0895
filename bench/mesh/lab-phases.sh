#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Where a 250-peer push spends its time on kernel WireGuard, `mesh apply`
# against `wg setconf`, one process at a time: in the lab VM (docs/lab.md),
# each run under `perf record` of its system calls and page faults, then
# split here into three phases: from exec to the first WG_CMD_SET_DEVICE
# message, the messages (the kernel's own work: the X25519 of every new
# peer), and from the last message to exit_group. The VM runs under TCG:
# only the comparison between the two tools means much (docs/overlay.md,
# "Results"). ASLR is off in the VM unless ASLR=1.
#
#   bench/mesh/lab-phases.sh [FABRIC_AGENT_BINARY]      (root; needs linux-perf)
#   RUNS=9 (per tool), ASLR=1 (leave it on in the VM), KEEP=1 (keep the lab run folder)
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
AGENT=$(readlink -f "${1:-$SRC/build/agent/fabric-agent}")
RUNS=${RUNS:-9}
command -v perf >/dev/null || { echo "lab-phases: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
DIR=$(mktemp -d /tmp/fa-bench-phases.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

# mesh_files: empty.json, m250.json
# shellcheck source=bench/mesh/peers.sh
. "$SRC/bench/mesh/peers.sh"
mesh_files "$DIR"

cat >"$DIR/phases.sh" <<EOF
. "\$LAB/lib.sh"
set +e
cd /tmp
cp "\$LAB_FILES"/*.json /tmp/
[ "${ASLR:-0}" = 1 ] || echo 0 >/proc/sys/kernel/randomize_va_space
A="fabric-agent mesh apply --overlay-cidr 10.64.0.0/16 --file"
\$A /tmp/empty.json >/dev/null 2>&1
key=\$(wg showconf wgb | awk '/^PrivateKey/ {print \$3}')
printf '[Interface]\nPrivateKey = %s\nListenPort = 51820\n' "\$key" >w0.conf
{ cat w0.conf; jq -r '.peers[] | "\n[Peer]\nPublicKey = \(.public_key)\nEndpoint = \(.endpoint)\nAllowedIPs = \(.allowed_ips|join(","))"' /tmp/m250.json; } >w250.conf
for i in 1 2 3; do  # warm the page cache (and, without ASLR, the translations)
  wg setconf wgb w0.conf; \$A /tmp/m250.json >/dev/null 2>&1; wg setconf wgb w0.conf; wg setconf wgb w250.conf
done
EV="-e raw_syscalls:sys_enter -e raw_syscalls:sys_exit -e exceptions:page_fault_user"
for i in \$(seq $RUNS); do
  wg setconf wgb w0.conf
  perf record -q \$EV -o /tmp/a.data -- \$A /tmp/m250.json >/dev/null 2>&1
  perf script -i /tmp/a.data -F comm,pid,time,event,trace >"\$LAB_OUT/agent.\$i" 2>/dev/null
  wg setconf wgb w0.conf
  perf record -q \$EV -o /tmp/w.data -- wg setconf wgb w250.conf >/dev/null 2>&1
  perf script -i /tmp/w.data -F comm,pid,time,event,trace >"\$LAB_OUT/wg.\$i" 2>/dev/null
done
EOF

FA_LAB_EXTRA_BINS=perf "$SRC/tests/lab/run" --keep --binary "$AGENT" --file "$DIR/empty.json" --file "$DIR/m250.json" \
  "$DIR/phases.sh" 2>&1 | tee "$DIR/lab.log" | grep -E '^lab: scenario' || true
OUT=$(sed -n 's/^lab: run folder kept: //p' "$DIR/lab.log" | tail -n 1)
if [ -z "$OUT" ] || [ ! -d "$OUT/share/out" ]; then
  echo "lab-phases: the lab run failed:" >&2
  tail -20 "$DIR/lab.log" >&2
  exit 1
fi

python3 - "$OUT/share/out" "$RUNS" <<'PY'
import re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
SEND = {44, 46}  # sendto (wg), sendmsg (fabric-agent)

def phases(path):
    """exec..first set message, the messages, last message..exit_group (ms), faults before/after."""
    t0 = None; enter = None; sends = []; faults = [0, 0]; end = None
    for line in open(path):
        m = re.match(r'\s*\S+\s+\d+\s+([\d.]+):\s+(\S+):\s+(.*)', line)
        if not m: continue
        t, ev, rest = float(m.group(1)), m.group(2), m.group(3)
        if t0 is None: t0 = t
        if ev.endswith('page_fault_user'):
            faults[1 if sends else 0] += 1
        elif ev.endswith('sys_enter'):
            nr = int(rest.split()[1]); enter = (t, nr)
            if nr == 231: end = t  # exit_group
        elif ev.endswith('sys_exit') and enter:
            # A set message is a send the kernel takes > 2 ms over (the
            # X25519 of its peers); requests and acks are far shorter.
            if enter[1] in SEND and t - enter[0] > 0.002: sends.append((enter[0], t))
            enter = None
    if not sends or end is None: return None
    return ((sends[0][0] - t0) * 1e3, sum(b - a for a, b in sends) * 1e3, len(sends),
            (end - sends[-1][1]) * 1e3, (end - t0) * 1e3, faults[0], faults[1])

rows = {}
for tool in ('agent', 'wg'):
    rows[tool] = [p for p in (phases(f'{out}/{tool}.{i}') for i in range(1, runs + 1)) if p]
print(f'250 new peers on kernel WireGuard, {runs} runs each (medians, ms; TCG):')
print(f'{"":14}{"exec->first msg":>16}{"messages":>10}{"n":>4}{"last msg->exit":>16}{"total":>9}{"faults":>8}')
for tool, name in (('agent', 'mesh apply'), ('wg', 'wg setconf')):
    r = rows[tool]
    if not r: print(f'{name:14} no complete run'); continue
    med = [statistics.median(c) for c in zip(*r)]
    print(f'{name:14}{med[0]:16.2f}{med[1]:10.2f}{med[2]:4.0f}{med[3]:16.2f}{med[4]:9.2f}{med[5] + med[6]:8.0f}')
PY
if [ -n "${KEEP:-}" ]; then echo "kept: $OUT"; else rm -rf "$OUT"; fi
