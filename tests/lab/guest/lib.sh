# SPDX-License-Identifier: Apache-2.0
# Helpers for lab scenarios (bash, inside the VM). A scenario starts with
#   . "$LAB/lib.sh"
# and then uses the functions below. docs/lab.md describes them.
#
# Process creation is slow under emulation (TCG): the helpers write sysctls
# through /proc with shell builtins and spawn as few programs as they can.
set -eEuo pipefail

LAB=${LAB:-/lab}
LAB_OUT=${LAB_OUT:-$LAB/out}
LAB_FILES=${LAB_FILES:-$LAB/files}
mkdir -p "$LAB_OUT" 2>/dev/null || true

# ------------------------------------------------------------ reporting
_lab_uptime() { local u _; read -r u _ < /proc/uptime; echo "$u"; }
_LAB_T0=$(_lab_uptime)
_lab_elapsed() { local u; u=$(_lab_uptime); echo "$u $_LAB_T0" | awk '{ printf "%.1f", $1 - $2 }'; }

# step TEXT: a heading with the time since the scenario started.
step() { printf '\n== [%ss] %s\n' "$(_lab_elapsed)" "$*"; }
pass() { printf 'ok: %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
note() { printf '   %s\n' "$*"; }

# A failing command outside an assertion names itself and its line.
_lab_on_err() {
  local rc=$1 cmd=$2 line=$3 src=${4:-scenario}
  printf 'FAIL: command exited %s at %s:%s: %s\n' "$rc" "${src##*/}" "$line" "$cmd" >&2
}
trap '_lab_on_err $? "$BASH_COMMAND" "$LINENO" "${BASH_SOURCE[0]:-}"' ERR

# ------------------------------------------------------------ assertions
# assert_eq ACTUAL EXPECTED WHAT
assert_eq() {
  [ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"
  pass "$3 = '$1'"
}
# assert_ne ACTUAL UNEXPECTED WHAT
assert_ne() {
  [ "$1" != "$2" ] || fail "$3: must not be '$2'"
  pass "$3 = '$1' (not '$2')"
}
# assert_match ACTUAL ERE WHAT
assert_match() {
  [[ "$1" =~ $2 ]] || fail "$3: '$1' does not match /$2/"
  pass "$3 = '$1' (matches /$2/)"
}
# assert_contains HAYSTACK NEEDLE WHAT  (fixed string)
assert_contains() {
  [[ "$1" == *"$2"* ]] || fail "$3: '$2' not found in: $1"
  pass "$3 contains '$2'"
}
# assert_not_contains HAYSTACK NEEDLE WHAT
assert_not_contains() {
  [[ "$1" != *"$2"* ]] || fail "$3: '$2' must not be in: $1"
  pass "$3 does not contain '$2'"
}
# assert_gt ACTUAL LIMIT WHAT  (numbers, decimals allowed)
assert_gt() {
  [[ "$1" =~ ^-?[0-9]+(\.[0-9]+)?$ ]] || fail "$3: '$1' is not a number"
  awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }' || fail "$3: $1 is not > $2"
  pass "$3 = $1 (> $2)"
}
# assert_cmd WHAT CMD...: CMD must exit 0; its output is shown when it does not.
assert_cmd() {
  local what=$1 out rc=0; shift
  out=$("$@" 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || { printf '%s\n' "$out" >&2; fail "$what: '$*' exited $rc"; }
  pass "$what"
}
# assert_fails WHAT CMD...: CMD must exit non-zero.
assert_fails() {
  local what=$1 rc=0; shift
  "$@" >/dev/null 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || fail "$what: '$*' succeeded but must fail"
  pass "$what (exit $rc)"
}

# retry TRIES DELAY CMD...: CMD until it succeeds; the last status otherwise.
retry() {
  local n=$1 d=$2 i rc=0; shift 2
  for ((i = 1; i <= n; i++)); do
    rc=0; "$@" && return 0 || rc=$?
    [ "$i" -eq "$n" ] || sleep "$d"
  done
  return "$rc"
}

# ------------------------------------------------------------ background jobs
# bg_start NAME CMD...: runs CMD in the background, output in $LAB_OUT/NAME.log.
# bg_wait NAME: waits for it and returns its status. Leftovers die at exit.
declare -A _LAB_BG=()
bg_start() {
  local name=$1; shift
  "$@" > "$LAB_OUT/$name.log" 2>&1 &
  _LAB_BG[$name]=$!
}
bg_wait() {
  local rc=0
  wait "${_LAB_BG[$1]}" || rc=$?
  unset "_LAB_BG[$1]"
  return "$rc"
}
bg_log() { cat "$LAB_OUT/$1.log"; }
_lab_on_exit() {
  local n
  for n in "${!_LAB_BG[@]}"; do kill "${_LAB_BG[$n]}" 2>/dev/null || true; done
}
trap _lab_on_exit EXIT

# ------------------------------------------------------------ sysctl
# sysctl_set KEY VALUE: KEY as in sysctl(8), e.g. net.ipv4.conf.all.rp_filter.
sysctl_set() { echo "$2" > "/proc/sys/${1//.//}"; }

# ------------------------------------------------------------ nodes
# A "node" is a network namespace; "host" (or "") is the initial namespace.
_ip() { local ns=$1; shift; if [ -z "$ns" ] || [ "$ns" = host ]; then ip "$@"; else ip -n "$ns" "$@"; fi; }

# node_add NAME: a namespace with loopback up.
node_add() {
  ip netns add "$1"
  ip -n "$1" link set lo up
}
# on NODE CMD...: runs CMD in NODE ("host" = initial namespace).
on() {
  local ns=$1; shift
  if [ -z "$ns" ] || [ "$ns" = host ]; then "$@"; else ip netns exec "$ns" "$@"; fi
}
# link_nodes NODE_A IF_A ADDR_A NODE_B IF_B ADDR_B: a veth pair, one end in
# each node, addresses in CIDR form ("" for none), both ends up.
link_nodes() {
  local na=$1 ia=$2 aa=$3 nb=$4 ib=$5 ab=$6
  ip link add "$ia" type veth peer name "$ib"
  if [ -n "$na" ] && [ "$na" != host ]; then ip link set "$ia" netns "$na"; fi
  if [ -n "$nb" ] && [ "$nb" != host ]; then ip link set "$ib" netns "$nb"; fi
  [ -z "$aa" ] || _ip "$na" addr add "$aa" dev "$ia"
  [ -z "$ab" ] || _ip "$nb" addr add "$ab" dev "$ib"
  _ip "$na" link set "$ia" up
  _ip "$nb" link set "$ib" up
}

# ------------------------------------------------------------ RDMA (soft-RoCE)
# rxe_add NAME NETDEV: an rxe device on NETDEV (initial namespace).
rxe_add() {
  rdma link add "$1" type rxe netdev "$2"
}

# ipv4_gid A.B.C.D: the IPv4-mapped GID as sysfs writes it.
ipv4_gid() {
  local IFS=. a b c d
  read -r a b c d <<< "$1"
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "$a" "$b" "$c" "$d"
}

# gid_index DEV PORT A.B.C.D [TYPE]: the index of the GID ::ffff:A.B.C.D
# with TYPE ("RoCE v2" unless given) in DEV's port, from sysfs; fails when
# there is none.
gid_index() {
  local dev=$1 port=$2 want type=${4:-RoCE v2} f i g t
  want=$(ipv4_gid "$3")
  for f in /sys/class/infiniband/"$dev"/ports/"$port"/gids/*; do
    i=${f##*/}
    read -r g < "$f" 2>/dev/null || continue
    [ "$g" = "$want" ] || continue
    read -r t < "/sys/class/infiniband/$dev/ports/$port/gid_attrs/types/$i" 2>/dev/null || continue
    [ "$t" = "$type" ] && { echo "$i"; return 0; }
  done
  return 1
}

# rxe_wait_gid DEV A.B.C.D: waits (up to ~10 s) until the RoCE v2 GID of the
# address shows in DEV's GID table (the kernel fills it asynchronously).
rxe_wait_gid() {
  retry 50 0.2 gid_index "$1" 1 "$2" >/dev/null || fail "$1: no RoCE v2 GID for $2 appeared in sysfs"
}

# rxe_pair [RXE_A RXE_B IF_A IF_B IP_A IP_B]: two rxe devices on the two ends
# of one veth pair, both in the initial namespace (an rxe device's sockets
# and routes live there only, so rxe devices in two namespaces pass no
# traffic). Routing forces traffic between the two local addresses over the
# veth instead of loopback: for packets we send (iif lo) to the peer's
# address, a rule picks a table whose route leaves through our own veth end;
# the `local` rule moves after those rules; accept_local=1 and rp_filter=0
# let the receiving end take packets whose source is a local address.
# Defaults: rxe0 on fa0 192.168.77.1/24, rxe1 on fa1 192.168.77.2/24.
# Sets RXE_A RXE_B IF_A IF_B IP_A IP_B GID_A GID_B (RoCE v2 GID indexes).
rxe_pair() {
  RXE_A=${1:-rxe0} RXE_B=${2:-rxe1} IF_A=${3:-fa0} IF_B=${4:-fa1}
  IP_A=${5:-192.168.77.1} IP_B=${6:-192.168.77.2}
  link_nodes host "$IF_A" "$IP_A/24" host "$IF_B" "$IP_B/24"
  local k
  for k in all default "$IF_A" "$IF_B"; do
    sysctl_set "net.ipv4.conf.$k.rp_filter" 0
    sysctl_set "net.ipv4.conf.$k.accept_local" 1
  done
  _rxe_force_via "$IP_B" "$IF_A" "$IP_A" 101
  _rxe_force_via "$IP_A" "$IF_B" "$IP_B" 102
  # (Not `ip rule show | grep -q`: under pipefail, grep leaving at the first
  # match can fail `ip` with SIGPIPE and the test reads "no rule".)
  if [[ $(ip rule show pref 0) == *'lookup local'* ]]; then
    ip rule add pref 1000 lookup local
    ip rule del pref 0 lookup local
  fi
  rxe_add "$RXE_A" "$IF_A"
  rxe_add "$RXE_B" "$IF_B"
  rxe_wait_gid "$RXE_A" "$IP_A"
  rxe_wait_gid "$RXE_B" "$IP_B"
  GID_A=$(gid_index "$RXE_A" 1 "$IP_A")
  GID_B=$(gid_index "$RXE_B" 1 "$IP_B")
  export RXE_A RXE_B IF_A IF_B IP_A IP_B GID_A GID_B
}
# _rxe_force_via PEER_IP OUR_IF OUR_IP TABLE
_rxe_force_via() {
  ip route add "$1/32" dev "$2" src "$3" table "$4"
  ip rule add pref "$4" iif lo to "$1/32" lookup "$4"
}

# rxe_bridge N: N rxe devices, as N machines on one switch: rxb0..rxbN-1 on
# veth ends fb0.. whose peers are ports of the bridge br-fa, addresses
# 192.168.78.(i+1)/24, all in the initial namespace (see rxe_pair). A rule
# per device sends what leaves with its address as source (rxe does: the
# GID's address) out of its own veth end, so RDMA between two of them
# crosses the bridge; arp_ignore=1 lets only the owner of an address answer
# for it. Detaching fbIp from the bridge (`ip link set fbIp nomaster`)
# black-holes device i's RDMA while its port stays ACTIVE. Sets RXB[i],
# FB[i], FBIP[i], FBGID[i] (RoCE v2 GID indexes).
rxe_bridge() {
  local n=$1 i j k
  RXB=() FB=() FBIP=() FBGID=()
  ip link add br-fa type bridge
  ip link set br-fa up
  sysctl_set net.ipv4.conf.all.arp_ignore 1
  for k in all default; do
    sysctl_set "net.ipv4.conf.$k.rp_filter" 0
    sysctl_set "net.ipv4.conf.$k.accept_local" 1
  done
  for ((i = 0; i < n; i++)); do
    RXB[i]=rxb$i FB[i]=fb$i FBIP[i]=192.168.78.$((i + 1))
    ip link add "fb$i" type veth peer name "fb${i}p"
    ip link set "fb${i}p" master br-fa
    ip link set "fb${i}p" up
    sysctl_set "net.ipv4.conf.fb$i.rp_filter" 0
    sysctl_set "net.ipv4.conf.fb$i.accept_local" 1
    ip addr add "${FBIP[i]}/24" dev "fb$i"
    ip link set "fb$i" up
  done
  for ((i = 0; i < n; i++)); do
    for ((j = 0; j < n; j++)); do
      [ "$i" -eq "$j" ] || ip route add "${FBIP[j]}/32" dev "fb$i" src "${FBIP[i]}" table $((200 + i))
    done
    ip rule add pref $((200 + i)) iif lo from "${FBIP[i]}" lookup $((200 + i))
  done
  if [[ $(ip rule show pref 0) == *'lookup local'* ]]; then
    ip rule add pref 1000 lookup local
    ip rule del pref 0 lookup local
  fi
  for ((i = 0; i < n; i++)); do rxe_add "rxb$i" "fb$i"; done
  for ((i = 0; i < n; i++)); do
    rxe_wait_gid "rxb$i" "${FBIP[i]}"
    FBGID[i]=$(gid_index "rxb$i" 1 "${FBIP[i]}")
  done
}

# uplink_add [IF ADDR GW RXE]: the machine's "internet-facing" card: a veth
# end in the initial namespace that carries the default route (its peer sits
# in node "wan" holding the gateway address), with its own rxe device, which
# the agent must never offer to NCCL. Defaults: up0 198.51.100.2/24 via
# 198.51.100.1, rxe device rxe_up. Sets UP_IF UP_IP UP_RXE.
uplink_add() {
  local gw=${3:-198.51.100.1}
  UP_IF=${1:-up0} UP_IP=${2:-198.51.100.2} UP_RXE=${4:-rxe_up}
  node_add wan
  link_nodes host "$UP_IF" "$UP_IP/24" wan "${UP_IF}p" "$gw/24"
  ip route add default via "$gw" dev "$UP_IF"
  rxe_add "$UP_RXE" "$UP_IF"
  rxe_wait_gid "$UP_RXE" "$UP_IP"
  export UP_IF UP_IP UP_RXE
}

# ------------------------------------------------------------ perftest
# perf_pair TOOL SERVER_DEV SERVER_GID CLIENT_DEV CLIENT_GID SERVER_IP [OPTS...]
# Runs a perftest pair (ib_write_bw, ib_read_lat, ...): the server in the
# background, the client (retried until the server listens) against
# SERVER_IP, both with OPTS plus -F (no CPU-frequency check: meaningless in a
# VM). Output in $LAB_OUT/perf-client.log and perf-server.log. Sets
# PERF_LINE (the result line under the "#bytes" header) and returns the
# client's status (non-zero also when the server failed).
# perftest converts cycles to time with a clock rate it samples at start by
# regression over short sleeps; on a loaded host the vCPU is descheduled, the
# fit fails ("Correlation coefficient r^2 ... < 0.9") and every figure reads
# 0. That is a calibration failure, not an RDMA one, so the pair is run again
# (up to twice more) when it happens, saying so.
perf_pair() {
  local tool=$1 sdev=$2 sgid=$3 cdev=$4 cgid=$5 sip=$6 attempt rc src
  shift 6
  for attempt in 1 2 3; do
    bg_start perf-server "$tool" -d "$sdev" -i 1 -x "$sgid" -F "$@"
    rc=0
    retry 20 0.5 "$tool" -d "$cdev" -i 1 -x "$cgid" -F "$@" "$sip" > "$LAB_OUT/perf-client.log" 2>&1 || rc=$?
    src=0; bg_wait perf-server || src=$?
    PERF_LINE=$(awk '/#bytes/ { getline; print; exit }' "$LAB_OUT/perf-client.log")
    if [ "$rc" -eq 0 ] && [ "$src" -eq 0 ] && grep -q 'Correlation coefficient' "$LAB_OUT/perf-client.log" &&
       [ "$attempt" -lt 3 ]; then
      note "$tool: perftest's clock calibration failed (host busy); running the pair again"
      continue
    fi
    break
  done
  cat "$LAB_OUT/perf-client.log"
  if [ "$src" -ne 0 ]; then
    echo "--- $tool server (exit $src):"; bg_log perf-server
    [ "$rc" -ne 0 ] || rc=$src
  fi
  export PERF_LINE
  return "$rc"
}
