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
# 200 x 64 KiB keeps it short (emulated RDMA runs at ~0.3 Gb/s).
rc=0
perf_pair ib_write_bw "$RXE_B" "$GID_B" "$RXE_A" "$GID_A" "$IP_B" -s 65536 -n 200 --report_gbits || rc=$?
assert_eq "$rc" 0 "ib_write_bw client and server exit status"
read -r bytes iters peak avg _ <<< "$PERF_LINE"
assert_eq "$bytes" 65536 "message size"
assert_eq "$iters" 200 "iterations"
assert_gt "$avg" 0 "average bandwidth Gb/s"
read -r tx_a < /sys/class/infiniband/$RXE_A/ports/1/hw_counters/sent_pkts
assert_gt "$tx_a" 0 "$RXE_A sent_pkts counter"
# The data crossed the veth (not loopback): the routing in rxe_pair works.
read -r veth_tx < /sys/class/net/$IF_A/statistics/tx_bytes
assert_gt "$veth_tx" $((200 * 65536)) "$IF_A tx_bytes (>= the bytes written)"
