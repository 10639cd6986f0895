#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fabric-agent's subnet-manager path against a real subnet manager, without
# hardware: ibsim simulates the switches and HCAs of a topology, OpenSM
# (the SM every Linux fabric runs) sweeps it, assigns LIDs and answers SMInfo
# and SA queries, and libumad2sim.so (LD_PRELOAD, SIM_HOST=<node>) attaches
# each process to one simulated node, as its HCA would. infiniband-diags'
# sminfo and saquery are the reference readings.
#
#   ibsim_fabric.sh BINARY fabrics    hosts of one fabric share an id that names
#                                     its SMs; a second ibsim fabric differs
#   ibsim_fabric.sh BINARY failover   two OpenSMs; the master is killed, the
#                                     standby takes over: every id is unchanged
#
# Each simulated fabric runs inside its own network namespace (ibsim and its
# clients talk over abstract unix sockets, which a namespace confines); no
# packet leaves the machine. libumad2sim presents a sysfs tree of its own
# (node, port, LIDs, GID 0) that lacks what the kernel adds (link_layer, GID
# types); the test completes a copy of it for --sysfs-root, the product reads
# it as it reads /sys.
set -euo pipefail

BIN=$(readlink -f "${1:?usage: ibsim_fabric.sh path/to/fabric-agent fabrics|failover}")
SCENARIO=${2:?scenario: fabrics or failover}
UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
for t in ibsim opensm sminfo saquery python3 ip; do
  command -v "$t" >/dev/null || { echo "ibsim: FAIL: $t is missing (scripts/deps.sh --test installs it)" >&2; exit 1; }
done
[ -e "$UMAD2SIM" ] || { echo "ibsim: FAIL: $UMAD2SIM is missing (package libumad2sim0)" >&2; exit 1; }
# The sanitizer tree's agent carries AddressSanitizer's runtime in the
# executable (clang links it statically and exports its symbols), so its
# interceptors come before libumad2sim's without a preload of their own.
# awk reads all of nm's output: `grep -q` would end the pipe early, and
# under pipefail the answer would be no at random.
AGENT_PRELOAD=$UMAD2SIM
if nm -D "$BIN" | awk '$NF == "__asan_init" {f = 1} END {exit !f}'; then
  # libumad2sim's own client state is freed by no one at exit, and its
  # read() overreads its own buffer (umad2sim.asan.supp says how).
  export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/umad2sim.supp"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}suppressions=$(dirname "$0")/umad2sim.asan.supp"
fi

TAG="faib$$"
# Every wait is bounded in seconds, not in tries: on a loaded machine one
# sminfo or a sweep of OpenSM takes seconds (a quiet run takes ~15 s in all).
WAIT=60
WORK=$(mktemp -d /tmp/fa-ibsim-XXXXXX)
declare -A NSOF PIDS
fail() {
  echo "ibsim: FAIL: $*" >&2
  for f in "$WORK"/*/osm*/osm.log; do [ -e "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }; done
  exit 1
}
cleanup() {
  set +e
  # OpenSMs first: they detach from ibsim on the way out.
  for k in "${!PIDS[@]}"; do [[ $k == sm* ]] && kill "${PIDS[$k]}" 2>/dev/null; done
  sleep 0.3
  for k in "${!PIDS[@]}"; do kill -9 "${PIDS[$k]}" 2>/dev/null; done
  wait 2>/dev/null
  for ns in "${NSOF[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# One fabric: a switch, the SM nodes and the hosts, each HCA's GUIDs from
# its own base so that two fabrics never share a GUID.
#   fabric NAME GUIDBASE NSM NHOSTS
fabric() {
  local f=$1 base=$2 nsm=$3 nhosts=$4 i port=1
  mkdir -p "$WORK/$f"
  NSOF[$f]="$TAG-$f"
  ip netns add "${NSOF[$f]}"
  {
    echo "caguid=$base"
    echo "switchguid=$(printf '0x%x' $((base + 0xf000)))"
    echo
    echo "Switch 16 \"$f-sw\""
    for i in $(seq 1 "$nsm"); do echo "[$port] \"$f-sm$i\"[1]"; port=$((port + 1)); done
    for i in $(seq 1 "$nhosts"); do echo "[$port] \"$f-host$i\"[1]"; port=$((port + 1)); done
    echo
    port=1
    for n in $(for i in $(seq 1 "$nsm"); do echo "sm$i"; done) $(for i in $(seq 1 "$nhosts"); do echo "host$i"; done); do
      printf 'Hca 1 "%s"\n[1] "%s-sw"[%d]\n\n' "$f-$n" "$f" "$port"
      port=$((port + 1))
    done
  } > "$WORK/$f/net"
  # Fast takeover: the standby polls the master every 500 ms, twice.
  # No sweep on a trap, a heavy sweep every second instead: a starting SM
  # sends trap 144 as it sets IsSM, the master's sweep then asks it for
  # SMInfo within a millisecond, and a starting OpenSM on libumad2sim can
  # lose that request; libumad2sim times out no MAD, so the master's sweep
  # would wait for the answer for good. A sweep at any other moment is
  # answered; the heavy one is where a master finds a new SM.
  printf 'sminfo_polling_timeout 500\npolling_retry_number 2\nsweep_interval 1\nsweep_on_trap FALSE\nforce_heavy_sweep TRUE\n' \
    >"$WORK/$f/opensm.conf"
  ip netns exec "${NSOF[$f]}" env IBSIM_SOCKNAME="$TAG-$f" ibsim -s -n "$WORK/$f/net" >"$WORK/$f/ibsim.log" 2>&1 &
  PIDS[ibsim-$f]=$!
  local end=$((SECONDS + WAIT))
  while [ "$SECONDS" -lt "$end" ]; do grep -q "simulator ready" "$WORK/$f/ibsim.log" && return 0; sleep 0.05; done
  fail "ibsim of fabric $f did not start: $(cat "$WORK/$f/ibsim.log")"
}

# A command attached to node NODE of fabric F, in that fabric's namespace.
#   on F NODE CMD...
on() {
  local f=$1 node=$2
  shift 2
  ip netns exec "${NSOF[$f]}" env IBSIM_SOCKNAME="$TAG-$f" SIM_HOST="$f-$node" LD_PRELOAD="${ON_PRELOAD:-$UMAD2SIM}" "$@"
}
# The agent on node NODE of fabric F.
#   agent_on F NODE ARGS...
agent_on() { ON_PRELOAD=$AGENT_PRELOAD on "$1" "$2" "$BIN" "${@:3}"; }

#   sm F N PRIORITY: OpenSM on node smN
sm() {
  local f=$1 n=$2 prio=$3 d="$WORK/$1/osm$2"
  mkdir -p "$d"
  (cd "$d" && OSM_TMP_DIR="$d" OSM_CACHE_DIR="$d" exec ip netns exec "${NSOF[$f]}" env IBSIM_SOCKNAME="$TAG-$f" \
    SIM_HOST="$f-sm$n" LD_PRELOAD="$UMAD2SIM" opensm -F "$WORK/$f/opensm.conf" -f "$d/osm.log" -p "$prio" \
    --dump_files_dir "$d" >"$d/out" 2>&1) &
  PIDS[sm-$f-$n]=$!
}

# sminfo from a host, once the SM at its SM LID answers as master.
#   master_of F HOST -> "sm lid 1 sm guid 0x2c90300a10001, ... state 3 SMINFO_MASTER"
master_of() {
  local f=$1 h=$2 out end=$((SECONDS + WAIT))
  while [ "$SECONDS" -lt "$end" ]; do
    out=$(cd "$WORK" && on "$f" "$h" sminfo 2>/dev/null) && [[ $out == *SMINFO_MASTER* ]] && { echo "$out"; return 0; }
    sleep 0.1
  done
  fail "no master SM seen from $f-$h within $WAIT s: $out"
}

# The SA's SMInfoRecord table as saquery prints it: "GUID state" per SM.
sa_sms() {
  (cd "$WORK" && on "$1" "$2" saquery SMIR) |
    awk '/GUID\.\./ {sub(/.*\.\./, ""); g = $0} /SMState\.\./ {sub(/.*\.\./, ""); print g, $0}' | sort
}

# The host's sysfs as libumad2sim presents it, completed with what the
# kernel writes and libumad2sim leaves out, as a --sysfs-root tree.
#   host_tree F HOST DIR
host_tree() {
  local f=$1 h=$2 dir=$3
  rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$WORK" && on "$f" "$h" python3 - "$dir" <<'EOF'
import os, shutil, sys
dest = sys.argv[1]
os.listdir('/sys/class/infiniband')  # libumad2sim writes ./sys-<pid>/ for this process
shutil.copytree('./sys-%d/sys/class/infiniband' % os.getpid(), os.path.join(dest, 'class', 'infiniband'))
for dev in os.listdir(os.path.join(dest, 'class', 'infiniband')):
    ports = os.path.join(dest, 'class', 'infiniband', dev, 'ports')
    for p in os.listdir(ports):
        with open(os.path.join(ports, p, 'link_layer'), 'w') as f:
            f.write('InfiniBand\n')
        os.makedirs(os.path.join(ports, p, 'gid_attrs', 'types'), exist_ok=True)
        with open(os.path.join(ports, p, 'gid_attrs', 'types', '0'), 'w') as f:
            f.write('IB/RoCE v1\n')
EOF
  ) || fail "could not read the sysfs of $f-$h through libumad2sim"
}

# `fabric-agent inspect --json` on a host; prints the document.
inspect() {
  local f=$1 h=$2 tree="$WORK/$1/tree-$2"
  host_tree "$f" "$h" "$tree"
  (cd "$WORK" && agent_on "$f" "$h" inspect --sysfs-root "$tree" --json --config "$WORK/empty.yaml" 2>"$WORK/$f/$h.err") ||
    fail "inspect on $f-$h exited $?: $(cat "$WORK/$f/$h.err")"
}

# A Python expression over an inspect document d, e.g. field 'd["fabric"]["id"]'.
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

expect_eq() { [ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"; }

echo "{}" > "$WORK/empty.yaml"

case "$SCENARIO" in
fabrics)
  # Fabric a: one OpenSM and three hosts; fabric b: its own ibsim, its own
  # OpenSM, two hosts. Same default subnet prefix fe80::, so only the SMs
  # tell them apart.
  fabric a 0x0002c90300a10000 1 3
  fabric b 0x0002c90300b20000 1 2
  sm a 1 0
  sm b 1 0
  ref_a=$(master_of a host1)
  ref_b=$(master_of b host1)
  sm_a=$(sed -E 's/.*sm guid (0x[0-9a-f]+).*/\1/' <<<"$ref_a")
  sm_b=$(sed -E 's/.*sm guid (0x[0-9a-f]+).*/\1/' <<<"$ref_b")
  declare -A ID
  for h in host1 host2 host3; do
    doc=$(inspect a "$h")
    expect_eq "$(field 'd["fabric"]["kind"]' <<<"$doc")" infiniband "a-$h fabric.kind"
    expect_eq "$(field 'd["fabric"]["ports"]' <<<"$doc")" "['ibsim0:1']" "a-$h fabric.ports"
    expect_eq "$(field 'd["nccl_env"]["NCCL_IB_HCA"]' <<<"$doc")" "=ibsim0:1" "a-$h NCCL_IB_HCA"
    # sm_guid as sminfo prints it (sminfo drops the leading zeros).
    expect_eq "$(printf '0x%x' "$(field 'd["fabric"]["sm_guid"]' <<<"$doc")")" "$sm_a" "a-$h sm_guid vs sminfo"
    expect_eq "$(field 'd["fabric"]["sm_guids"]' <<<"$doc")" "['$(printf '0x%016x' "$sm_a")']" "a-$h sm_guids"
    ID[a-$h]=$(field 'd["fabric"]["id"]' <<<"$doc")
    echo "ibsim: a-$h: fabric.id ${ID[a-$h]}"
  done
  for h in host1 host2; do
    doc=$(inspect b "$h")
    expect_eq "$(printf '0x%x' "$(field 'd["fabric"]["sm_guid"]' <<<"$doc")")" "$sm_b" "b-$h sm_guid vs sminfo"
    ID[b-$h]=$(field 'd["fabric"]["id"]' <<<"$doc")
    echo "ibsim: b-$h: fabric.id ${ID[b-$h]}"
  done
  expect_eq "${ID[a-host1]}" "ib:fe80000000000000:$(printf '%016x' "$sm_a")" "fabric a's id names its SM"
  expect_eq "${ID[a-host2]}" "${ID[a-host1]}" "a-host2 and a-host1 on one fabric"
  expect_eq "${ID[a-host3]}" "${ID[a-host1]}" "a-host3 and a-host1 on one fabric"
  expect_eq "${ID[b-host2]}" "${ID[b-host1]}" "b-host2 and b-host1 on one fabric"
  expect_eq "${ID[b-host1]}" "ib:fe80000000000000:$(printf '%016x' "$sm_b")" "fabric b's id names its SM"
  [ "${ID[a-host1]}" != "${ID[b-host1]}" ] || fail "two fabrics share the id ${ID[a-host1]}"
  ;;
failover)
  # Two OpenSMs on one fabric: sm1 with priority 10 becomes master, sm2 with
  # priority 5 standby. The master is started first so that its first sweep
  # finds the standby's port; the master has the lower GUID, as IBA's
  # election would pick it at equal priority too.
  fabric a 0x0002c90300a10000 2 3
  sm a 1 10
  master_of a host1 >/dev/null
  sm a 2 5
  # The master lists the standby once it has polled it (state 2).
  want=$'0x0002c90300a10001 3\n0x0002c90300a10003 2'
  end=$((SECONDS + WAIT))
  while [ "$SECONDS" -lt "$end" ] && [ "$(sa_sms a host1)" != "$want" ]; do sleep 0.1; done
  [ "$(sa_sms a host1)" = "$want" ] || fail "the SA did not list the standby within $WAIT s: $(sa_sms a host1)"
  before=$(master_of a host1)
  # The table names both SMs, master first, at a glance.
  host_tree a host1 "$WORK/a/tree-host1"
  table=$(cd "$WORK" && agent_on a host1 inspect --sysfs-root "$WORK/a/tree-host1" --config "$WORK/empty.yaml")
  grep -qF "SMs 0x0002c90300a10001 master p10, 0x0002c90300a10003 standby p5" <<<"$table" ||
    fail "the table does not list both SMs: $table"
  declare -A ID
  for h in host1 host2 host3; do
    doc=$(inspect a "$h")
    ID[$h]=$(field 'd["fabric"]["id"]' <<<"$doc")
    states=$(field '[s["state"] for s in d["fabric"]["sms"]]' <<<"$doc")
    expect_eq "$states" "['master', 'standby']" "a-$h fabric.sms states before the failover"
    echo "ibsim: before failover, a-$h: fabric.id ${ID[$h]} (${before%%,*})"
  done
  kill -9 "${PIDS[sm-a-1]}"
  unset 'PIDS[sm-a-1]'
  # The standby takes over: sminfo from every host answers with its GUID.
  end=$((SECONDS + WAIT))
  while [ "$SECONDS" -lt "$end" ]; do
    after=$(master_of a host1)
    [[ $after == *"sm guid 0x2c90300a10003"* ]] && break
    sleep 0.1
  done
  [[ $after == *"sm guid 0x2c90300a10003"* ]] || fail "the standby did not take over: $after"
  for h in host1 host2 host3; do
    doc=$(inspect a "$h")
    id=$(field 'd["fabric"]["id"]' <<<"$doc")
    expect_eq "$(field 'd["fabric"]["sm_guid"]' <<<"$doc")" 0x0002c90300a10003 "a-$h master after the failover"
    echo "ibsim: after failover, a-$h: fabric.id $id (${after%%,*})"
    expect_eq "$id" "${ID[$h]}" "a-$h fabric.id across the failover"
  done
  ;;
*) fail "unknown scenario $SCENARIO (accepted: fabrics, failover)" ;;
esac
echo "ibsim: $SCENARIO: ok"
