# SPDX-License-Identifier: Apache-2.0
# smoke: the lab's kernel modules load and `fabric-agent inspect --json`, run
# against the real kernel, sees the soft-RoCE devices as a RoCE fabric with the
# netdev, segment, address and RoCE v2 GID index that sysfs and ibv_devinfo
# show, and keeps the rxe device on the default-route netdev out of NCCL.
. "$LAB/lib.sh"

step "kernel modules"
mods=$(cat /proc/modules)
for m in rdma_rxe ib_uverbs rdma_ucm ib_umad wireguard veth crc32_generic; do
  assert_contains "$mods" "$m " "/proc/modules"
done

step "fabric: rxe0/rxe1 on a veth pair in 192.168.77.0/24; uplink rxe_up on the default-route netdev"
rxe_pair
uplink_add
assert_contains "$(ip -4 route show default)" "dev $UP_IF" "default route"
for d in "$RXE_A" "$RXE_B" "$UP_RXE"; do
  assert_eq "$(cat /sys/class/infiniband/$d/ports/1/state)" "4: ACTIVE" "$d port state"
done

step "fabric-agent inspect --json"
command -v fabric-agent >/dev/null || fail "no fabric-agent in the guest (tests/lab/run --binary PATH)"
rc=0
fabric-agent inspect --json > "$LAB_OUT/inspect.json" 2> "$LAB_OUT/inspect.err" || rc=$?
[ "$rc" -eq 0 ] || { cat "$LAB_OUT/inspect.err"; fail "fabric-agent inspect --json exited $rc"; }
J=$LAB_OUT/inspect.json
jq -e . "$J" >/dev/null || { cat "$J"; fail "inspect --json is not JSON"; }
jq -r '.warnings[]? | "   warning: " + .' "$J"
{
  read -r kind; read -r netdev; read -r segment; read -r address; read -r ports
  read -r hca; read -r gidx; read -r sockif
} < <(jq -r '.fabric.kind, .fabric.netdev, .fabric.segment, .fabric.address,
             (.fabric.ports | join(",")), .nccl_env.NCCL_IB_HCA, .nccl_env.NCCL_IB_GID_INDEX,
             .nccl_env.NCCL_SOCKET_IFNAME' "$J")

assert_eq "$kind" roce "fabric.kind"
assert_eq "$segment" 192.168.77.0/24 "fabric.segment"
# The address the agent reports must be one the kernel has on that netdev.
kaddrs=$(ip -4 -o addr show dev "$netdev" 2>/dev/null | awk '{ print $4 }' | cut -d/ -f1 | tr '\n' ' ')
assert_contains " $kaddrs" " $address " "kernel addresses of fabric.netdev $netdev"
case "$netdev" in
  "$IF_A") fdev=$RXE_A ;;
  "$IF_B") fdev=$RXE_B ;;
  *) fail "fabric.netdev: expected $IF_A or $IF_B, got '$netdev'" ;;
esac
pass "fabric.netdev = $netdev (rxe device $fdev)"
assert_eq "$ports" "$RXE_A:1,$RXE_B:1" "fabric.ports"
assert_eq "$hca" "=$RXE_A:1,$RXE_B:1" "NCCL_IB_HCA"
assert_not_contains "$hca" "$UP_RXE" "NCCL_IB_HCA (the default-route netdev's rxe device)"
assert_eq "$sockif" wg0 "NCCL_SOCKET_IFNAME"

step "NCCL_IB_GID_INDEX against sysfs and ibv_devinfo -v"
want=$(gid_index "$fdev" 1 "$address") || fail "sysfs: no RoCE v2 GID ::ffff:$address on $fdev port 1"
note "sysfs: $fdev ports/1/gids/$want = $(cat /sys/class/infiniband/$fdev/ports/1/gids/$want)," \
  "types/$want = $(cat /sys/class/infiniband/$fdev/ports/1/gid_attrs/types/$want)"
assert_eq "$gidx" "$want" "NCCL_IB_GID_INDEX (sysfs index of ::ffff:$address, RoCE v2)"
# ibv_devinfo -v prints "GID[  3]:  ::ffff:192.168.77.1, RoCE v2".
ibv_devinfo -v -d "$fdev" > "$LAB_OUT/ibv_devinfo.txt"
dv=$(sed -n "s/^[[:space:]]*GID\[ *$gidx\]:[[:space:]]*//p" "$LAB_OUT/ibv_devinfo.txt")
assert_eq "$dv" "::ffff:$address, RoCE v2" "ibv_devinfo -v -d $fdev GID[$gidx]"
# NCCL takes one index for all its HCAs: it must be right on the other port too.
for d in "$RXE_A" "$RXE_B"; do
  [ "$d" = "$RXE_A" ] && ip=$IP_A || ip=$IP_B
  assert_eq "$(gid_index "$d" 1 "$ip")" "$gidx" "$d RoCE v2 GID index of $ip"
done

step "inspect's HCA table against sysfs"
for d in "$RXE_A" "$RXE_B" "$UP_RXE"; do
  sysnd=$(cat /sys/class/infiniband/$d/ports/1/gid_attrs/ndevs/0 2>/dev/null || true)
  { read -r st; read -r ll; read -r nd; } < <(jq -r --arg d "$d" \
    '.hcas[] | select(.name == $d) | .ports[] | select(.port == 1) | .state, .link_layer, .netdev' "$J")
  assert_eq "${st:-}" ACTIVE "$d port 1 state"
  assert_eq "${ll:-}" Ethernet "$d port 1 link_layer"
  assert_eq "${nd:-}" "$sysnd" "$d port 1 netdev"
  # Every GID inspect lists is the kernel's, with the kernel's type.
  n=0
  while read -r i g t; do
    read -r kg < "/sys/class/infiniband/$d/ports/1/gids/$i"
    read -r kt < "/sys/class/infiniband/$d/ports/1/gid_attrs/types/$i"
    assert_eq "$g $t" "$kg ${kt// /_}" "$d GID $i (gid type)" >/dev/null
    n=$((n + 1))
  done < <(jq -r --arg d "$d" '.hcas[] | select(.name == $d) | .ports[] | select(.port == 1) | .gids[] |
                               "\(.index) \(.gid) \(.type | gsub(" "; "_"))"' "$J")
  assert_gt "$n" 0 "$d: GIDs listed by inspect, all equal to sysfs"
  # ... and none missing: ibv_devinfo -v lists every valid GID of the port.
  assert_eq "$n" "$(ibv_devinfo -v -d "$d" | grep -c 'GID\[')" "$d: number of GIDs (inspect vs ibv_devinfo -v)"
done

step "fabric-agent inspect (table) runs"
assert_cmd "fabric-agent inspect" fabric-agent inspect
