# SPDX-License-Identifier: Apache-2.0
# The renter's job in the provider lab: the main process of a whole-machine
# container (podman run --device fabric-agent.io/rdma=all), so it has what the
# job of a renter gets: the CDI env, the memlock limit the hook raised, wg0.
# It runs the product page's checks, then an RDMA transfer to the other
# machine's container over NCCL_IB_HCA / NCCL_IB_GID_INDEX, with the
# connection set up over the overlay (NCCL_SOCKET_IFNAME, as NCCL
# bootstraps), writes what it saw to /out and holds the fabric until
# /out/stop appears. Both run the image's sshd (the files the OCI hook wrote
# from PUT /v1/login); the client then logs in to the other node with ssh,
# as a renter does, with no prompt allowed. LAB_PEER: the other node's
# overlay address; LAB_ROLE: server | client (ib_write_bw's).
out=/out
# The image's own sshd and its stock sshd_config (which includes the hook's
# sshd_config.d drop-in); -E: its log where the host reads it.
mkdir -p /run/sshd
/usr/sbin/sshd -E $out/sshd.log
ip -4 addr show wg0 > $out/addr 2>&1
wg show wg0 > $out/wg 2>&1
ls /dev/infiniband > $out/ib 2>&1
env | grep '^NCCL_' | sort > $out/env
grep 'Max locked memory' /proc/self/limits > $out/limits
ping -c 3 -w 30 "$LAB_PEER" > $out/ping 2>&1
echo $? > $out/ping.rc
if [ "$LAB_ROLE" = client ]; then
  # BatchMode: no password or passphrase prompt; StrictHostKeyChecking=yes: no
  # host key learnt on first use, only the rental's CA vouches for the peer.
  # Retried while the peer's container may not have started sshd yet.
  set -- -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=10 "$LAB_PEER"
  tries=0
  while :; do
    ssh "$@" 'hostname; id -u' > $out/ssh 2> $out/ssh.err
    rc=$?
    [ $rc -eq 0 ] || [ $tries -ge 10 ] && break
    tries=$((tries + 1))
    sleep 2
  done
  echo $rc > $out/ssh.rc
  ssh "$@" env 2>> $out/ssh.err | grep '^NCCL_' | sort > $out/ssh-env
fi
touch $out/checked

hca=${NCCL_IB_HCA#=}
hca=${hca%%,*}
dev=${hca%%:*}
port=${hca#*:}
[ "$port" != "$hca" ] || port=1
echo "$dev $port ${NCCL_IB_GID_INDEX:-}" > $out/rdma-target
set -- -d "$dev" -i "$port" -x "${NCCL_IB_GID_INDEX:-0}" -F -D 2
# As PID 1 of the container, sh ignores SIGTERM unless it has a handler: the
# machine's shutdown (the reboot fault) would wait 90 s for SIGKILL. Children
# run in the background so that the handler runs at once.
trap 'exit 0' TERM
if [ "$LAB_ROLE" = server ]; then
  # Serves until stopped: the client runs again when perftest's clock
  # calibration failed on a busy host ("Correlation coefficient ... < 0.9",
  # all figures 0), which is no RDMA failure.
  while [ ! -e $out/stop ]; do
    ib_write_bw "$@" > $out/bw.tmp 2>&1 &
    wait $!
    echo $? > $out/bw.rc
    mv $out/bw.tmp $out/bw
    touch $out/done
  done
else
  tries=0 calib=0 rc=1
  while [ $tries -lt 60 ]; do
    tries=$((tries + 1))
    ib_write_bw "$@" "$LAB_PEER" > $out/bw 2>&1 &
    wait $!
    rc=$?
    if [ $rc -ne 0 ]; then sleep 1; continue; fi   # the server does not listen yet
    grep -q 'Correlation coefficient' $out/bw && [ $calib -lt 3 ] && { calib=$((calib + 1)); continue; }
    break
  done
  echo $rc > $out/bw.rc
  touch $out/done
fi
while [ ! -e $out/stop ]; do sleep 1 & wait $!; done
