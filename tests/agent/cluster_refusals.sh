#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `fabric-agent cluster form` refuses the sets a marketplace must never list
# together, before it touches any mesh, and names the agents at fault:
#   - agents whose fabric has no id (InfiniBand where SMInfo cannot be read);
#   - an agent on another fabric (RoCE, another provider_id) than the rest;
#   - an agent with other GPUs (count) than the rest.
# Real agents (`fabric-agent run`) on fixture sysfs trees, all in one network
# namespace made here, listening on its loopback; the RoCE fixture's netdevs
# are created in it with their addresses.
set -euo pipefail

BIN=$(readlink -f "${1:?usage: cluster_refusals.sh path/to/fabric-agent fixtures-dir}")
FIX=$(readlink -f "${2:?fixtures dir}")
NS="fa-cref-$$"
WORK=$(mktemp -d /tmp/fa-cref-XXXXXX)
PIDS=()
fail() {
  echo "cluster_refusals: FAIL: $*" >&2
  for l in "$WORK"/*/agent.log; do echo "--- $l" >&2; tail -n 5 "$l" >&2; done
  exit 1
}
PORTS=()
cleanup() {
  set +e
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  # Were a refusal ever missed, `mesh down` stops the wireguard-go it started.
  for port in "${PORTS[@]}"; do ip netns exec "$NS" "$BIN" mesh down --interface "fcr$port" >/dev/null 2>&1; done
  ip netns del "$NS" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$NS"
ns() { ip netns exec "$NS" "$@"; }
ns ip link set lo up
# Fixture b's netdevs: the internet card with the default route, three fabric cards.
n=0
for spec in enp1s0f0np0=198.51.100.20/24 ens3np0=10.20.0.11/16 ens4np0=10.20.0.12/16 ens5np0=10.20.0.13/16; do
  ifn=${spec%%=*}
  if ! ns ip link add "$ifn" type dummy 2>/dev/null; then
    ns ip link add "$ifn" type veth peer name "fapeer$n"
    ns ip link set "fapeer$n" up
    n=$((n + 1))
  fi
  ns ip addr add "${spec#*=}" dev "$ifn"
  ns ip link set "$ifn" up
done
ns ip route add default via 198.51.100.1 dev enp1s0f0np0
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/token"
chmod 600 "$WORK/token"

# A copy of fixture b with one GPU fewer (its bus/pci/devices entry removed).
cp -a "$FIX/b-roce" "$WORK/b-roce-1gpu"
rm "$WORK/b-roce-1gpu/bus/pci/devices/0000:51:00.0"

#   agent NAME PORT SYSFS PROVIDER
agent() {
  local name=$1 port=$2 root=$3 provider=$4 d="$WORK/$1"
  mkdir -p "$d"
  PORTS+=("$port")
  cat >"$d/agent.yaml" <<EOF
listen: 127.0.0.1:$port
state_dir: $d/state
token_file: $WORK/token
sysfs_root: $root
provider_id: "$provider"
pods:
  socket: $d/pods.sock
  cdi_dir: $d/cdi
overlay:
  interface: fcr$port
  backend: userspace
  public_address: 127.0.0.1
refresh_interval: 1h
EOF
  # Not through ns(): $! must be the agent (ip netns exec execs it).
  ip netns exec "$NS" "$BIN" run --config "$d/agent.yaml" >>"$d/agent.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 200); do
    grep -q 'ready (generation' "$d/agent.log" && return 0
    sleep 0.05
  done
  fail "agent $name not ready"
}

agent ib1 17461 "$FIX/a-ib-8gpu" ""
agent ib2 17462 "$FIX/a-ib-8gpu" ""
agent p1a 17463 "$FIX/b-roce" p1
agent p1b 17464 "$FIX/b-roce" p1
agent p2 17465 "$FIX/b-roce" p2
agent p1gpu 17466 "$WORK/b-roce-1gpu" p1

# form AGENT-PORTS... -> stderr in $WORK/form.err, exit code in $rc
form() {
  local args=()
  for p in "$@"; do args+=(--agent "http://127.0.0.1:$p"); done
  rc=0
  ns "$BIN" cluster form "${args[@]}" --token-file "$WORK/token" --timeout 2 >"$WORK/form.out" 2>"$WORK/form.err" || rc=$?
}
expect_refused() {
  [ "$rc" = 1 ] || fail "$1: exit $rc, expected 1 (refused): $(cat "$WORK/form.err")"
  grep -q "refused" "$WORK/form.err" || fail "$1: not a refusal: $(cat "$WORK/form.err")"
  shift
  for needle in "$@"; do grep -qF -- "$needle" "$WORK/form.err" || fail "missing '$needle' in: $(cat "$WORK/form.err")"; done
  # Refused before any PUT: no agent was given a mesh.
  for d in "$WORK"/*/; do [ ! -e "$d/state/state.json" ] || ! grep -q '"peers"' "$d/state/state.json" ||
    fail "a refused set still got a mesh: $d"; done
}

# Both InfiniBand agents have ports but no fabric id: neither is grouped.
form 17461 17462
expect_refused "unknown fabric" "the fabric of 2 agent(s) is unknown" "http://127.0.0.1:17461: " \
  "http://127.0.0.1:17462: " "fabric.id is null"
# One unknown among known ones is refused too, naming only it.
form 17463 17461 17464
expect_refused "one unknown fabric" "the fabric of 1 agent(s) is unknown" "http://127.0.0.1:17461: "
grep -qF "http://127.0.0.1:17463: " "$WORK/form.err" && fail "a known fabric named as unknown: $(cat "$WORK/form.err")"

# Another provider's segment is another fabric: the odd agent is named.
form 17463 17464 17465
expect_refused "mixed fabric" "http://127.0.0.1:17465 is on fabric roce:p2:10.20.0.0/16, the others on roce:p1:10.20.0.0/16"

# One fabric, but one agent has one GPU fewer.
form 17463 17466 17464
expect_refused "mixed GPUs" "http://127.0.0.1:17466 has GPUs 1 x L40S, the others 2 x L40S"
echo "cluster_refusals: ok"
