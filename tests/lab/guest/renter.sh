# SPDX-License-Identifier: Apache-2.0
# The renter's job in the provider lab: the main process of a whole-machine
# container (podman run --device fabric-agent.io/rdma=all), so it has what the
# job of a renter gets: the CDI env, the memlock limit the hook raised, wg0.
# It runs the product page's checks, then an RDMA transfer to the other
# machine's container over NCCL_IB_HCA / NCCL_IB_GID_INDEX, with the
# connection set up over the overlay (NCCL_SOCKET_IFNAME, as NCCL
# bootstraps), writes what it saw to /out and holds the fabric until
# /out/stop appears. LAB_PEER: the other node's overlay address; LAB_ROLE:
# server | client (ib_write_bw's).
out=/out
ip -4 addr show wg0 > $out/addr 2>&1
wg show wg0 > $out/wg 2>&1
ls /dev/infiniband > $out/ib 2>&1
env | grep '^NCCL_' | sort > $out/env
grep 'Max locked memory' /proc/self/limits > $out/limits
ping -c 3 -w 30 "$LAB_PEER" > $out/ping 2>&1
echo $? > $out/ping.rc
touch $out/checked

hca=${NCCL_IB_HCA#=}
hca=${hca%%,*}
dev=${hca%%:*}
port=${hca#*:}
[ "$port" != "$hca" ] || port=1
echo "$dev $port ${NCCL_IB_GID_INDEX:-}" > $out/rdma-target
set -- -d "$dev" -i "$port" -x "${NCCL_IB_GID_INDEX:-0}" -F -D 2
rc=1
if [ "$LAB_ROLE" = server ]; then
  ib_write_bw "$@" > $out/bw 2>&1
  rc=$?
else
  # until the server listens (its container may start later)
  for i in $(seq 1 60); do
    ib_write_bw "$@" "$LAB_PEER" > $out/bw 2>&1
    rc=$?
    [ $rc -ne 0 ] || break
    sleep 1
  done
fi
echo $rc > $out/bw.rc
touch $out/done
while [ ! -e $out/stop ]; do sleep 1; done
