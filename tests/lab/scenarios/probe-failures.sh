# SPDX-License-Identifier: Apache-2.0
# probe-failures: the RDMA link probe classifies its failures and its server
# survives them. No listener -> peer_refused; no route -> no_route; an empty
# GID slot and a GID of the wrong family -> qp_rtr_failed; the client killed
# mid-run -> the server logs a classified reason and the next run succeeds;
# the server killed mid-run -> the client fails with a classified reason.
# Not here: retry_exceeded from a path that drops RDMA. A blackhole route
# does not reach rxe (it caches the route in the QP) and shrinking the veth
# MTU under a running QP soft-locks Debian 6.1's rxe. So does dropping RoCE
# with a tc filter on the sending veth (u32 on UDP port 4791): with the probe's retry count of 7, which rxe takes as "retry
# forever", the client failed as `timeout` after its --timeout in 11 of 13
# runs and hung the VM in the other 2 (one showing "BUG: soft lockup -
# CPU#0 stuck for 23s! [fabric-agent]", the client in state R in the
# kernel); with a count of 6 it soft-locked in its retry-exceeded path at
# once. The completion status mapping is unit-tested
# (tests/rdma/classify_test.cpp).
. "$LAB/lib.sh"

rxe_pair
A=(--hca "$RXE_A:1" --gid-index "$GID_A")
reason() { jq -r '.status + " " + (.reason // "null")' "$1"; }
# Sessions the server has started so far, and "one more started since N".
sessions() { grep -c "probe session from [0-9.:]*$" "$LAB_OUT/server.log" || true; }
started_since() { [ "$(sessions)" -gt "$1" ]; }

step "no listener: peer_refused"
rc=0
fabric-agent probe rdma run --peer "$IP_B:18599" "${A[@]}" --json > "$LAB_OUT/refused.json" || rc=$?
assert_eq "$rc" 1 "exit status"
assert_eq "$(reason "$LAB_OUT/refused.json")" "failed peer_refused" "status and reason"

step "no route to the peer: no_route"
rc=0
fabric-agent probe rdma run --peer 203.0.113.9 "${A[@]}" --json > "$LAB_OUT/noroute.json" || rc=$?
assert_eq "$rc" 1 "exit status"
assert_eq "$(reason "$LAB_OUT/noroute.json")" "failed no_route" "status and reason"

step "probe server on $RXE_B"
bg_start server fabric-agent probe rdma serve --bind "$IP_B" --hca "$RXE_B:1" --gid-index "$GID_B"
retry 60 0.25 grep -q serving "$LAB_OUT/server.log"

step "empty GID slot: qp_rtr_failed"
rc=0
fabric-agent probe rdma run --peer "$IP_B" --hca "$RXE_A:1" --gid-index 9 --json > "$LAB_OUT/empty.json" || rc=$?
jq -M -c '{status, reason, message}' "$LAB_OUT/empty.json"
assert_eq "$(reason "$LAB_OUT/empty.json")" "failed qp_rtr_failed" "status and reason"

step "GID of the wrong family (link-local IPv6 against the peer's IPv4): qp_rtr_failed"
ll_index=""
for g in /sys/class/infiniband/$RXE_A/ports/1/gids/*; do
  read -r v < "$g" || continue
  case "$v" in fe80:*) ll_index=${g##*/}; break ;; esac
done
[ -n "$ll_index" ] || fail "no link-local GID on $RXE_A"
note "$RXE_A link-local GID index $ll_index"
rc=0
fabric-agent probe rdma run --peer "$IP_B" --hca "$RXE_A:1" --gid-index "$ll_index" --duration 1 --timeout 5 \
  --json > "$LAB_OUT/family.json" || rc=$?
jq -M -c '{status, reason, message}' "$LAB_OUT/family.json"
assert_eq "$rc" 1 "exit status"
assert_eq "$(reason "$LAB_OUT/family.json")" "failed qp_rtr_failed" "status and reason"

step "client killed mid-run: the server logs a reason and keeps serving"
n0=$(sessions)
fabric-agent probe rdma run --peer "$IP_B" "${A[@]}" --duration 60 --json > "$LAB_OUT/victim.json" 2>&1 &
victim=$!
# Kill it inside the bandwidth phase: once the server has started its session.
retry 80 0.25 started_since "$n0"
sleep 2
kill -9 "$victim"
wait "$victim" 2>/dev/null || true
retry 40 0.25 grep -q "probe session from $IP_A:[0-9]*: peer_closed" "$LAB_OUT/server.log"
grep "probe session" "$LAB_OUT/server.log" | tail -n 2

step "the same server serves the next probe"
rc=0
fabric-agent probe rdma run --peer "$IP_B" "${A[@]}" --duration 1 --latency-iters 100 --json > "$LAB_OUT/again.json" || rc=$?
jq -M -c '{status, reason, gbps, latency_us}' "$LAB_OUT/again.json"
assert_eq "$rc" 0 "exit status"
assert_match "$(jq -r .status "$LAB_OUT/again.json")" '^(ok|degraded)$' "status"
assert_gt "$(jq -r .gbps "$LAB_OUT/again.json")" 0 "gbps"

step "server killed mid-run: the client fails with a classified reason"
bg_start server2 fabric-agent probe rdma serve --bind "$IP_B" --port 18521 --hca "$RXE_B:1" --gid-index "$GID_B"
retry 60 0.25 grep -q serving "$LAB_OUT/server2.log"
fabric-agent probe rdma run --peer "$IP_B:18521" "${A[@]}" --duration 60 --timeout 10 --json > "$LAB_OUT/orphan.json" &
orphan=$!
retry 80 0.25 grep -q "probe session from" "$LAB_OUT/server2.log"
sleep 2
kill -9 "${_LAB_BG[server2]}"
rc=0
wait "$orphan" || rc=$?
jq -M -c '{status, reason, message}' "$LAB_OUT/orphan.json"
assert_eq "$rc" 1 "exit status"
assert_match "$(reason "$LAB_OUT/orphan.json")" '^failed (peer_closed|retry_exceeded|remote_error)$' "status and reason"
