# SPDX-License-Identifier: Apache-2.0
# cluster-verify-rails: every rail, rail k to rail k. Two daemons with two
# soft-RoCE ports each (fabric.hcas), so NCCL_IB_HCA lists two rails per
# machine; `cluster verify` measures both over real verbs, each with its own
# devices, and with the second rail of n1 black-holed (its veth off the
# bridge, the port still ACTIVE) rail 1 fails while rail 0 passes: a check
# of the first port alone would have listed the pair.
. "$LAB/lib.sh"

step "fabric: 4 rxe devices on one bridge, two per daemon"
rxe_bridge 4
w=/tmp/cvr
mkdir -p "$w"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$w/token"
chmod 600 "$w/token"
for i in 0 1; do
  mkdir -p "$w/n$i/state"
  cat > "$w/n$i/agent.yaml" <<EOC
listen: "127.0.0.1:$((7471 + i))"
state_dir: $w/n$i/state
token_file: $w/token
refresh_interval: 600s
provider_id: lab
fabric: {hcas: [${RXB[i]}, ${RXB[i + 2]}]}
overlay: {interface: wgv$i, listen_port: $((51820 + i))}
pods: {socket: $w/n$i/pods.sock, cdi_dir: ""}
EOC
  bg_start "daemon$i" fabric-agent run --config "$w/n$i/agent.yaml"
done
api() { curl -sf -H "Authorization: Bearer $(cat "$w/token")" "http://127.0.0.1:$((7471 + $1))$2"; }
for i in 0 1; do
  retry 300 0.2 curl -sf "http://127.0.0.1:$((7471 + i))/healthz" > /dev/null || { bg_log "daemon$i"; fail "daemon n$i not serving"; }
  assert_eq "$(api "$i" /v1/status | jq -r '.inspect.nccl_env.NCCL_IB_HCA')" "=${RXB[i]}:1,${RXB[i + 2]}:1" "n$i NCCL_IB_HCA"
done
verify() {  # verify OUT
  local rc=0
  fabric-agent cluster verify --agent http://127.0.0.1:7471 --agent http://127.0.0.1:7472 --token-file "$w/token" \
    --no-overlay --min-fraction 0.0001 --duration 1 --latency-iters 50 --json "$1" > "$1.out" 2>&1 || rc=$?
  cat "$1.out"
  return "$rc"
}
rails() { jq -r '[.results[] | "\(.rail) \(.runner.hca)-\(.server.hca) \(.status)"] | join(",")' "$1"; }

step "both rails pass, rail k to rail k"
assert_cmd "verify" verify "$w/v1.json"
assert_eq "$(rails "$w/v1.json")" "0 ${RXB[0]}:1-${RXB[1]}:1 ok,1 ${RXB[2]}:1-${RXB[3]}:1 ok" "rails measured"
assert_eq "$(jq -r '[.results[] | select(.gbps > 0)] | length' "$w/v1.json")" 2 "Gb/s > 0 on each rail"
assert_eq "$(api 0 /v1/status | jq -r '[.scorecard.results[].rail] | join(",")')" "${RXB[0]}:1,${RXB[2]}:1" "n0's scorecard has both rails"

step "n1's second rail black-holed: rail 1 fails, rail 0 passes"
ip link set fb3p nomaster
rc=0
verify "$w/v2.json" || rc=$?
assert_eq "$rc" 1 "verify exit status"
assert_eq "$(jq -r '[.results[] | "\(.rail) \(.status)"] | join(",")' "$w/v2.json")" "0 ok,1 failed" "per rail"
assert_match "$(jq -r '.results[1].reason' "$w/v2.json")" '^(timeout|qp_rtr_failed|retry_exceeded)$' "rail 1 reason"
# Two machines: no third one to tell which end; the report says so.
assert_eq "$(jq -r '.verdicts[0].blame' "$w/v2.json")" undetermined "bad end with two machines"
assert_eq "$(api 0 /v1/status | jq -r --arg r "${RXB[2]}:1" '.scorecard.results[] | select(.rail == $r) | .status')" failed "n0's scorecard: rail 1 failed"
