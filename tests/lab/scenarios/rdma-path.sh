# SPDX-License-Identifier: Apache-2.0
# rdma-path: RDMA WRITE traffic (perftest's ib_write_bw) passes between two
# soft-RoCE devices over the exact RoCE v2 GIDs of their addresses: the path
# the RDMA link probe uses is real. Emulated RDMA is slow (~0.3 Gb/s), so
# only "it ran and moved data" is asserted, never a speed.
. "$LAB/lib.sh"

step "two rxe devices on one veth pair"
rxe_pair
note "$RXE_A on $IF_A $IP_A (RoCE v2 GID index $GID_A), $RXE_B on $IF_B $IP_B (index $GID_B)"
assert_eq "$(cat /sys/class/infiniband/$RXE_A/ports/1/state)" "4: ACTIVE" "$RXE_A port state"
assert_eq "$(cat /sys/class/infiniband/$RXE_B/ports/1/state)" "4: ACTIVE" "$RXE_B port state"
assert_eq "$(cat /sys/class/infiniband/$RXE_A/ports/1/gids/$GID_A)" "$(ipv4_gid "$IP_A")" "$RXE_A GID $GID_A"

step "ib_write_bw $RXE_B (server) <- $RXE_A (client)"
# -F: no CPU-frequency check (meaningless in a VM); 200 x 64 KiB keeps it short.
opts=(-F -s 65536 -n 200 --report_gbits)
bg_start server ib_write_bw -d "$RXE_B" -i 1 -x "$GID_B" "${opts[@]}"
# The server needs a moment to listen on its out-of-band TCP port.
rc=0
retry 20 0.5 ib_write_bw -d "$RXE_A" -i 1 -x "$GID_A" "${opts[@]}" "$IP_B" > "$LAB_OUT/client.log" 2>&1 || rc=$?
cat "$LAB_OUT/client.log"
assert_eq "$rc" 0 "ib_write_bw client exit status"
srv_rc=0; bg_wait server || srv_rc=$?
[ "$srv_rc" -eq 0 ] || bg_log server
assert_eq "$srv_rc" 0 "ib_write_bw server exit status"

# The result line follows the "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] ..." header.
line=$(awk '/#bytes/ { getline; print; exit }' "$LAB_OUT/client.log")
read -r bytes iters peak avg _ <<< "$line"
assert_eq "$bytes" 65536 "message size"
assert_eq "$iters" 200 "iterations"
assert_gt "$avg" 0 "average bandwidth Gb/s"
read -r tx_a < /sys/class/infiniband/$RXE_A/ports/1/hw_counters/sent_pkts
assert_gt "$tx_a" 0 "$RXE_A sent_pkts counter"
# The data crossed the veth (not loopback): the routing in rxe_pair works.
read -r veth_tx < /sys/class/net/$IF_A/statistics/tx_bytes
assert_gt "$veth_tx" $((200 * 65536)) "$IF_A tx_bytes (>= the bytes written)"
