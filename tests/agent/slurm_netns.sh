#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `fabric-agent slurm` against Debian's own Slurm 22.05: what it writes is
# loaded by a real slurmctld, and Slurm then never puts a job on two fabrics.
#
# Five machines, each a network namespace with its own host name (UTS
# namespace) on one bridge: n1 and n2 on RoCE fabric p1, n3 and n4 on RoCE
# fabric p2 (fixture b-roce with two provider ids), n5 without RDMA (fixture
# d-none). On each, a real agent (`fabric-agent run` on its fixture) answers
# GET /v1/status; on n1..n4, slurmd in the same network and UTS namespaces.
# slurmctld, munged and the operator's commands run in a sixth namespace
# (ctl). The steps:
#   1. under the operator's previous topology.conf (one switch of all nodes)
#      a 3-node job runs across both fabrics: the check below can fail;
#   2. `fabric-agent slurm` refuses a set with n5 (no fabric) and an agent
#      that does not answer, naming each and the field, and writes nothing;
#   3. on n1..n4 it writes topology.conf and features.sh; the topology is
#      loaded (`scontrol reconfigure`) and `scontrol show topology` shows one
#      switch per fabric and none above; features.sh gives each node its
#      fabric feature and keeps n4's own (gpu_l40s), dropping its stale fab_old;
#   4. a 3-node job, with or without --constraint='[A|B]', is refused or
#      left pending, never run; with n1 taken, `srun -N2 --constraint='[A|B]'
#      hostname` runs on n3 and n4 (fabric p2), not on n2 + one of p2, and
#      so does an sbatch job.
# All traffic stays in the namespaces made here; every process started here
# is stopped and every namespace removed on exit. It fails (never skips) when
# Slurm or munge is not installed (scripts/deps.sh --test installs them).
#
#   tests/agent/slurm_netns.sh path/to/fabric-agent tests/fixtures
set -euo pipefail

BIN=$(readlink -f "${1:?usage: slurm_netns.sh path/to/fabric-agent fixtures-dir}")
FIX=$(readlink -f "${2:?fixtures dir}")
T0=$(date +%s%N)
TAG="fasl$$"
WORK=$(mktemp -d /tmp/fa-slurm-XXXXXX)
chmod 755 "$WORK"   # slurmd and munged check the directories above their files
NODES=(n1 n2 n3 n4 n5)
declare -A IP=([ctl]=198.18.0.10 [n1]=198.18.0.11 [n2]=198.18.0.12 [n3]=198.18.0.13 [n4]=198.18.0.14 [n5]=198.18.0.15)
declare -A PROVIDER=([n1]=p1 [n2]=p1 [n3]=p2 [n4]=p2 [n5]=p1)
declare -A AGENT_PID
PIDS=()

say() { echo "slurm: $(( ($(date +%s%N) - T0) / 1000000 )) ms: $*"; }
fail() {
  echo "slurm: FAIL: $*" >&2
  for f in "$WORK"/ctl/slurmctld.log "$WORK"/n*/slurmd.log "$WORK"/n*/agent.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 8 "$f" >&2; }
  done
  exit 1
}
cleanup() {
  set +e
  # Everything in the namespaces is this test's: the agents, slurmctld,
  # slurmd, and the slurmstepd of any job still running (it ignores SIGTERM
  # and outlives its slurmd).
  {
    for n in ctl "${NODES[@]}"; do
      for p in $(ip netns pids "$TAG-$n"); do kill -9 "$p"; done
    done
    for p in "${PIDS[@]}"; do kill "$p"; done
    for p in "${PIDS[@]}"; do wait "$p"; done
  } 2>/dev/null   # bash's "Killed" line for each
  for n in ctl "${NODES[@]}" hub; do ip netns del "$TAG-$n" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

for tool in munged slurmctld slurmd scontrol sbatch srun squeue sinfo scancel nsenter unshare python3; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/deps.sh --test installs slurmctld, slurmd, slurm-client, munge)"
done

# ---- the network: one bridge, a namespace per machine ------------------------
ip netns add "$TAG-hub"
ip -n "$TAG-hub" link add br0 type bridge
ip -n "$TAG-hub" link set br0 up
for n in ctl "${NODES[@]}"; do
  ip netns add "$TAG-$n"
  ip -n "$TAG-hub" link add "v$n" type veth peer name eth0 netns "$TAG-$n"
  ip -n "$TAG-hub" link set "v$n" master br0 up
  ip -n "$TAG-$n" addr add "${IP[$n]}/24" dev eth0
  ip -n "$TAG-$n" link set eth0 up
  ip -n "$TAG-$n" link set lo up
done
# Fixture b's netdevs on n1..n4: the internet card with the default route and
# three fabric cards (as tests/agent/cluster_refusals.sh makes them).
for n in n1 n2 n3 n4; do
  k=0
  for spec in enp1s0f0np0=198.51.100.20/24 ens3np0=10.20.0.11/16 ens4np0=10.20.0.12/16 ens5np0=10.20.0.13/16; do
    ifn=${spec%%=*}
    if ! ip -n "$TAG-$n" link add "$ifn" type dummy 2>/dev/null; then
      ip -n "$TAG-$n" link add "$ifn" type veth peer name "fapeer$k"
      ip -n "$TAG-$n" link set "fapeer$k" up
      k=$((k + 1))
    fi
    ip -n "$TAG-$n" addr add "${spec#*=}" dev "$ifn"
    ip -n "$TAG-$n" link set "$ifn" up
  done
  ip -n "$TAG-$n" route add default via 198.51.100.1 dev enp1s0f0np0
done

# ---- the agents -------------------------------------------------------------
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/token"
chmod 600 "$WORK/token"
for n in "${NODES[@]}"; do
  d="$WORK/$n"
  mkdir -p "$d/spool"
  root="$FIX/b-roce"
  [ "$n" = n5 ] && root="$FIX/d-none"
  cat >"$d/agent.yaml" <<EOF
# Plain HTTP on the namespace's address, on purpose: the network is this test's.
listen: ${IP[$n]}:7471
allow_plain_http_on_non_loopback: true
state_dir: $d/state
token_file: $WORK/token
sysfs_root: $root
provider_id: "${PROVIDER[$n]}"
pods:
  socket: $d/pods.sock
  cdi_dir: $d/cdi
overlay:
  interface: fsl$n
  backend: userspace
  public_address: ${IP[$n]}
refresh_interval: 1h
EOF
  # Its own UTS namespace, named as the machine; $! is the agent (ip netns
  # exec, unshare and sh each exec the next).
  ip netns exec "$TAG-$n" unshare --uts sh -c 'hostname "$1" && exec "$2" run --config "$3"' sh "$n" "$BIN" \
    "$d/agent.yaml" >>"$d/agent.log" 2>&1 &
  AGENT_PID[$n]=$!
  PIDS+=($!)
done
for n in "${NODES[@]}"; do
  for _ in $(seq 1 200); do
    grep -q 'ready (generation' "$WORK/$n/agent.log" && continue 2
    sleep 0.05
  done
  fail "agent $n not ready"
done
say "5 agents ready"

# ---- munge, slurmctld, slurmd -----------------------------------------------
mkdir -m 711 "$WORK/munge"
head -c 1024 /dev/urandom >"$WORK/munge/key"
chmod 600 "$WORK/munge/key"
munged -F --force --socket="$WORK/munge/sock" --key-file="$WORK/munge/key" --log-file="$WORK/munge/log" \
  --pid-file="$WORK/munge/pid" --seed-file="$WORK/munge/seed" 2>>"$WORK/munge/err" &
PIDS+=($!)
mkdir -p "$WORK/etc" "$WORK/ctl/state"
export SLURM_CONF="$WORK/etc/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=fa
SlurmctldHost=ctl(${IP[ctl]})
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/sock
CredType=cred/munge
StateSaveLocation=$WORK/ctl/state
SlurmctldPidFile=$WORK/ctl/slurmctld.pid
SlurmctldLogFile=$WORK/ctl/slurmctld.log
SlurmdSpoolDir=$WORK/%n/spool
SlurmdPidFile=$WORK/%n/slurmd.pid
SlurmdLogFile=$WORK/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/linear
SchedulerType=sched/builtin
ReturnToService=2
TopologyPlugin=topology/tree
NodeName=n[1-3] NodeAddr=${IP[n1]},${IP[n2]},${IP[n3]} CPUs=1 State=UNKNOWN
NodeName=n4 NodeAddr=${IP[n4]} CPUs=1 Features=gpu_l40s,fab_old State=UNKNOWN
PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
# The operator's topology before: one switch over every node.
echo "SwitchName=all Nodes=n[1-4]" >"$WORK/etc/topology.conf"
for _ in $(seq 1 100); do [ -S "$WORK/munge/sock" ] && break; sleep 0.05; done
[ -S "$WORK/munge/sock" ] || fail "munged did not start: $(cat "$WORK/munge/err")"

# nsenter, not `ip netns exec`: that remounts /sys for the namespace, which
# hides /sys/fs/cgroup, and slurmd 22.05 does not start without it.
ctl() { nsenter --net="/run/netns/$TAG-ctl" "$@"; }
nsenter --net="/run/netns/$TAG-ctl" unshare --uts sh -c 'hostname ctl && exec slurmctld -D -f "$1"' sh "$SLURM_CONF" \
  >"$WORK/ctl/out" 2>&1 &
PIDS+=($!)
for n in n1 n2 n3 n4; do
  # In the agent's own network and UTS namespaces: the machine's slurmd.
  nsenter --net="/run/netns/$TAG-$n" --uts="/proc/${AGENT_PID[$n]}/ns/uts" slurmd -D -f "$SLURM_CONF" \
    >"$WORK/$n/slurmd.out" 2>&1 &
  PIDS+=($!)
done
idle=0
for _ in $(seq 1 300); do
  idle=$(ctl sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l) || idle=0
  [ "$idle" = 4 ] && break
  sleep 0.1
done
[ "$idle" = 4 ] || fail "slurm: $idle of 4 nodes idle: $(ctl sinfo -N 2>&1)"
say "slurmctld and 4 slurmd up, nodes idle"

# The node list of a job, one name a line.
nodes_of() { ctl scontrol show hostnames "$(ctl squeue -h -j "$1" -o %N)"; }
state_of() { ctl squeue -h -j "$1" -o %T; }
wait_state() {  # JOB STATE: up to 10 s
  for _ in $(seq 1 100); do [ "$(state_of "$1")" = "$2" ] && return 0; sleep 0.1; done
  fail "job $1 is $(state_of "$1"), not $2: $(ctl squeue -j "$1" -o '%i %T %N %r' 2>&1)"
}
# submit ARGS...: the job id in $job, or "" when sbatch refused it ($why says why).
submit() {
  local out
  job="" why=""
  if out=$(ctl sbatch --parsable -o /dev/null "$@" --wrap 'sleep 300' 2>&1); then job=${out%%;*}; else why=$out; fi
}
# never_runs ARGS...: refused at submission, or pending for 3 s while every node is idle.
never_runs() {
  submit "$@"
  if [ -z "$job" ]; then
    grep -q "Requested node configuration is not available" <<<"$why" || fail "sbatch $*: $why"
    say "sbatch $*: refused ($why)"
    return
  fi
  sleep 3
  local st
  st=$(state_of "$job")
  [ "$st" = PENDING ] || fail "sbatch $*: job $job is $st on $(nodes_of "$job" | tr '\n' ' '), across fabrics"
  say "sbatch $*: job $job pending ($(ctl squeue -h -j "$job" -o %r))"
  ctl scancel "$job"
}
wait_idle() {
  for _ in $(seq 1 100); do
    [ "$(ctl sinfo -h -N -t idle -o %N | sort -u | wc -l)" = 4 ] && return 0
    sleep 0.1
  done
  fail "nodes not idle again: $(ctl sinfo -N 2>&1)"
}

# ---- 1. the old topology lets a job span both fabrics -------------------------
submit -N3
[ -n "$job" ] || fail "under one switch of all nodes, sbatch -N3 was refused: $why"
wait_state "$job" RUNNING
[ "$(nodes_of "$job" | wc -l)" = 3 ] || fail "job $job: $(nodes_of "$job")"
say "one switch of all nodes: a 3-node job runs on $(nodes_of "$job" | tr '\n' ' ')(across the fabrics)"
ctl scancel "$job"
wait_idle

# ---- 2. refusals ------------------------------------------------------------
agents=()
for n in n1 n2 n3 n4; do agents+=(--agent "http://${IP[$n]}:7471"); done
rc=0
ctl "$BIN" slurm "${agents[@]}" --agent "http://${IP[n5]}:7471" --agent "http://${IP[ctl]}:7479" \
  --token-file "$WORK/token" --output "$WORK/refused" >"$WORK/refused.out" 2>"$WORK/refused.err" || rc=$?
[ "$rc" = 1 ] || fail "a set with a fabric-less agent: exit $rc, not 1: $(cat "$WORK/refused.err")"
for needle in "http://${IP[n5]}:7471: inspect.fabric.kind is \"none\"" \
  "http://${IP[ctl]}:7479: GET /v1/status failed: connect: Connection refused" "2 problem(s) with 6 agent(s); nothing written"; do
  grep -qF -- "$needle" "$WORK/refused.err" || fail "missing '$needle' in: $(cat "$WORK/refused.err")"
done
[ ! -e "$WORK/refused" ] || fail "a refused set still wrote $(ls "$WORK/refused")"
say "refused: $(tr "\n" ";" <"$WORK/refused.err")"

# ---- 3. the configuration, loaded -------------------------------------------
ctl "$BIN" slurm "${agents[@]}" --token-file "$WORK/token" --output "$WORK/out" --json >"$WORK/plan.json" ||
  fail "fabric-agent slurm failed"
read -r FA FB < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
f = {x["id"]: x for x in d["fabrics"]}
a, b = f["roce:p1:10.20.0.0/16"], f["roce:p2:10.20.0.0/16"]
assert a["nodes"] == ["n1", "n2"] and b["nodes"] == ["n3", "n4"], d
print(a["name"], b["name"])' "$WORK/plan.json") || fail "plan: $(cat "$WORK/plan.json")"
# The names docs/slurm.md gives for these ids (fab_roce_<provider>_<sha256[:8]>).
[ "$FA $FB" = "fab_roce_p1_548dbfed fab_roce_p2_cf5415d8" ] || fail "fabric names $FA $FB, not as documented"
ctl "$BIN" slurm "${agents[@]}" --token-file "$WORK/token" --output "$WORK/out" >"$WORK/summary" ||
  fail "fabric-agent slurm (summary) failed"
grep -qx "$FA  roce:p1:10.20.0.0/16  2 node(s): n1 n2" "$WORK/summary" || fail "summary: $(cat "$WORK/summary")"
cp "$WORK/out/topology.conf" "$WORK/etc/topology.conf"
ctl scontrol reconfigure || fail "scontrol reconfigure"
topo=$(ctl scontrol show topology)
[ "$(grep -c '^SwitchName=' <<<"$topo")" = 2 ] || fail "scontrol show topology: not 2 switches: $topo"
# switch_nodes NAME: the nodes of a level-0 switch as scontrol shows it, one a line.
switch_nodes() {
  local l
  l=$(grep "^SwitchName=$1 Level=0 " <<<"$topo") || fail "no level-0 switch $1: $topo"
  ctl scontrol show hostnames "$(sed -n 's/.* Nodes=\([^ ]*\).*/\1/p' <<<"$l")"
}
[ "$(switch_nodes "$FA" | tr '\n' ' ')" = "n1 n2 " ] || fail "switch $FA is not over n1 n2: $topo"
[ "$(switch_nodes "$FB" | tr '\n' ' ')" = "n3 n4 " ] || fail "switch $FB is not over n3 n4: $topo"
grep -q "Switches=" <<<"$topo" && fail "a switch above the fabrics: $topo"
say "scontrol show topology: $(tr '\n' ';' <<<"$topo")"
ctl sh "$WORK/out/features.sh" >"$WORK/features.out" 2>&1 || fail "features.sh: $(cat "$WORK/features.out")"
feats=$(ctl sinfo -h -N -o '%N %f %b' | sort -u)
expect=$(printf '%s\n' "n1 $FA $FA" "n2 $FA $FA" "n3 $FB $FB" "n4 gpu_l40s,$FB gpu_l40s,$FB")
[ "$feats" = "$expect" ] || fail "features (node, available, active): $feats, expected $expect"
say "features: $(tr '\n' ';' <<<"$feats")"

# ---- 4. jobs ----------------------------------------------------------------
never_runs -N3
never_runs -N3 --constraint="[$FA|$FB]"
wait_idle
submit -N1 -w n1
[ -n "$job" ] || fail "sbatch -w n1: $why"
hold=$job
wait_state "$hold" RUNNING
ran=$(ctl timeout 30 srun -N2 --constraint="[$FA|$FB]" hostname 2>"$WORK/srun.err" | sort | tr '\n' ' ') ||
  fail "srun: $(cat "$WORK/srun.err")"
[ "$ran" = "n3 n4 " ] || fail "srun -N2 --constraint=[$FA|$FB] hostname ran on: $ran (n1 was taken: expected n3 n4)"
say "n1 taken: srun -N2 --constraint='[$FA|$FB]' hostname ran on $ran"
submit -N2 --constraint="[$FA|$FB]"
[ -n "$job" ] || fail "sbatch -N2 --constraint: $why"
wait_state "$job" RUNNING
on=$(nodes_of "$job" | tr '\n' ' ')
[ "$on" = "n3 n4 " ] || fail "sbatch -N2 --constraint=[$FA|$FB] runs on: $on (expected n3 n4)"
say "n1 taken: sbatch -N2 --constraint='[$FA|$FB]' runs on $on"
ctl scancel "$job" "$hold"
echo "slurm: ok ($(( ($(date +%s%N) - T0) / 1000000 )) ms)"
