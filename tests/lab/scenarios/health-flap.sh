# SPDX-License-Identifier: Apache-2.0
# health-flap: the daemon's health on a real kernel. A soft-RoCE port whose
# netdev goes down is port_down in /v1/status, /metrics and
# `fabric-agent check` (exit 1 naming it); the port going down wakes a long-poller
# waiting on the status; the port down and up again (each down longer than
# flap_down) is link_flapping after flap_count times; back up, check exits 0.
. "$LAB/lib.sh"

step "fabric: two rxe devices with ACTIVE ports"
rxe_pair
w=/tmp/hf
mkdir -p "$w/state"
cat > "$w/agent.yaml" <<EOC
listen: "127.0.0.1:7471"
state_dir: $w/state
log_level: info
refresh_interval: 1s
provider_id: lab
fabric: {hcas: [$RXE_A, $RXE_B]}
overlay: {interface: wg0}
pods: {socket: $w/pods.sock, cdi_dir: ""}
health: {flap_down: 2s, flap_count: 2, hold: 0s}
EOC
bg_start daemon fabric-agent run --config "$w/agent.yaml"
retry 150 0.2 grep -q "ready (generation" "$LAB_OUT/daemon.log" || { bg_log daemon; fail "daemon not ready"; }
printf 'Authorization: Bearer %s\n' "$(cat "$w/state/token")" > "$w/auth"
status() { curl -sf -H @"$w/auth" http://127.0.0.1:7471/v1/status; }
codes() { status | jq -r '[.health.conditions[] | .code + " " + .subject] | join(",")'; }

step "healthy: status, /metrics, check"
assert_eq "$(status | jq -r .health.healthy)" true "health.healthy"
assert_contains "$(curl -sf -H @"$w/auth" http://127.0.0.1:7471/metrics)" "fabric_agent_healthy 1" "metrics"
assert_cmd "check exits 0" fabric-agent check --config "$w/agent.yaml"

step "a long-poll on the status, then $IF_A down: it wakes with port_down $RXE_A:1"
etag=$(curl -sf -D - -o /dev/null -H @"$w/auth" http://127.0.0.1:7471/v1/status | tr -d '\r' | awk 'tolower($1)=="etag:" {print $2}')
[ -n "$etag" ] || fail "no ETag"
curl -s -o "$w/poll.json" -w '%{http_code}' -H @"$w/auth" -H "If-None-Match: $etag" \
  "http://127.0.0.1:7471/v1/status?wait=60" > "$w/poll.code" &
poll=$!
sleep 1
ip link set "$IF_A" down
t0=$(_lab_uptime)
wait "$poll"
note "the long-poll answered $(cat "$w/poll.code") after $(echo "$(_lab_uptime) $t0" | awk '{printf "%.1f", $1 - $2}') s"
assert_eq "$(cat "$w/poll.code")" 200 "long-poll answer"
# What woke it may be the discovery's view of the port a refresh before
# health judges it; the condition follows within a refresh.
retry 20 0.25 bash -c "curl -sf -H @$w/auth http://127.0.0.1:7471/v1/status | jq -e '.health.conditions[] | select(.code == \"port_down\" and .subject == \"$RXE_A:1\")' >/dev/null" \
  || { note "conditions: $(codes)"; fail "no port_down for $RXE_A:1"; }
assert_eq "$(status | jq -r .health.healthy)" false "health.healthy"
m=$(curl -sf -H @"$w/auth" http://127.0.0.1:7471/metrics)
assert_contains "$m" "fabric_agent_healthy 0" "metrics"
assert_contains "$m" "fabric_agent_health_condition_start_time_seconds{code=\"port_down\",subject=\"$RXE_A:1\"}" "metrics"
rc=0
out=$(fabric-agent check --config "$w/agent.yaml") || rc=$?
note "check: $out"
assert_eq "$rc" 1 "check exit status"
assert_contains "$out" "$RXE_A:1: port_down:" "check names the port"

step "down and up again: link_flapping after 2 downs of 2 s or more"
sleep 3
ip link set "$IF_A" up
retry 40 0.25 bash -c "! curl -sf -H @$w/auth http://127.0.0.1:7471/v1/status | jq -e '.health.conditions[] | select(.code == \"port_down\")' >/dev/null"
assert_not_contains "$(codes)" "link_flapping" "one flap is not flapping"
ip link set "$IF_A" down
sleep 3
ip link set "$IF_A" up
retry 40 0.25 bash -c "curl -sf -H @$w/auth http://127.0.0.1:7471/v1/status | jq -e '.health.conditions[] | select(.code == \"link_flapping\" and .subject == \"$RXE_A:1\")' >/dev/null" \
  || { note "conditions: $(codes)"; fail "no link_flapping for $RXE_A:1"; }
note "conditions: $(codes)"
note "evidence: $(status | jq -r '.health.conditions[] | select(.code == "link_flapping") | .evidence')"
grep "health:" "$LAB_OUT/daemon.log" | sed 's/^/   log: /'
assert_contains "$(grep 'health:' "$LAB_OUT/daemon.log")" "$RXE_A:1: link_flapping:" "logged"

step "up: check exits 0 (a single look has no history)"
rxe_wait_gid "$RXE_A" "$IP_A"
assert_cmd "check exits 0" fabric-agent check --config "$w/agent.yaml"
