# SPDX-License-Identifier: Apache-2.0
# probe-rdma: `fabric-agent probe rdma serve` + `run` between two soft-RoCE
# devices over their RoCE v2 GIDs: the run succeeds with bandwidth > 0 and
# ordered latency percentiles, the result names the devices and GIDs used,
# and the bytes crossed the veth. Without --hca/--gid-index the probe takes
# discovery's fabric port and NCCL_IB_GID_INDEX. Then ib_write_bw on the same devices, GID
# and message size: both figures and their ratio are printed (the ratio is
# only sanity-checked here; the speed comparison proper is bench/rdma).
. "$LAB/lib.sh"

step "two rxe devices"
rxe_pair
note "$RXE_A $IP_A gid[$GID_A], $RXE_B $IP_B gid[$GID_B]"

step "probe server on $RXE_B"
bg_start server fabric-agent probe rdma serve --bind "$IP_B" --hca "$RXE_B:1" --gid-index "$GID_B"
retry 60 0.25 grep -q serving "$LAB_OUT/server.log"

step "probe run $RXE_A -> $IP_B"
read -r tx0 < "/sys/class/net/$IF_A/statistics/tx_bytes"
rc=0
fabric-agent probe rdma run --peer "$IP_B" --hca "$RXE_A:1" --gid-index "$GID_A" \
  --duration 3 --latency-iters 300 --json > "$LAB_OUT/run.json" || rc=$?
cat "$LAB_OUT/run.json"
assert_eq "$rc" 0 "probe run exit status"
j() { jq -r "$1" "$LAB_OUT/run.json"; }
assert_match "$(j .status)" '^(ok|degraded)$' "status"
assert_gt "$(j .gbps)" 0 "gbps"
assert_gt "$(j .bytes)" 0 "bytes"
assert_eq "$(j '.latency_us.p50 <= .latency_us.p90 and .latency_us.p90 <= .latency_us.p99 and .latency_us.p99 <= .latency_us.max')" true "p50 <= p90 <= p99 <= max"
assert_gt "$(j .latency_us.p50)" 0 "latency p50"
assert_eq "$(j .hca)" "$RXE_A" "hca"
assert_eq "$(j .gid_index)" "$GID_A" "gid_index"
assert_eq "$(j .gid)" "::ffff:$IP_A" "gid (the IPv4-mapped RoCE v2 GID)"
assert_eq "$(j .peer)" "$IP_B:18520" "peer"
read -r tx1 < "/sys/class/net/$IF_A/statistics/tx_bytes"
assert_gt "$((tx1 - tx0))" "$(j .bytes)" "$IF_A tx_bytes grew by at least the bytes written"

step "defaults from discovery: no --hca, no --gid-index"
# The probe must pick what NCCL will use: inspect's first fabric port and
# its NCCL_IB_GID_INDEX.
fabric-agent inspect --json > "$LAB_OUT/inspect.json" 2>/dev/null
want_hca=$(jq -r '.fabric.ports[0]' "$LAB_OUT/inspect.json")
want_gid=$(jq -r '.nccl_env.NCCL_IB_GID_INDEX' "$LAB_OUT/inspect.json")
note "inspect: first fabric port $want_hca, NCCL_IB_GID_INDEX $want_gid"
rc=0
fabric-agent probe rdma run --peer "$IP_B" --duration 1 --latency-iters 50 --json > "$LAB_OUT/defaults.json" || rc=$?
assert_eq "$rc" 0 "probe run without --hca/--gid-index: exit status"
assert_eq "$(jq -r '.hca + ":" + (.port | tostring)' "$LAB_OUT/defaults.json")" "$want_hca" "hca:port = inspect's first fabric port"
assert_eq "$(jq -r .gid_index "$LAB_OUT/defaults.json")" "$want_gid" "gid_index = NCCL_IB_GID_INDEX"
assert_gt "$(jq -r .gbps "$LAB_OUT/defaults.json")" 0 "gbps"

step "ib_write_bw on the same devices, GIDs and size"
opts=(-F -s 65536 -D 3 --report_gbits)
bg_start perf_server ib_write_bw -d "$RXE_B" -i 1 -x "$GID_B" "${opts[@]}"
rc=0
retry 20 0.5 ib_write_bw -d "$RXE_A" -i 1 -x "$GID_A" "${opts[@]}" "$IP_B" > "$LAB_OUT/perf.log" 2>&1 || rc=$?
cat "$LAB_OUT/perf.log"
assert_eq "$rc" 0 "ib_write_bw exit status"
bg_wait perf_server || true
line=$(awk '/#bytes/ { getline; print; exit }' "$LAB_OUT/perf.log")
read -r _ _ _ perf_avg _ <<< "$line"
ours=$(j .gbps)
ratio=$(awk -v a="$ours" -v b="$perf_avg" 'BEGIN { printf "%.3f", a / b }')
note "probe $ours Gb/s, ib_write_bw $perf_avg Gb/s, ratio $ratio"
echo "probe_gbps=$ours perftest_gbps=$perf_avg ratio=$ratio" > "$LAB_OUT/ratio.txt"
# Same path, same size. Under emulation on a shared host single rounds swing
# up to 4x, so this only catches a unit or scale error (bits/bytes, Mb/Gb,
# per-iteration vs total); the speed comparison is bench/rdma.
assert_gt "$ratio" 0.1 "probe / ib_write_bw ratio (lower sanity bound)"
assert_gt 10 "$ratio" "probe / ib_write_bw ratio (upper sanity bound)"
