#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End to end, on one machine: three agents, each in its own network namespace,
# joined by a bridge in a fourth ("hub") namespace where the control plane
# runs. `fabric-agent cluster form` forms the WireGuard mesh (wireguard-go),
# then:
#   - every node pings every other over the overlay (10.42.0.0/24);
#   - agent b is killed with SIGKILL and started again while a ping loop runs
#     over the overlay: the interface is adopted, the peers are unchanged and
#     the loop loses no packet;
#   - agent c's state file is corrupted and c restarted: it is moved aside
#     and the mesh is rebuilt from the live interface, pings still pass.
# All addresses live only inside the namespaces this script creates; every
# namespace, interface and wireguard-go process is removed on exit.
#
#   tests/agent/e2e_netns.sh BINARY          (test: quiet, exit code)
#   FA_DEMO=1 tests/agent/e2e_netns.sh BINARY (make demo: narrates each step)
set -euo pipefail

BIN=$(readlink -f "${1:?usage: e2e_netns.sh path/to/fabric-agent}")
DEMO=${FA_DEMO:-0}
TAG="fa$$"
HUB="${TAG}-hub"
NODES=(a b c)
WORK=$(mktemp -d /tmp/fa-e2e-XXXXXX)
declare -A NS IP IFN PID
for i in 0 1 2; do
  n=${NODES[$i]}
  NS[$n]="${TAG}-${n}"
  IP[$n]="198.18.0.$((i + 1))"   # RFC 2544 benchmark range, inside the namespaces only
  IFN[$n]="${TAG}w${n}"          # distinct names: wireguard-go's UAPI sockets share /var/run/wireguard
done

say() { if [ "$DEMO" = 1 ]; then printf '\n\033[1m== %s\033[0m\n' "$*"; else echo "e2e: $*"; fi; }
fail() { echo "e2e: FAIL: $*" >&2; for n in "${NODES[@]}"; do echo "--- log of agent $n" >&2; tail -n 30 "$WORK/$n/agent.log" >&2 || true; done; exit 1; }

cleanup() {
  set +e
  for n in "${NODES[@]}"; do
    [ -n "${PID[$n]:-}" ] && kill -9 "${PID[$n]}" 2>/dev/null
    # `mesh down` stops the wireguard-go the agent started for this interface.
    ip netns exec "${NS[$n]}" "$BIN" mesh down --interface "${IFN[$n]}" >/dev/null 2>&1
    ip netns del "${NS[$n]}" 2>/dev/null
  done
  ip netns del "$HUB" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

say "three namespaces on a bridge, one agent in each"
ip netns add "$HUB"
ip -n "$HUB" link add br0 type bridge
ip -n "$HUB" addr add 198.18.0.254/24 dev br0
ip -n "$HUB" link set br0 up
ip -n "$HUB" link set lo up
for n in "${NODES[@]}"; do
  ip netns add "${NS[$n]}"
  ip -n "$HUB" link add "v$n" type veth peer name eth0 netns "${NS[$n]}"
  ip -n "$HUB" link set "v$n" master br0 up
  ip -n "${NS[$n]}" addr add "${IP[$n]}/24" dev eth0
  ip -n "${NS[$n]}" link set eth0 up
  ip -n "${NS[$n]}" link set lo up
  mkdir -p "$WORK/$n"
  cat > "$WORK/$n/agent.yaml" <<EOF
# Agent $n of the e2e/demo cluster. Plain HTTP on the namespace's address is
# allowed on purpose: the network is private to this test.
listen: ${IP[$n]}:7471
allow_plain_http_on_non_loopback: true
state_dir: $WORK/$n/state
token_file: $WORK/token
pods:   # each agent its own hook socket and CDI dir (not the host's)
  socket: $WORK/$n/pods.sock
  cdi_dir: $WORK/$n/cdi
overlay:
  interface: ${IFN[$n]}
  backend: userspace
  public_address: ${IP[$n]}
refresh_interval: 1h   # so that a refresh seen below comes from an rtnetlink event
EOF
done
# One token for the whole demo cluster, as a control plane would provision.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$WORK/token"
chmod 600 "$WORK/token"

start_agent() {
  local n=$1
  ip netns exec "${NS[$n]}" "$BIN" run --config "$WORK/$n/agent.yaml" >>"$WORK/$n/agent.log" 2>&1 &
  PID[$n]=$!
  for _ in $(seq 1 200); do
    if [ "$(grep -c 'ready (generation' "$WORK/$n/agent.log")" -ge "${2:-1}" ]; then return 0; fi
    kill -0 "${PID[$n]}" 2>/dev/null || fail "agent $n exited"
    sleep 0.05
  done
  fail "agent $n not ready"
}
for n in "${NODES[@]}"; do start_agent "$n"; done

agents=()
for n in "${NODES[@]}"; do agents+=(--agent "http://${IP[$n]}:7471"); done
say "fabric-agent cluster form ${agents[*]} --token-file TOKEN"
ip netns exec "$HUB" "$BIN" cluster form "${agents[@]}" --token-file "$WORK/token" --cluster-id demo \
  --timeout 60 > "$WORK/form.out" 2> "$WORK/form.err" || { cat "$WORK/form.err" >&2; fail "cluster form"; }
cat "$WORK/form.out"
grep -q "cluster demo formed: 3 nodes" "$WORK/form.out" || fail "cluster form output"

say "pings over the overlay"
for i in 0 1 2; do
  for j in 0 1 2; do
    [ $i = $j ] && continue
    src=${NODES[$i]}
    ip netns exec "${NS[$src]}" ping -c 2 -i 0.2 -W 2 -q "10.42.0.$((j + 1))" >/dev/null ||
      fail "$src cannot ping 10.42.0.$((j + 1)) over the overlay"
  done
done
echo "every node reaches every other over 10.42.0.0/24"

# Each daemon reports its interface's public key, and its status lists the
# peers the interface has.
for n in "${NODES[@]}"; do
  pub=$(ip netns exec "${NS[$n]}" wg show "${IFN[$n]}" public-key)
  [ "$(ip netns exec "$HUB" curl -s -H "Authorization: Bearer $(cat "$WORK/token")" "http://${IP[$n]}:7471/v1/status" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["mesh"]["public_key"])')" = "$pub" ] ||
    fail "agent $n reports a public key other than its interface's ($pub)"
  st=$(ip netns exec "$HUB" curl -s -H "Authorization: Bearer $(cat "$WORK/token")" "http://${IP[$n]}:7471/v1/status" |
    python3 -c 'import json,sys; print("\n".join(sorted(p["public_key"] for p in json.load(sys.stdin)["mesh"]["peers"])))')
  [ -n "$st" ] && [ "$st" = "$(ip netns exec "${NS[$n]}" wg show "${IFN[$n]}" peers | sort)" ] ||
    fail "agent $n's status lists peers other than its interface's: $st"
done
echo "each agent reports its interface's public key and peers"

# A refused PUT touches nothing: no connection left open in wireguard-go.
say "a PUT for another cluster is refused (409); wireguard-go keeps no connection from it"
WGPID=$(pgrep -xf "wireguard-go -f ${IFN[a]}" | head -n 1)
[ -n "$WGPID" ] || fail "no wireguard-go serves ${IFN[a]}"
fds() { find "/proc/$WGPID/fd" -mindepth 1 | wc -l; }
f0=$(fds)
ip netns exec "$HUB" curl -s -H "Authorization: Bearer $(cat "$WORK/token")" "http://${IP[a]}:7471/v1/mesh" |
  python3 -c 'import json,sys; d=json.load(sys.stdin)["desired"]; d["cluster_id"]="other"; print(json.dumps(d))' \
  > "$WORK/other.json"
code=$(ip netns exec "$HUB" curl -s -o "$WORK/409.out" -w '%{http_code}' -X PUT \
  -H "Authorization: Bearer $(cat "$WORK/token")" -H 'Content-Type: application/json' \
  --data-binary @"$WORK/other.json" "http://${IP[a]}:7471/v1/mesh")
[ "$code" = 409 ] || fail "PUT for another cluster answered $code: $(cat "$WORK/409.out")"
sleep 0.3  # wireguard-go closes its end once the agent has closed its own
f1=$(fds)
[ "$f1" = "$f0" ] || fail "the refused PUT left $((f1 - f0)) connection(s) open in wireguard-go ($f0 -> $f1 fds)"
echo "409 conflict; wireguard-go fds $f0 -> $f1"

# The same document with one bad endpoint: refused whole with the field
# named, the interface untouched and wireguard-go left with no connection
# from it.
say "a PUT with one bad endpoint is refused (422) with its field; the interface is untouched"
ip netns exec "$HUB" curl -s -H "Authorization: Bearer $(cat "$WORK/token")" "http://${IP[a]}:7471/v1/mesh" |
  python3 -c 'import json,sys; d=json.load(sys.stdin)["desired"]; d["peers"][1]["endpoint"]="198.18.0.300:51820"; print(json.dumps(d))' \
  > "$WORK/bad.json"
before=$(ip netns exec "${NS[a]}" wg show "${IFN[a]}" endpoints | sort)
code=$(ip netns exec "$HUB" curl -s -o "$WORK/422.out" -w '%{http_code}' -X PUT \
  -H "Authorization: Bearer $(cat "$WORK/token")" -H 'Content-Type: application/json' \
  --data-binary @"$WORK/bad.json" "http://${IP[a]}:7471/v1/mesh")
[ "$code" = 422 ] || fail "PUT with a bad endpoint answered $code: $(cat "$WORK/422.out")"
python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; sys.exit(0 if e["field"]=="peers[1].endpoint" and "198.18.0.300:51820" in e["message"] else 1)' \
  "$WORK/422.out" || fail "the 422 does not name peers[1].endpoint and its value: $(cat "$WORK/422.out")"
[ "$(ip netns exec "${NS[a]}" wg show "${IFN[a]}" endpoints | sort)" = "$before" ] || fail "the refused PUT changed the interface"
sleep 0.3
f2=$(fds)
[ "$f2" = "$f0" ] || fail "the refused PUT left $((f2 - f0)) connection(s) open in wireguard-go ($f0 -> $f2 fds)"
echo "422 on peers[1].endpoint; endpoints unchanged; wireguard-go fds $f0 -> $f2"

# A body nested 150000 levels deep (~0.3 MB): refused whole, and the daemon
# lives on (echoing such a value recursed once per level).
say "a PUT nested 150000 levels deep is refused (400); the daemon still answers"
python3 -c 'import sys; n = 150000; sys.stdout.write("{\"cluster_id\":\"c\",\"peers\":{\"a\":" + "[" * n + "]" * n + "}}")' \
  > "$WORK/deep.json"
code=$(ip netns exec "$HUB" curl -s -o "$WORK/deep.out" -w '%{http_code}' -X PUT \
  -H "Authorization: Bearer $(cat "$WORK/token")" -H 'Content-Type: application/json' \
  --data-binary @"$WORK/deep.json" "http://${IP[a]}:7471/v1/mesh" || true)  # 000 if it died
[ "$code" = 400 ] || fail "the deep PUT answered $code: $(head -c 300 "$WORK/deep.out")"
grep -q 'deeper than 64 levels' "$WORK/deep.out" || fail "the deep PUT's answer does not say why: $(cat "$WORK/deep.out")"
code=$(ip netns exec "$HUB" curl -s -o /dev/null -w '%{http_code}' "http://${IP[a]}:7471/healthz" || true)
[ "$code" = 200 ] || fail "agent a no longer answers after the deep PUT (healthz $code)"
echo "deep body: 400, healthz still 200"

if [ "$DEMO" = 1 ]; then
  say "fabric-agent status (agent a)"
  ip netns exec "${NS[a]}" "$BIN" status --config "$WORK/a/agent.yaml"
fi

metric() {  # node name -> value
  ip netns exec "$HUB" curl -s -H "Authorization: Bearer $(cat "$WORK/token")" "http://${IP[$1]}:7471/metrics" |
    awk -v m="$2" '$1==m {print $2}'
}
say "an rtnetlink event (a new link in a's namespace) triggers a refresh"
r0=$(metric a fabric_agent_refreshes_total)
ip -n "${NS[a]}" link add ev0 type veth peer name ev1
for _ in $(seq 1 100); do
  r1=$(metric a fabric_agent_refreshes_total)
  [ "$r1" -gt "$r0" ] && break
  sleep 0.1
done
[ "$r1" -gt "$r0" ] || fail "no refresh after a link event"
ip -n "${NS[a]}" link del ev0
echo "refreshes: $r0 -> $r1"

peers_of() { ip netns exec "${NS[$1]}" wg show "${IFN[$1]}" peers | sort; }

say "kill -9 agent b while a pings b over the overlay"
before=$(peers_of b)
ip netns exec "${NS[a]}" ping -i 0.05 -c 80 -W 1 10.42.0.2 > "$WORK/ping.out" 2>&1 &
PING=$!
sleep 0.5
kill -9 "${PID[b]}"
wait "${PID[b]}" 2>/dev/null || true
start_agent b 2
wait $PING || true
tail -n 2 "$WORK/ping.out"
grep -q " 0% packet loss" "$WORK/ping.out" || fail "ping over the overlay lost packets across the restart"
after=$(peers_of b)
[ "$before" = "$after" ] || fail "peers changed across the restart"
grep -q "adopted persisted mesh of cluster demo" "$WORK/b/agent.log" || fail "b did not adopt its mesh"
grep "adopted persisted mesh" "$WORK/b/agent.log" | tail -n 1
echo "interface adopted, peers unchanged, no packet lost"

say "SIGTERM agent c: the mesh stays up; then corrupt its state file and restart it"
kill -TERM "${PID[c]}"
wait "${PID[c]}" || fail "agent c did not exit 0 on SIGTERM"
grep -q "SIGTERM: stopping; the mesh stays up" "$WORK/c/agent.log" || fail "no SIGTERM log line"
ip netns exec "${NS[c]}" wg show "${IFN[c]}" >/dev/null || fail "interface of c gone after SIGTERM"
ip netns exec "${NS[a]}" ping -c 2 -i 0.2 -W 2 -q 10.42.0.3 >/dev/null || fail "a cannot reach c with c's agent stopped"
printf 'not json{' > "$WORK/c/state/state.json"
start_agent c 2
grep -q "is unusable (not valid JSON); moved it to" "$WORK/c/agent.log" || fail "no log line for the corrupt state"
grep "is unusable" "$WORK/c/agent.log" | tail -n 1
grep -q "state rebuilt from live interface ${IFN[c]}: 2 peers kept" "$WORK/c/agent.log" || fail "c did not rebuild from the kernel's view"
ip netns exec "${NS[c]}" ping -c 2 -i 0.2 -W 2 -q 10.42.0.1 >/dev/null || fail "c lost the overlay"
ip netns exec "${NS[a]}" ping -c 2 -i 0.2 -W 2 -q 10.42.0.3 >/dev/null || fail "a cannot reach c"
echo "corrupt state survived, mesh intact"

say "done: 3 agents, cluster formed, restart invisible, corrupt state survived"
