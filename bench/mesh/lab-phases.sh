#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Where a 250-peer push spends its time on kernel WireGuard, `mesh apply`
# against `wg setconf`: in the lab VM (docs/lab.md), under `perf`. The VM
# runs under TCG and tracing costs per event, so these phases say where each
# tool's time goes, not which tool is faster: compare with lab-ab.sh or
# run.sh --lab (docs/overlay.md, "Benchmark"). ASLR is off in the VM unless
# ASLR=1.
#
# TRACE=process (default): each run under `perf record` of its own system
# calls and page faults, split into three phases: from exec to the first
# WG_CMD_SET_DEVICE message, the messages (the kernel's own work: the
# X25519 of every new peer), and from the last message to exit_group; and
# the page faults.
# TRACE=system: the same runs traced system-wide but lightly (the
# scheduler's fork, exec, exit and switch events and nine system calls,
# through a tracepoint filter: a full system-wide trace keeps perf busy on
# the second vCPU, where the agent's kernel-read thread would otherwise
# run), split from the shell's fork to the shell's wait.
#
#   bench/mesh/lab-phases.sh [FABRIC_AGENT_BINARY]      (root; needs linux-perf)
#   RUNS=9 (per tool), TRACE=system, ASLR=1 (leave it on in the VM), KEEP=1 (keep the lab run folder)
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
AGENT=$(readlink -f "${1:-$SRC/build/agent/fabric-agent}")
RUNS=${RUNS:-9}
TRACE=${TRACE:-process}
case $TRACE in process | system) ;; *)
  echo "lab-phases: TRACE=$TRACE: expected process or system" >&2
  exit 2
  ;;
esac
command -v perf >/dev/null || { echo "lab-phases: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
DIR=$(mktemp -d /tmp/fa-bench-phases.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

# mesh_files: empty.json, m250.json
# shellcheck source=bench/mesh/peers.sh
. "$SRC/bench/mesh/peers.sh"
mesh_files "$DIR"

# TRACE=system: the pushes, under one system-wide perf record (inside the
# VM, RUNS from the environment).
cat >"$DIR/loop.sh" <<'EOF'
for i in $(seq "$RUNS"); do
  wg setconf wgb /tmp/w0.conf
  fabric-agent mesh apply --overlay-cidr 10.64.0.0/16 --file /tmp/m250.json >/tmp/o.txt 2>/dev/null
  wg setconf wgb /tmp/w0.conf
  wg setconf wgb /tmp/w250.conf >/tmp/o.txt 2>/dev/null
done
EOF

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
if [ "$TRACE" = system ]; then
  # sendto sendmsg recvmsg clone3 exit_group wait4 futex openat socket
  F='id==44||id==46||id==47||id==435||id==231||id==61||id==202||id==257||id==41'
  perf record -q -a -e sched:sched_process_fork -e sched:sched_process_exec -e sched:sched_process_exit \\
    -e sched:sched_switch -e raw_syscalls:sys_enter --filter "\$F" -e raw_syscalls:sys_exit --filter "\$F" \\
    -o /tmp/all.data -- env RUNS=$RUNS bash \$LAB_FILES/loop.sh >/dev/null 2>&1
  perf script -i /tmp/all.data -F comm,pid,tid,cpu,time,event,trace >"\$LAB_OUT/all" 2>/dev/null
  exit 0
fi
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
  --file "$DIR/loop.sh" "$DIR/phases.sh" 2>&1 | tee "$DIR/lab.log" | grep -E '^lab: scenario' || true
OUT=$(sed -n 's/^lab: run folder kept: //p' "$DIR/lab.log" | tail -n 1)
if [ -z "$OUT" ] || [ ! -d "$OUT/share/out" ]; then
  echo "lab-phases: the lab run failed:" >&2
  tail -20 "$DIR/lab.log" >&2
  exit 1
fi

python3 - "$OUT/share/out" "$RUNS" "$TRACE" <<'PY'
import re, statistics, sys
out, runs, trace = sys.argv[1], int(sys.argv[2]), sys.argv[3]
SEND = {44, 46}  # sendto (wg), sendmsg (fabric-agent)


def system():
    """TRACE=system: each push from the shell's fork to its wait4."""
    procs, forked, pend = {}, {}, {}
    for line in open(f'{out}/all'):
        m = re.match(r'\s*.+?\s+(\d+)/(\d+)\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)', line)
        if not m: continue
        pid, tid, t, ev, rest = int(m.group(1)), int(m.group(2)), float(m.group(3)) * 1e3, m.group(4), m.group(5)
        if ev == 'sched:sched_process_fork':
            forked[int(re.search(r'child_pid=(\d+)', rest).group(1))] = t
        elif ev == 'sched:sched_process_exec':
            tool = {'/usr/bin/fabric-agent': 'agent', '/usr/bin/wg': 'wg'}.get(re.search(r'filename=(\S+)', rest).group(1))
            if tool and pid in forked: procs[pid] = {'tool': tool, 'fork': forked[pid], 'exec': t, 'sends': []}
        elif ev == 'raw_syscalls:sys_enter':
            nr = int(re.search(r'NR (-?\d+)', rest).group(1)); pend[tid] = (t, nr)
            if nr == 231 and pid in procs: procs[pid]['exit_group'] = t
        elif ev == 'raw_syscalls:sys_exit':
            nr = int(re.search(r'NR (-?\d+)', rest).group(1)); t0, _ = pend.pop(tid, (t, nr))
            if pid in procs and nr in SEND and t - t0 > 2: procs[pid]['sends'].append((t0, t))
            if nr == 61:  # wait4: the shell reaps its child
                r = int(re.search(r'= (-?\d+)', rest).group(1))
                if r in procs: procs[r]['reaped'] = t
        elif ev == 'sched:sched_process_exit' and pid == tid and pid in procs:
            procs[pid]['exit'] = t
    rows = {'agent': [], 'wg': []}
    for p in procs.values():
        # A push: its requests take the kernel > 40 ms (250 X25519s, ~75 ms);
        # `wg setconf` of the key alone, between the pushes, takes ~12.
        if sum(b - a for a, b in p['sends']) < 40 or not all(k in p for k in ('exit_group', 'exit', 'reaped')):
            continue
        s0, s1 = p['sends'][0][0], p['sends'][-1][1]
        rows[p['tool']].append((p['exec'] - p['fork'], s0 - p['exec'], s1 - s0, len(p['sends']), p['exit_group'] - s1,
                                p['exit'] - p['exit_group'], p['reaped'] - p['exit'], p['reaped'] - p['fork']))
    print(f'250 new peers on kernel WireGuard, {runs} runs each, traced system-wide (medians, ms; TCG):')
    print(f'{"":12}{"fork->exec":>11}{"exec->1st msg":>14}{"messages":>9}{"n":>3}{"->exit_group":>13}'
          f'{"->exit":>8}{"->reaped":>9}{"total":>8}')
    for tool, name in (('agent', 'mesh apply'), ('wg', 'wg setconf')):
        r = rows[tool]
        if not r: print(f'{name:12} no complete run'); continue
        m = [statistics.median(c) for c in zip(*r)]
        print(f'{name:12}{m[0]:11.2f}{m[1]:14.2f}{m[2]:9.2f}{m[3]:3.0f}{m[4]:13.2f}{m[5]:8.2f}{m[6]:9.2f}{m[7]:8.2f}')


if trace == 'system':
    system()
    sys.exit(0)

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
