# SPDX-License-Identifier: Apache-2.0
# cluster-verify: `fabric-agent cluster verify` between three daemons over
# real verbs, each on its own soft-RoCE device behind one bridge (three
# machines on a switch). The mesh formed by `cluster form` passes the
# overlay check; every pair is measured through the daemons' probe
# endpoints in round-robin rounds and passes; each runner keeps its last
# result per peer and rail in /v1/status, /metrics and its state_dir, and
# still has it after a restart. A machine whose WireGuard port is closed
# (its mesh removed) is named. The default pass line (0.9 x the slower port) fails emulated RDMA
# as below_rate. A machine whose rail is black-holed (its veth taken off
# the bridge, the port still ACTIVE) fails with both others, and the
# re-measurement against a machine that passed names it as the bad end.
. "$LAB/lib.sh"

N=3
step "fabric: $N rxe devices on one bridge"
rxe_bridge $N
for ((i = 0; i < N; i++)); do note "n$i: ${RXB[i]} ${FBIP[i]} gid[${FBGID[i]}]"; done

w=/tmp/cv
mkdir -p "$w"
# One token for the set, as a control plane provisions it.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$w/token"
chmod 600 "$w/token"
start_daemon() {  # start_daemon I
  local i=$1
  mkdir -p "$w/n$i/state"
  cat > "$w/n$i/agent.yaml" <<EOC
listen: "127.0.0.1:$((7471 + i))"
state_dir: $w/n$i/state
token_file: $w/token
log_level: info
refresh_interval: 600s
provider_id: lab
fabric: {hcas: [${RXB[i]}]}
overlay: {interface: wgv$i, listen_port: $((51820 + i))}
pods: {socket: $w/n$i/pods.sock, cdi_dir: ""}
EOC
  : > "$LAB_OUT/daemon$i.log"
  bg_start "daemon$i" fabric-agent run --config "$w/n$i/agent.yaml"
  retry 300 0.2 grep -q "ready (generation" "$LAB_OUT/daemon$i.log" || { bg_log "daemon$i"; fail "daemon n$i not ready"; }
}
url() { echo "http://127.0.0.1:$((7471 + $1))"; }
api() { curl -sf -H "Authorization: Bearer $(cat "$w/token")" "$(url "$1")$2"; }
AGENTS=()
for ((i = 0; i < N; i++)); do
  start_daemon "$i"
  AGENTS+=(--agent "$(url "$i")")
done
for ((i = 0; i < N; i++)); do
  assert_eq "$(api "$i" /v1/status | jq -r '.inspect.fabric.ports | join(",")')" "${RXB[i]}:1" "n$i fabric ports"
done

step "cluster form: the overlay"
assert_cmd "cluster form" fabric-agent cluster form "${AGENTS[@]}" --token-file "$w/token" --cluster-id lab --timeout 60

step "cluster verify: overlay, $N machines in round-robin rounds over real verbs"
# Emulated RDMA runs ~0.1-0.3 Gb/s on a port the kernel rates 10 Gb/s: the
# pass line is lowered to what emulation reaches.
rc=0
fabric-agent cluster verify "${AGENTS[@]}" --token-file "$w/token" --min-fraction 0.0001 --duration 2 \
  --latency-iters 200 --json "$w/v1.json" > "$w/v1.out" 2> "$w/v1.err" || rc=$?
cat "$w/v1.err" "$w/v1.out"
assert_eq "$rc" 0 "verify exit status"
j() { jq -r "$2" "$1"; }
assert_eq "$(j "$w/v1.json" .passed)" true "passed"
assert_eq "$(j "$w/v1.json" '.rounds | length')" 3 "rounds (N odd: N)"
assert_eq "$(j "$w/v1.json" '.results | length')" 3 "pairs x rails measured"
assert_eq "$(j "$w/v1.json" '[.results[] | select(.status == "ok" and .gbps > 0)] | length')" 3 "pairs ok with Gb/s > 0"
assert_eq "$(j "$w/v1.json" '[.results[] | select(.latency_us.p50 <= .latency_us.p90 and .latency_us.p90 <= .latency_us.p99 and .latency_us.p99 <= .latency_us.max)] | length')" 3 "p50 <= p90 <= p99 <= max"
assert_eq "$(j "$w/v1.json" '.results[0].runner.gid_index')" "$(api 0 /v1/status | jq -r '.inspect.nccl_env.NCCL_IB_GID_INDEX')" "runner's GID index = its NCCL_IB_GID_INDEX"
assert_eq "$(j "$w/v1.json" '.overlay.ok')" true "overlay: every pair reachable"
assert_contains "$(cat "$w/v1.out")" "verify: PASS" "the verdict line"
assert_contains "$(cat "$w/v1.err")" "[round 3/3]" "progress lines"
note "verify wall time $(j "$w/v1.json" .seconds) s, measuring $(j "$w/v1.json" .measure_seconds) s"
note "Gb/s: $(j "$w/v1.json" '[.results[].gbps] | map(tostring) | join(" ")')"
assert_not_contains "$(cat "$w/v1.err" "$w/v1.out" "$w/v1.json" "$LAB_OUT"/daemon*.log)" "$(cat "$w/token")" "no token in output"

step "each runner's scorecard: status, metrics, state_dir, across a restart"
runner=$(j "$w/v1.json" '.results[0].runner.machine')
r=${runner#n}
peer_ip=${FBIP[$(j "$w/v1.json" '.results[0].server.machine | ltrimstr("n")')]}
api "$r" /v1/status > "$w/st.json"
assert_eq "$(jq -r --arg p "$peer_ip" '.scorecard.results[] | select(.peer == $p) | .status' "$w/st.json")" ok "n$r's scorecard for $peer_ip"
assert_eq "$(jq -r --arg p "$peer_ip" '.scorecard.results[] | select(.peer == $p) | .rail' "$w/st.json")" "${RXB[r]}:1" "the rail"
m=$(api "$r" /metrics)
assert_contains "$m" "fabric_agent_rail_status{peer=\"$peer_ip\",rail=\"${RXB[r]}:1\"} 2" "metrics: rail status"
assert_contains "$m" "fabric_agent_rail_bandwidth_bytes_per_second{peer=\"$peer_ip\",rail=\"${RXB[r]}:1\"}" "metrics: bandwidth"
assert_contains "$m" "fabric_agent_rail_latency_seconds{peer=\"$peer_ip\",rail=\"${RXB[r]}:1\",stat=\"p99\"}" "metrics: latency"
assert_eq "$(jq -r --arg p "$peer_ip" '.results[] | select(.peer == $p) | .status' "$w/n$r/state/scorecard.json")" ok "state_dir/scorecard.json"
kill "${_LAB_BG[daemon$r]}"
wait "${_LAB_BG[daemon$r]}" || true
unset "_LAB_BG[daemon$r]"
start_daemon "$r"
assert_eq "$(api "$r" /v1/status | jq -r --arg p "$peer_ip" '.scorecard.results[] | select(.peer == $p) | .status')" ok "scorecard after a restart"

step "a closed overlay port is named"
# n2 stops listening on its WireGuard port (its mesh removed; the daemon
# would restore an interface deleted under it). n0 and n1 still hold a
# handshake with n2 younger than 180 s: only n2's own view tells.
curl -sf -X DELETE -H "Authorization: Bearer $(cat "$w/token")" "$(url 2)/v1/mesh" > /dev/null
rc=0
fabric-agent cluster verify "${AGENTS[@]}" --token-file "$w/token" --min-fraction 0.0001 --duration 1 \
  --latency-iters 50 --json "$w/v2.json" > "$w/v2.out" 2> "$w/v2.err" || rc=$?
cat "$w/v2.err" "$w/v2.out"
assert_eq "$rc" 1 "verify exit status"
assert_eq "$(j "$w/v2.json" '[.overlay.closed[].machine] | join(",")')" n2 "closed overlay port"
assert_contains "$(cat "$w/v2.out")" "closed overlay port: n2 ($(url 2)) UDP 51822" "named in the report"
assert_eq "$(j "$w/v2.json" '[.results[] | select(.status != "ok")] | length')" 0 "RDMA still passes"

step "the default pass line: 0.9 x the slower port fails emulated RDMA as below_rate"
rc=0
fabric-agent cluster verify --agent "$(url 0)" --agent "$(url 1)" --token-file "$w/token" --no-overlay --duration 1 \
  --latency-iters 50 --json "$w/v3.json" > "$w/v3.out" 2> "$w/v3.err" || rc=$?
cat "$w/v3.out"
assert_eq "$rc" 1 "verify exit status"
assert_eq "$(j "$w/v3.json" '.results[0].status + " " + .results[0].reason')" "degraded below_rate" "status and reason"
assert_gt "$(j "$w/v3.json" '[.machines[].rails[0].rate_gbps] | min')" 0 "the slower port's rate, as the kernel reports it"
assert_eq "$(j "$w/v3.json" '.results[0].pass_gbps == 0.9 * ([.machines[].rails[0].rate_gbps] | min)')" true "pass line = 0.9 x the slower port"

step "a black-holed rail on n2 is named as the bad end"
ip link set fb2p nomaster
rc=0
fabric-agent cluster verify "${AGENTS[@]}" --token-file "$w/token" --no-overlay --min-fraction 0.0001 --duration 1 \
  --latency-iters 50 --json "$w/v4.json" > "$w/v4.out" 2> "$w/v4.err" || rc=$?
cat "$w/v4.err" "$w/v4.out"
assert_eq "$rc" 1 "verify exit status"
assert_eq "$(j "$w/v4.json" '[.results[] | select(.status == "ok") | .runner.machine + "-" + .server.machine] | join(",")')" \
  "$(j "$w/v4.json" '[.results[] | select(.runner.machine != "n2" and .server.machine != "n2") | .runner.machine + "-" + .server.machine] | join(",")')" \
  "only the pair without n2 passes"
assert_eq "$(j "$w/v4.json" '[.results[] | select(.status == "failed")] | length')" 2 "both pairs with n2 failed"
assert_eq "$(j "$w/v4.json" '[.bad_ends[] | .machine + " " + .hca] | join(",")')" "n2 ${RXB[2]}:1" "bad end"
assert_eq "$(j "$w/v4.json" '[.remeasured[] | select(.runner.machine == "n2") | .status] | unique | join(",")')" failed "n2 re-measured against a good machine: failed"
assert_contains "$(cat "$w/v4.out")" "bad end: n2 ($(url 2)) rail 0 ${RXB[2]}:1" "named in the report"
