#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/mesh: the product path of the overlay, a running daemon changing its
# WireGuard mesh at the control plane's request, against `wg` making the same
# change on the same interface, in network namespaces this script creates.
#
#   bench/mesh/run.sh [FABRIC_AGENT_BINARY]          wireguard-go (this host's kernel has no WireGuard)
#   bench/mesh/run.sh --lab [FABRIC_AGENT_BINARY]    kernel WireGuard, in the lab VM (docs/lab.md)
#   env: RUNS=31 (changes per size), SIZES="64 1000 4000", FULL_RUNS=11, FULL_PEERS=1000,
#        KEEP=1 (keep the work folder, with the daemon's log)
#
# For each mesh size: a one-peer change (a peer's endpoint) through the
# daemon, PATCH /v1/mesh (curl's request time: connect to last byte, the
# daemon's whole handling including the fsync'd state write), against
# `wg set IF peer K endpoint E` (its whole process: wg has no daemon). The
# same change as a full PUT of the mesh is reported too. Two peers of every
# mesh are live nodes with sessions; a session reset by a change would show
# as a new handshake. Then the full set of FULL_PEERS peers pushed onto an
# empty interface: PUT /v1/mesh against `wg setconf`.
# Targets: one-peer p50 < 5 ms at 1000 peers (wireguard-go here); at 4000
# peers within 2x of its cost at 64; full set <= 1.2x `wg setconf`; no
# session reset.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUNS=${RUNS:-31}
SIZES=${SIZES:-64 1000 4000}
FULL_RUNS=${FULL_RUNS:-11}
FULL_PEERS=${FULL_PEERS:-1000}

# gen_keys N: N random public keys (base64), one per line.
gen_keys() { python3 -c 'import base64,os,sys
for _ in range(int(sys.argv[1])): print(base64.b64encode(os.urandom(32)).decode())' "$1"; }

if [ "${1:-}" = --lab ]; then
  AGENT=$(readlink -f "${2:-$SRC/build/agent/fabric-agent}")
  WORK=$(mktemp -d /tmp/fa-bench-mesh-lab.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
  most=0
  for n in $SIZES $FULL_PEERS; do [ "$n" -gt "$most" ] && most=$n; done
  gen_keys "$most" >"$WORK/keys"
  cp "${BASH_SOURCE[0]}" "$WORK/run.sh"
  cat >"$WORK/scenario.sh" <<EOF
# bench/mesh/run.sh --lab: the same benchmark against kernel WireGuard.
. /lab/lib.sh
BACKEND=kernel KEYS=/lab/files/keys RUNS=$RUNS SIZES="$SIZES" FULL_RUNS=$FULL_RUNS FULL_PEERS=$FULL_PEERS \\
  bash /lab/files/run.sh /usr/bin/fabric-agent
EOF
  exec "$SRC/tests/lab/run" --binary "$AGENT" --timeout 3600 --file "$WORK/run.sh" --file "$WORK/keys" "$WORK/scenario.sh"
fi

AGENT=$(readlink -f "${1:-$SRC/build/agent/fabric-agent}")
BACKEND=${BACKEND:-userspace}
[ "$(id -u)" = 0 ] || { echo "bench/mesh: needs root (network namespaces)" >&2; exit 2; }
for t in wg curl ip awk; do command -v "$t" >/dev/null || { echo "bench/mesh: $t missing" >&2; exit 2; }; done
[ "$BACKEND" = kernel ] || command -v wireguard-go >/dev/null || { echo "bench/mesh: wireguard-go missing" >&2; exit 2; }

T=fb$$
NS=("$T-d" "$T-p1" "$T-p2")  # the daemon's node and two live peers
BR=$T-br
WORK=$(mktemp -d /tmp/fa-bench-mesh.XXXXXX)
DAEMON=""
cleanup() {
  [ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
  for i in 0 1 2; do
    ip netns exec "${NS[$i]}" "$AGENT" mesh down --interface "wg$T$i" >/dev/null 2>&1 || true
    ip netns del "${NS[$i]}" 2>/dev/null || true
  done
  ip link del "$BR" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "bench/mesh: kept $WORK (agent.log: the daemon's log)" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
in_ns() { local n=$1; shift; ip netns exec "${NS[$n]}" "$@"; }

# The underlay: three namespaces on a bridge, 192.168.90.1-3.
ip link add "$BR" type bridge && ip link set "$BR" up
for i in 0 1 2; do
  ip netns add "${NS[$i]}"
  ip link add "$T-v$i" type veth peer name eth0 netns "${NS[$i]}"
  ip link set "$T-v$i" master "$BR" up
  in_ns "$i" ip addr add "192.168.90.$((i + 1))/24" dev eth0
  in_ns "$i" ip link set eth0 up
  in_ns "$i" ip link set lo up
done

KEYS=${KEYS:-$WORK/keys}
if [ ! -s "$KEYS" ]; then
  most=0
  for n in $SIZES $FULL_PEERS; do [ "$n" -gt "$most" ] && most=$n; done
  gen_keys "$most" >"$KEYS"
fi

# The two live peers: wg-configured nodes 10.64.0.2 and .3 (wg-quick style,
# by hand, as another agent would be); their keys become those of the
# daemon's first two peers.
declare -a PUB
for i in 1 2; do
  printf '{"cluster_id":"bench","interface":"wg%s%s","address":"10.64.0.%s/16","peers":[]}' "$T" "$i" "$((i + 1))" >"$WORK/p$i.json"
  in_ns "$i" "$AGENT" mesh apply --backend "$BACKEND" --overlay-cidr 10.64.0.0/16 --file "$WORK/p$i.json" >/dev/null
  PUB[$i]=$(in_ns "$i" wg show "wg$T$i" public-key)
done

IF=wg${T}0
cat >"$WORK/agent.yaml" <<EOF
listen: 127.0.0.1:7471
state_dir: $WORK/state
log_level: info
refresh_interval: 3600
overlay: {backend: $BACKEND, interface: $IF, cidr: 10.64.0.0/16}
pods: {socket: $WORK/pods.sock, cdi_dir: ""}
EOF
# Not through in_ns (a function: its background job would be a subshell):
# `ip netns exec` execs the agent, so $! is the daemon itself.
ip netns exec "${NS[0]}" "$AGENT" run --config "$WORK/agent.yaml" >"$WORK/agent.log" 2>&1 &
DAEMON=$!
for _ in $(seq 100); do grep -q "ready (generation" "$WORK/agent.log" && break; sleep 0.1; done
grep -q "ready (generation" "$WORK/agent.log" || { cat "$WORK/agent.log" >&2; exit 1; }
TOKEN=$(cat "$WORK/state/token")
DPUB=$(in_ns 0 curl -s -H "Authorization: Bearer $TOKEN" http://127.0.0.1:7471/v1/status |
  sed -n 's/.*"public_key":"\([^"]*\)","state".*/\1/p')
for i in 1 2; do
  in_ns "$i" wg set "wg$T$i" peer "$DPUB" endpoint 192.168.90.1:51820 allowed-ips 10.64.0.1/32 persistent-keepalive 25
done

# peer_lines N: the daemon's N peers, "KEY ENDPOINT PREFIX" each; the first
# two live, the others at 10.64.x.y (from .5 on) behind endpoints 192.0.x.y.
peer_lines() {
  echo "${PUB[1]} 192.168.90.2:51820 10.64.0.2/32"
  echo "${PUB[2]} 192.168.90.3:51820 10.64.0.3/32"
  head -n $(($1 - 2)) "$KEYS" | awk '{k = NR + 3; printf "%s 192.0.%d.%d:51820 10.64.%d.%d/32\n", $1, int(k / 250), k % 250 + 1, int(k / 250), k % 250 + 1}'
}
# peers N: the same as JSON list items.
peers() {
  peer_lines "$1" | awk '{printf "%s{\"public_key\":\"%s\",\"endpoint\":\"%s\",\"allowed_ips\":[\"%s\"]}", (NR > 1 ? "," : ""), $1, $2, $3}'
}
mesh() { printf '{"cluster_id":"bench","address":"10.64.0.1/16","peers":[%s]}' "$1"; }

# request METHOD BODY_FILE: curl's time for the request in ms (must be 200).
request() {
  local out
  out=$(in_ns 0 curl -s -o "$WORK/answer" -w '%{http_code} %{time_total}' -X "$1" \
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' --data-binary @"$2" \
    http://127.0.0.1:7471/v1/mesh)
  [ "${out% *}" = 200 ] || { echo "bench/mesh: $1 answered ${out% *}: $(cat "$WORK/answer")" >&2; exit 1; }
  awk -v s="${out#* }" 'BEGIN { printf "%.3f\n", s * 1000 }'
}
# wall CMD...: the command's whole process time in ms, taken by a shell in
# the daemon's namespace (no process of the timing's own in between).
wall() {
  # shellcheck disable=SC2016
  in_ns 0 bash -c 'a=$EPOCHREALTIME; "$@" >/dev/null; b=$EPOCHREALTIME; echo "$a $b"' _ "$@" |
    awk '{ printf "%.3f\n", ($2 - $1) * 1000 }'
}
# stats FILE: "p50 p95" of the numbers in FILE.
stats() { sort -n "$1" | awk '{ v[NR] = $1 } END { i50 = int((NR + 1) / 2); i95 = int(NR * 0.95 + 0.999); if (i95 < 1) i95 = 1; printf "%.2f %.2f\n", v[i50], v[i95] }'; }
# cpu_ns: the daemon's CPU time so far (all its threads), in ns: under a
# loaded host a steadier measure of its own work than the wall clock.
cpu_ns() { cat /proc/"$DAEMON"/task/*/schedstat | awk '{ s += $1 } END { print s }'; }
handshakes() { in_ns 0 wg show "$IF" latest-handshakes | awk -v a="${PUB[1]}" -v b="${PUB[2]}" '$1 == a || $1 == b { print $2 }' | sort | tr '\n' ' '; }
live() { in_ns 0 ping -c 2 -i 0.2 -W 2 -q 10.64.0.2 >/dev/null && in_ns 0 ping -c 2 -i 0.2 -W 2 -q 10.64.0.3 >/dev/null; }

echo "bench/mesh: backend $BACKEND, $RUNS one-peer changes per size, full set of $FULL_PEERS peers x $FULL_RUNS"
printf '%-6s  %-28s  %9s  %9s\n' peers "change" "p50 ms" "p95 ms"
resets=0
declare -A P50
for n in $SIZES; do
  list=$(peers "$n")
  mesh "$list" >"$WORK/full.json"
  request PUT "$WORK/full.json" >/dev/null
  live || { echo "bench/mesh: the live peers do not answer over the mesh" >&2; exit 1; }
  sleep 1.1  # handshake times have one-second resolution
  before=$(handshakes)
  key=$(head -n 1 "$KEYS")
  : >"$WORK/patch.ms"; : >"$WORK/wg.ms"; : >"$WORK/put.ms"
  cpu=0
  for r in $(seq "$RUNS"); do
    ep="198.51.100.$((r % 200 + 1)):$((40000 + r))"
    printf '{"cluster_id":"bench","peers":[{"public_key":"%s","endpoint":"%s","allowed_ips":["10.64.0.5/32"]}]}' "$key" "$ep" >"$WORK/patch.json"
    c0=$(cpu_ns)
    request PATCH "$WORK/patch.json" >>"$WORK/patch.ms"
    cpu=$((cpu + $(cpu_ns) - c0))
    wall wg set "$IF" peer "$key" endpoint "198.51.101.$((r % 200 + 1)):$((40000 + r))" >>"$WORK/wg.ms"
  done
  # The same one-peer change as a whole document, fewer times (it carries all peers).
  for r in $(seq $(((RUNS + 2) / 3))); do
    mesh "${list/192.0.0.5:51820/203.0.113.$r:51820}" >"$WORK/one.json"
    request PUT "$WORK/one.json" >>"$WORK/put.ms"
    mesh "$list" >"$WORK/one.json"
    request PUT "$WORK/one.json" >/dev/null
  done
  after=$(handshakes)
  live || { echo "bench/mesh: the live peers stopped answering during the changes" >&2; exit 1; }
  [ "$before" = "$after" ] || resets=$((resets + 1))
  read -r p50 p95 < <(stats "$WORK/patch.ms")
  P50[$n]=$p50
  printf '%-6s  %-28s  %9s  %9s   (daemon CPU %s ms per change)\n' "$n" "daemon, PATCH one peer" "$p50" "$p95" \
    "$(awk -v c="$cpu" -v r="$RUNS" 'BEGIN { printf "%.2f", c / r / 1e6 }')"
  read -r w50 w95 < <(stats "$WORK/wg.ms")
  printf '%-6s  %-28s  %9s  %9s\n' "$n" "wg set (process)" "$w50" "$w95"
  read -r f50 f95 < <(stats "$WORK/put.ms")
  printf '%-6s  %-28s  %9s  %9s\n' "$n" "daemon, PUT whole mesh" "$f50" "$f95"
done

# The full set onto an empty interface, alternating the two tools.
list=$(peers "$FULL_PEERS")
mesh "$list" >"$WORK/full.json"
mesh "" >"$WORK/empty.json"
{
  printf '[Interface]\nPrivateKey = %s\nListenPort = 51820\n' "$(cat "$WORK/state/wg.key")"
  peer_lines "$FULL_PEERS" | awk '{ printf "[Peer]\nPublicKey = %s\nEndpoint = %s\nAllowedIPs = %s\n", $1, $2, $3 }'
} >"$WORK/full.conf"
printf '[Interface]\nPrivateKey = %s\nListenPort = 51820\n' "$(cat "$WORK/state/wg.key")" >"$WORK/empty.conf"
chmod 600 "$WORK"/*.conf
: >"$WORK/dfull.ms"; : >"$WORK/wfull.ms"
for r in $(seq "$FULL_RUNS"); do
  request PUT "$WORK/empty.json" >/dev/null
  request PUT "$WORK/full.json" >>"$WORK/dfull.ms"
  in_ns 0 wg setconf "$IF" "$WORK/empty.conf"
  wall wg setconf "$IF" "$WORK/full.conf" >>"$WORK/wfull.ms"
done
request PUT "$WORK/full.json" >/dev/null
read -r d50 d95 < <(stats "$WORK/dfull.ms")
read -r w50 w95 < <(stats "$WORK/wfull.ms")
printf '%-6s  %-28s  %9s  %9s\n' "$FULL_PEERS" "daemon, PUT full set" "$d50" "$d95"
printf '%-6s  %-28s  %9s  %9s\n' "$FULL_PEERS" "wg setconf (process)" "$w50" "$w95"

first=${SIZES%% *}
last=${SIZES##* }
verdict() { if [ "$1" = 1 ]; then echo met; else echo "NOT met"; fi; }
echo
if [ -n "${P50[1000]:-}" ]; then
  if [ "$BACKEND" = userspace ]; then
    echo "one-peer change at 1000 peers: p50 ${P50[1000]} ms (target < 5 ms): $(verdict "$(awk -v a="${P50[1000]}" 'BEGIN { print (a < 5) }')")"
  else
    echo "one-peer change at 1000 peers: p50 ${P50[1000]} ms (the absolute target is for wireguard-go on the host; the lab's CPU is emulated)"
  fi
fi
awk -v a="${P50[$last]}" -v b="${P50[$first]}" -v n="$last" -v m="$first" \
  'BEGIN { printf "one-peer change at %s peers / at %s: %.2f (target <= 2): ", n, m, a / b }'
verdict "$(awk -v a="${P50[$last]}" -v b="${P50[$first]}" 'BEGIN { print (a <= 2 * b) }')"
awk -v a="$d50" -v b="$w50" -v n="$FULL_PEERS" 'BEGIN { printf "full set of %s peers, daemon / wg setconf: %.2f (target <= 1.2): ", n, a / b }'
verdict "$(awk -v a="$d50" -v b="$w50" 'BEGIN { print (a <= 1.2 * b) }')"
echo "sizes whose changes reset a live session: $resets (target 0): $(verdict "$([ "$resets" = 0 ] && echo 1 || echo 0)")"
