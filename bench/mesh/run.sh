#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/mesh: the agent's `mesh apply` against the anchor `wg setconf`, both
# driving the same backend (wireguard-go here: the host kernel has no
# WireGuard; run it in the lab VM for the kernel backend), in network
# namespaces this script creates and removes.
#
#   bench/mesh/run.sh [FABRIC_AGENT_BINARY]      (root; env RUNS=121, ONE_RUNS=31, BACKEND=userspace, COPIES=1, EMPTY=own)
#   bench/mesh/run.sh --lab [FABRIC_AGENT_BINARY]   the same against kernel WireGuard
#                                                 in the lab VM (tests/lab, docs/lab.md;
#                                                 env ASLR=0: randomisation off in the VM;
#                                                 COPIES=3: copies of each binary, see below)
#
# Prints, for 250 and 1000 peers, the median time to push the whole peer set
# onto an up interface with no peers (agent: the full `mesh apply` process,
# i.e. start + parse + read + diff + set + link checks + its one-line
# summary; wg: the whole `wg setconf` process), and the ratio agent/wg
# (target <= 1.0), twice: of the two medians, and (pair_ratio) the median of
# each iteration's own agent/wg ratio with its 95 % confidence interval.
# The host's speed drifts by 20-40 % within minutes, and one sample of
# either tool spreads by as much (wireguard-go's goroutines on 2 CPUs), so
# the interval says whether the runs show the target met (its upper end
# <= 1.0), missed (its lower end > 1.0) or neither. agent_json_ms is the
# same apply printing its JSON report; agent_lib_ms is apply()'s own
# elapsed_us (without process start and file parsing), to tell the two
# costs apart. Then every peer of 250 replaced by 250 others, and all 250
# removed, against `wg setconf` of the new set and of none. Then, in a
# 250-peer mesh where two
# of the peers are real nodes with live sessions: the time of a one-peer
# endpoint change, the whole `mesh apply` process (target < 5 ms) and the
# library's own elapsed_us, beside `wg set` doing the same change, and how
# many other peers had their session reset (target 0).
# Last, the same one-peer change through a running daemon (PUT /v1/mesh with
# curl, the control plane's path): curl's process wall, the request's round
# trip as curl times it (connect to last byte: the daemon's whole handling,
# including the fsync'd state write, without curl's own process start), and
# the apply's time; and the full 250- and 1000-peer sets pushed through the
# daemon that way against `wg setconf` on the daemon's interface.
# Every process time is taken by a shell inside the namespace (timed_a).
# EMPTY=own (default): before each timed full-set push the interface is
# emptied by the same tool's own apply; EMPTY=wg: by `wg setconf` of no
# peers for both tools (the same state-producing command before either side).
set -euo pipefail

# gen_peers, mesh_json
# shellcheck source=bench/mesh/peers.sh
. "$(dirname "${BASH_SOURCE[0]}")/peers.sh"

EMPTY=${EMPTY:-own}
case $EMPTY in own | wg) ;; *)
  echo "bench/mesh: EMPTY=$EMPTY: expected own (each tool empties the interface) or wg (wg setconf for both)" >&2
  exit 2
  ;;
esac

# --lab: this script, run by the lab's init inside the VM with
# BACKEND=kernel against Debian's kernel (its wireguard.ko); the VM runs
# under emulation here (TCG), so only the ratios mean much. The peer lists
# are made here and handed in: two thousand `head | base64` processes take
# minutes under emulation.
if [ "${1:-}" = --lab ]; then
  SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  AGENT=$(readlink -f "${2:-$SRC/build/agent/fabric-agent}")
  LABDIR=$(mktemp -d /tmp/fa-bench-mesh-lab.XXXXXX)
  trap 'rm -rf "$LABDIR"' EXIT
  gen_peers 250 "$LABDIR/p250"
  gen_peers 1000 "$LABDIR/p1000"
  gen_peers 250 "$LABDIR/p250b"
  cp "${BASH_SOURCE[0]}" "$LABDIR/run.sh"
  cp "$(dirname "${BASH_SOURCE[0]}")/peers.sh" "$LABDIR/peers.sh"
  # ASLR=0: address randomisation off inside the VM. QEMU's TCG (7.2) finds
  # code it translated before by virtual address, so with ASLR every process
  # translates every block it runs again, a cost that grows with the code a
  # process runs and that hardware does not have; without, a process
  # reuses the translations of the previous one and what is left is closer
  # to what each side executes (docs/overlay.md, "Results").
  {
    echo '# bench/mesh/run.sh --lab: the benchmark against kernel WireGuard.'
    if [ "${ASLR:-1}" = 0 ]; then
      echo 'echo 0 >/proc/sys/kernel/randomize_va_space && echo "ASLR off in the VM"'
    fi
    echo "RUNS=${RUNS:-31} ONE_RUNS=${ONE_RUNS:-15} COPIES=${COPIES:-3} EMPTY=$EMPTY BACKEND=kernel PEERS_DIR=\$LAB_FILES bash \$LAB_FILES/run.sh /usr/bin/fabric-agent"
  } >"$LABDIR/bench-mesh.sh"
  "$SRC/tests/lab/run" --timeout "${FA_LAB_TIMEOUT:-3600}" --binary "$AGENT" --file "$LABDIR/run.sh" \
    --file "$LABDIR/peers.sh" --file "$LABDIR/p250" --file "$LABDIR/p1000" --file "$LABDIR/p250b" "$LABDIR/bench-mesh.sh"
  exit 0
fi

AGENT=${1:-build/agent/fabric-agent}
AGENT=$(readlink -f "$AGENT")
# 121 iterations of the full-set applies: one sample of either tool spreads
# by +-20 %, so with 31 the 95 % interval of the ratio is +-6-8 % wide,
# wider than the difference between the tools; with 121, +-3 %. The
# one-peer change and the daemon take ONE_RUNS (31) each (a second's
# wait per change for the handshake clock).
RUNS=${RUNS:-121}
ONE_RUNS=${ONE_RUNS:-31}
BACKEND=${BACKEND:-userspace}
T=$$
NS=fabm$T
IF=fbm${T}a
DIR=$(mktemp -d /tmp/fa-bench-mesh.XXXXXX)

cleanup() {
  if [ -n "${DPID:-}" ]; then
    # The daemon listens on namespace a's loopback: ask it there.
    ip netns exec ${NS}a curl -s -m 5 -X DELETE -H "Authorization: Bearer $(cat "$DIR/token" 2>/dev/null)" \
      "http://127.0.0.1:$DPORT/v1/mesh" >/dev/null 2>&1 || true
    kill "$DPID" 2>/dev/null || true
    wait "$DPID" 2>/dev/null || true
  fi
  ip netns exec ${NS}a "$AGENT" mesh down --interface fbm${T}d >/dev/null 2>&1 || true
  for n in a b c; do
    ip netns exec ${NS}$n "$AGENT" mesh down --interface fbm${T}$n >/dev/null 2>&1 || true
    ip netns del ${NS}$n 2>/dev/null || true
  done
  ip netns del ${NS}br 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

# COPIES: the timed full-set runs of each tool go round its binary copied
# to that many files (copy c in iterations c, c+COPIES, ...; both tools
# alike). Under the lab's emulation a binary's median moves by up to
# +-0.7 ms with where its file's pages land in the VM's memory
# (docs/overlay.md, "Benchmark"), as much as the difference measured at 250
# peers; a few copies of each average that out. 1 (the binaries
# themselves) outside the lab, 3 with --lab.
COPIES=${COPIES:-1}
AGENTS=()
WGS=()
mkdir -p "$DIR/bin"
for ((c = 1; c <= COPIES; c++)); do
  if ((COPIES == 1)); then
    AGENTS+=("$AGENT")
    WGS+=("$(command -v wg)")
  else
    cp "$AGENT" "$DIR/bin/fabric-agent.$c"
    cp "$(command -v wg)" "$DIR/wg.$c"
    AGENTS+=("$DIR/bin/fabric-agent.$c")
    WGS+=("$DIR/wg.$c")
  fi
done
COPY=0

# Wall time (ns) of one command in node a's namespace, taken by a shell
# already inside it from EPOCHREALTIME: neither `ip netns exec` (a mount
# namespace and a sysfs remount per call) nor a clock process (`date`) is in
# the timed span, for the agent and the anchor alike. The command's stdout
# goes to OUT, opened (and truncated: ~0.15 ms on this disk) before the clock
# starts; its exit status is returned.
timed_a() {  # timed_a OUT CMD...
  ip netns exec ${NS}a bash -c 'exec 3>"$1"; shift; t0=${EPOCHREALTIME/./}; "$@" >&3 2>/dev/null; rc=$?
    t1=${EPOCHREALTIME/./}; echo $(( (t1 - t0) * 1000 )); exit $rc' _ "$@"
}
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m/1e6}'; }
# The fastest sample: this host's speed drifts by 20-40 % within minutes,
# and a slow phase only ever adds time; the ratio of the two minimums shows
# what each side costs when neither was disturbed.
minimum() { sort -n | head -n1 | awk '{printf "%.2f", $1/1e6}'; }
# Median of the per-iteration ratios and its distribution-free 95 %
# confidence interval: the order statistics k and n+1-k, k the largest with
# P(Binomial(n, 1/2) <= k-1) <= 0.025 (n=31: the 10th and 22nd; fewer than
# 6 samples give no interval, printed as "-").
median_ci() {
  sort -n | awk '{a[NR] = $1} END {
    n = NR; m = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    p = 1; for (j = 0; j < n; j++) p /= 2  # 2^-n (busybox awk in the lab has no "^")
    c = p; k = 0
    for (j = 0; j < n && c <= 0.025; j++) { k = j + 1; p = p * (n - j) / (j + 1); c += p }
    if (k == 0) printf "%.6f - -\n", m
    else printf "%.6f %.6f %.6f\n", m, a[k], a[n + 1 - k] }'
}
# RUNS iterations of the agent's runner and the anchor's for N peers, the
# anchor first every other iteration: neither tool always follows the other
# (a cache or frequency state left by one would otherwise favour the same
# side every time).
alternate() {  # alternate AGENT_RUNNER ANCHOR_RUNNER N
  local r
  for ((r = 0; r < RUNS; r++)); do
    COPY=$((r % COPIES))
    if ((r % 2)); then "$2" "$3"; "$1" "$3"; else "$1" "$3"; "$2" "$3"; fi
  done
}
# The ratios of two sample files line by line (line r of each from the same
# iteration, taken within ~0.1 s of each other: free of the host's drift):
# sets pr, lo, hi (median_ci, unrounded: the verdict is taken on these) and
# ci, their printed form (three decimals: two would show an upper end of
# 1.004 as 1.00).
paired() {
  read -r pr lo hi < <(paste -d' ' "$1" "$2" | awk '{printf "%.6f\n", $1 / $2}' | median_ci)
  ci=$(awk -v p="$pr" -v l="$lo" -v h="$hi" 'BEGIN {
    if (l == "-") printf "%.3f", p; else printf "%.3f [%.3f-%.3f]", p, l, h }')
}

# Underlay: three namespaces on a bridge; node a is the one measured.
ip netns add ${NS}br
ip -n ${NS}br link add br0 type bridge && ip -n ${NS}br link set br0 up
i=0
for n in a b c; do
  i=$((i + 1))
  ip netns add ${NS}$n
  ip -n ${NS}$n link set lo up
  ip -n ${NS}br link add v$n type veth peer name eth0 netns ${NS}$n
  ip -n ${NS}br link set v$n master br0 up
  ip -n ${NS}$n addr add 192.168.78.$i/24 dev eth0
  ip -n ${NS}$n link set eth0 up
done
inA() { ip netns exec ${NS}a "$@"; }

wg_conf() {  # wg_conf PEERS [KEY_FILE PORT]
  local peers=$1
  printf '[Interface]\nPrivateKey = %s\nListenPort = %s\n' "$(cat "${2:-$DIR/priv}")" "${3:-51820}"
  awk '{printf "\n[Peer]\nPublicKey = %s\nEndpoint = %s\nAllowedIPs = %s\n", $1, $2, $3}' "$peers"
}
apply_a() { inA "$AGENT" mesh apply --overlay-cidr 10.64.0.0/16 --backend "$BACKEND" --json --file "$1" 2>/dev/null; }
# The measured runs use apply's default output, one summary line ending in
# apply()'s own time ("...; peers +250 -0 ~0; 18.41 ms"), as wg prints
# nothing; the JSON report of 250-1000 peers costs another ~0.5-2 ms to
# print, shown in its own column.
APPLY_ARGS=(mesh apply --overlay-cidr 10.64.0.0/16 --backend "$BACKEND" --file)
lib_ns() { sed -n 's/.*; \([0-9.]*\) ms$/\1/p' "$1" | awk '{printf "%d\n", $1 * 1e6}'; }

: >"$DIR/none"
mesh_json "$DIR/none" "$IF" >"$DIR/empty.json"
apply_a "$DIR/empty.json" >/dev/null
# The anchor needs the private key in a file; for the benchmark only, read
# it from the live interface (wg showconf) and keep it in the temp dir.
inA wg showconf "$IF" | awk '/^PrivateKey/ {print $3}' >"$DIR/priv"
chmod 600 "$DIR/priv"

# One iteration of each side for N peers, onto the interface emptied first
# (by the same tool, or with EMPTY=wg by `wg setconf` for both); the samples
# go to ta/tal/taj (agent) and tw (wg).
empty_wg() { inA wg setconf "$IF" "$DIR/w0.conf"; }
empty_agent() {
  if [ "$EMPTY" = wg ]; then empty_wg; else apply_a "$DIR/empty.json" >/dev/null; fi
}
run_agent() {
  local n=$1 got
  empty_agent
  timed_a "$DIR/out.txt" "${AGENTS[COPY]}" "${APPLY_ARGS[@]}" "$DIR/m$n.json" >>"$DIR/ta"
  lib_ns "$DIR/out.txt" >>"$DIR/tal"
  got=$(inA wg show "$IF" peers | wc -l)
  [ "$got" -eq "$n" ] || { echo "agent left $got peers, expected $n" >&2; exit 1; }
  empty_agent
  timed_a "$DIR/out.json" "${AGENTS[COPY]}" "${APPLY_ARGS[@]}" "$DIR/m$n.json" --json >>"$DIR/taj"
  grep -q "\"peers_added\": $n," "$DIR/out.json" || { echo "agent --json did not add $n peers" >&2; exit 1; }
}
run_wg() {
  local n=$1 got
  empty_wg
  timed_a /dev/null "${WGS[COPY]}" setconf "$IF" "$DIR/w$n.conf" >>"$DIR/tw"
  got=$(inA wg show "$IF" peers | wc -l)
  [ "$got" -eq "$n" ] || { echo "wg left $got peers, expected $n" >&2; exit 1; }
}

echo "backend: $BACKEND, runs: $RUNS (median of each)"
printf '%-8s %12s %12s %8s %21s %14s %10s %16s %10s\n' peers agent_ms wg_ms ratio 'pair_ratio [95%]' agent_lib_ms lib_ratio \
  agent_json_ms min_ratio
verdict=()
for N in 250 1000; do
  if [ -n "${PEERS_DIR:-}" ] && [ -f "$PEERS_DIR/p$N" ]; then cp "$PEERS_DIR/p$N" "$DIR/p$N"; else gen_peers "$N" "$DIR/p$N"; fi
  mesh_json "$DIR/p$N" "$IF" >"$DIR/m$N.json"
  wg_conf "$DIR/p$N" >"$DIR/w$N.conf"
  wg_conf "$DIR/none" >"$DIR/w0.conf"
  : >"$DIR/ta"
  : >"$DIR/tal"
  : >"$DIR/tw"
  : >"$DIR/taj"
  alternate run_agent run_wg "$N"
  a=$(median <"$DIR/ta")
  al=$(median <"$DIR/tal")
  w=$(median <"$DIR/tw")
  amin=$(minimum <"$DIR/ta")
  wmin=$(minimum <"$DIR/tw")
  paired "$DIR/ta" "$DIR/tw"
  printf '%-8s %12s %12s %8s %21s %14s %10s %16s %10s\n' "$N" "$a" "$w" "$(awk -v a="$a" -v w="$w" 'BEGIN {printf "%.2f", a/w}')" \
    "$ci" "$al" "$(awk -v a="$al" -v w="$w" 'BEGIN {printf "%.2f", a/w}')" "$(median <"$DIR/taj")" \
    "$(awk -v a="$amin" -v w="$wmin" 'BEGIN {printf "%.2f", a/w}')"
  verdict+=("$N peers: $(awk -v p="$pr" -v lo="$lo" -v hi="$hi" 'BEGIN {
    if (lo == "-") printf "per-iteration ratio %.3f (too few runs for an interval)", p
    else if (hi + 0 <= 1.0) printf "per-iteration ratio %.3f, 95%% interval %.4f-%.4f: at most 1.0 (target met)", p, lo, hi
    else if (lo + 0 > 1.0) printf "per-iteration ratio %.3f, 95%% interval %.4f-%.4f: above 1.0 (target missed)", p, lo, hi
    else printf "per-iteration ratio %.3f, 95%% interval %.4f-%.4f: includes 1.0 (target not shown)", p, lo, hi }')")
done
echo
printf '%s\n' "${verdict[@]}"

# The node handed to another cluster: 250 peers replaced by 250 others (no
# peer in common), and the list emptied, each tool from the 250 peers it
# put there itself. No current peer stays, so the agent sends the peer list
# as a replacement (REPLACE_PEERS / replace_peers=true), as `wg setconf`
# always does; before, it removed each old peer by itself.
if [ -n "${PEERS_DIR:-}" ] && [ -f "$PEERS_DIR/p250b" ]; then cp "$PEERS_DIR/p250b" "$DIR/p250b"; else gen_peers 250 "$DIR/p250b"; fi
mesh_json "$DIR/p250b" "$IF" >"$DIR/m250b.json"
wg_conf "$DIR/p250b" >"$DIR/w250b.conf"
: >"$DIR/tra"
: >"$DIR/trw"
: >"$DIR/tea"
: >"$DIR/tew"
replace_agent() {
  apply_a "$DIR/m250.json" >/dev/null
  timed_a /dev/null "${AGENTS[COPY]}" "${APPLY_ARGS[@]}" "$DIR/m250b.json" >>"$DIR/tra"
  [ "$(inA wg show "$IF" peers | sort)" = "$(awk '{print $1}' "$DIR/p250b" | sort)" ] ||
    { echo "agent: not exactly the 250 other peers" >&2; exit 1; }
  apply_a "$DIR/m250.json" >/dev/null
  timed_a /dev/null "${AGENTS[COPY]}" "${APPLY_ARGS[@]}" "$DIR/empty.json" >>"$DIR/tea"
  [ -z "$(inA wg show "$IF" peers)" ] || { echo "agent left peers behind" >&2; exit 1; }
}
replace_wg() {
  inA wg setconf "$IF" "$DIR/w250.conf"
  timed_a /dev/null "${WGS[COPY]}" setconf "$IF" "$DIR/w250b.conf" >>"$DIR/trw"
  inA wg setconf "$IF" "$DIR/w250.conf"
  timed_a /dev/null "${WGS[COPY]}" setconf "$IF" "$DIR/w0.conf" >>"$DIR/tew"
}
alternate replace_agent replace_wg 250
echo
echo "every peer replaced or removed, from 250 peers (the node handed to another cluster), $RUNS runs:"
paired "$DIR/tra" "$DIR/trw"
echo "  250 -> 250 others: agent $(median <"$DIR/tra") ms, wg setconf $(median <"$DIR/trw") ms, pair_ratio $ci"
paired "$DIR/tea" "$DIR/tew"
echo "  250 -> none:       agent $(median <"$DIR/tea") ms, wg setconf $(median <"$DIR/tew") ms, pair_ratio $ci"
apply_a "$DIR/empty.json" >/dev/null

# One-peer change in a 250-peer mesh with two live sessions (nodes b, c).
for n in b c; do
  ip netns exec ${NS}$n "$AGENT" mesh apply --overlay-cidr 10.64.0.0/16 --backend "$BACKEND" --json --file /dev/stdin \
    >"$DIR/$n.out" 2>/dev/null <<JSON
{"cluster_id":"bench","interface":"fbm${T}$n","address":"10.64.200.$([ $n = b ] && echo 2 || echo 3)/16","peers":[]}
JSON
done
pubA=$(inA wg show "$IF" public-key)
pubB=$(ip netns exec ${NS}b wg show fbm${T}b public-key)
pubC=$(ip netns exec ${NS}c wg show fbm${T}c public-key)
for n in b c; do
  ip netns exec ${NS}$n "$AGENT" mesh apply --overlay-cidr 10.64.0.0/16 --backend "$BACKEND" --file /dev/stdin \
    >/dev/null 2>&1 <<JSON
{"cluster_id":"bench","interface":"fbm${T}$n","address":"10.64.200.$([ $n = b ] && echo 2 || echo 3)/16",
 "peers":[{"public_key":"$pubA","endpoint":"192.168.78.1:51820","allowed_ips":["10.64.0.1/32"]}]}
JSON
done
head -n 248 "$DIR/p250" >"$DIR/mix"
echo "$pubB 192.168.78.2:51820 10.64.200.2/32" >>"$DIR/mix"
echo "$pubC 192.168.78.3:51820 10.64.200.3/32" >>"$DIR/mix"
mesh_json "$DIR/mix" "$IF" >"$DIR/mix.json"
apply_a "$DIR/mix.json" >/dev/null
inA ping -n -q -c 1 -W 2 10.64.200.2 >/dev/null
inA ping -n -q -c 1 -W 2 10.64.200.3 >/dev/null
: >"$DIR/t1"
: >"$DIR/t1lib"
: >"$DIR/twset"
resets=0
for ((r = 0; r < ONE_RUNS; r++)); do
  inA wg show "$IF" latest-handshakes | sort >"$DIR/hs.before"
  sleep 1.1  # handshake times have one-second resolution
  # Move synthetic peer 0 to a new endpoint, then back on the next run.
  sed "1s/ [^ ]*:51820 / 198.51.100.$((r % 200 + 1)):5182$((r % 10)) /" "$DIR/mix" >"$DIR/mix2"
  mesh_json "$DIR/mix2" "$IF" >"$DIR/mix2.json"
  timed_a "$DIR/one.txt" "$AGENT" "${APPLY_ARGS[@]}" "$DIR/mix2.json" >>"$DIR/t1"
  lib_ns "$DIR/one.txt" >>"$DIR/t1lib"
  grep -q '; peers +0 -0 ~1; ' "$DIR/one.txt" || { echo "one-peer change did not update exactly one peer: $(cat "$DIR/one.txt")" >&2; exit 1; }
  # The anchor: the same kind of change with `wg set`.
  key0=$(head -n1 "$DIR/mix" | cut -d' ' -f1)
  timed_a /dev/null wg set "$IF" peer "$key0" endpoint 198.51.100.250:51829 >>"$DIR/twset"
  # Traffic to the live peers: a reset session would handshake anew.
  inA ping -n -q -c 1 -W 2 10.64.200.2 >/dev/null
  inA ping -n -q -c 1 -W 2 10.64.200.3 >/dev/null
  inA wg show "$IF" latest-handshakes | sort >"$DIR/hs.after"
  for k in "$pubB" "$pubC"; do
    [ "$(grep "^$k" "$DIR/hs.before")" = "$(grep "^$k" "$DIR/hs.after")" ] || resets=$((resets + 1))
  done
  cp "$DIR/mix2" "$DIR/mix"
done
echo
echo "one-peer endpoint change in a 250-peer mesh (2 live sessions, $ONE_RUNS changes):"
echo "  agent mesh apply (process wall): $(median <"$DIR/t1") ms median (target < 5 ms)"
echo "  agent apply() library time:      $(median <"$DIR/t1lib") ms median"
echo "  wg set peer ... endpoint:        $(median <"$DIR/twset") ms median"
echo "  sessions of other peers reset:   $resets (target 0)"

if ! command -v curl >/dev/null; then
  echo
  echo "the same change through the daemon: skipped (no curl here)"
  exit 0
fi

# The same one-peer change through the daemon, as the control plane sends it:
# `fabric-agent run` in node a's namespace (its own interface fbm${T}d, port
# 51821), PUT /v1/mesh with curl over the namespace's loopback. Process wall
# of `ip netns exec curl` (the daemon is already running: no process start)
# and the apply's own elapsed_us from the response.
DPORT=7479
mkdir -p "$DIR/state"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/token"
chmod 600 "$DIR/token"
cat >"$DIR/agent.yaml" <<YAML
listen: 127.0.0.1:$DPORT
state_dir: $DIR/state
token_file: $DIR/token
pods:
  socket: $DIR/pods.sock
  cdi_dir: ""
overlay:
  interface: fbm${T}d
  backend: $BACKEND
  cidr: 10.64.0.0/16
refresh_interval: 1h
YAML
# Not through inA: a backgrounded shell function is a subshell, and $! would
# be that subshell, not the agent (`ip netns exec` execs the command).
ip netns exec ${NS}a "$AGENT" run --config "$DIR/agent.yaml" >"$DIR/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 1 200); do
  grep -q 'ready (generation' "$DIR/daemon.log" && break
  kill -0 "$DPID" 2>/dev/null || { echo "daemon exited: $(tail -3 "$DIR/daemon.log")" >&2; exit 1; }
  sleep 0.05
done
put_mesh() {
  inA curl -s -m 30 -o "$2" -w '%{http_code}' -X PUT -H "Authorization: Bearer $(cat "$DIR/token")" \
    -H 'Content-Type: application/json' --data-binary @"$1" "http://127.0.0.1:$DPORT/v1/mesh"
}
daemon_json() { mesh_json "$1" "$IF" | sed "s/\"interface\":\"$IF\"/\"interface\":\"fbm${T}d\"/; s/\"listen_port\":51820/\"listen_port\":51821/"; }
daemon_json "$DIR/mix" >"$DIR/d.json"
code=$(put_mesh "$DIR/d.json" "$DIR/d.out")
[ "$code" = 200 ] || { echo "PUT /v1/mesh answered $code: $(cat "$DIR/d.out")" >&2; exit 1; }
: >"$DIR/td"
: >"$DIR/tdrt"
: >"$DIR/tdlib"
for ((r = 0; r < ONE_RUNS; r++)); do
  sed "1s/ [^ ]*:5182[0-9] / 203.0.113.$((r % 200 + 1)):5182$((r % 10)) /" "$DIR/mix" >"$DIR/mix3"
  daemon_json "$DIR/mix3" >"$DIR/d.json"
  timed_a "$DIR/d.code" curl -s -m 30 -o "$DIR/d.out" -w '%{http_code} %{time_total}' -X PUT \
    -H "Authorization: Bearer $(cat "$DIR/token")" -H 'Content-Type: application/json' --data-binary @"$DIR/d.json" \
    "http://127.0.0.1:$DPORT/v1/mesh" >>"$DIR/td"
  code=$(cut -d' ' -f1 "$DIR/d.code")
  cut -d' ' -f2 "$DIR/d.code" | awk '{printf "%d\n", $1 * 1e9}' >>"$DIR/tdrt"
  [ "$code" = 200 ] || { echo "PUT /v1/mesh answered $code: $(cat "$DIR/d.out")" >&2; exit 1; }
  grep -q '"peers_updated": *1[,}]' "$DIR/d.out" || { echo "daemon one-peer change did not update exactly one peer: $(head -c 300 "$DIR/d.out")" >&2; exit 1; }
  grep -o '"elapsed_us": *[0-9]*' "$DIR/d.out" | grep -o '[0-9]*$' | awk '{print $1*1000}' >>"$DIR/tdlib"
  cp "$DIR/mix3" "$DIR/mix"
done
echo
echo "the same change through the daemon (PUT /v1/mesh, 250 peers, $ONE_RUNS changes):"
echo "  curl PUT /v1/mesh (process wall): $(median <"$DIR/td") ms median"
echo "  request to answer (curl's time_total, without curl's own start): $(median <"$DIR/tdrt") ms median (target < 5 ms)"
echo "  daemon apply() library time:      $(median <"$DIR/tdlib") ms median"

# The full peer sets through the daemon, as the control plane pushes a new
# cluster: PUT /v1/mesh of 250 and 1000 new peers onto the daemon's emptied
# interface (request to answer, curl's time_total: validation, apply, the
# fsync'd state write and the `mesh show` answer, without a client process
# start), against `wg setconf` of the same set on the same interface (its
# whole process, as before). Alternating, RUNS iterations.
inA wg showconf fbm${T}d | awk '/^PrivateKey/ {print $3}' >"$DIR/dpriv"
chmod 600 "$DIR/dpriv"
daemon_json "$DIR/none" >"$DIR/d0.json"
wg_conf "$DIR/none" "$DIR/dpriv" 51821 >"$DIR/dw0.conf"
run_dput() {
  local n=$1 code
  code=$(put_mesh "$DIR/d0.json" "$DIR/d.out")
  [ "$code" = 200 ] || { echo "PUT /v1/mesh (no peers) answered $code: $(cat "$DIR/d.out")" >&2; exit 1; }
  code=$(inA curl -s -m 30 -o "$DIR/d.out" -w '%{http_code} %{time_total}' -X PUT \
    -H "Authorization: Bearer $(cat "$DIR/token")" -H 'Content-Type: application/json' --data-binary @"$DIR/dm$n.json" \
    "http://127.0.0.1:$DPORT/v1/mesh")
  [ "${code%% *}" = 200 ] || { echo "PUT /v1/mesh answered $code: $(head -c 300 "$DIR/d.out")" >&2; exit 1; }
  grep -q "\"peers_added\": *${n}[,}]" "$DIR/d.out" || { echo "daemon did not add $n peers: $(head -c 300 "$DIR/d.out")" >&2; exit 1; }
  awk '{printf "%d\n", $2 * 1e9}' <<<"$code" >>"$DIR/tdn"
}
run_dwg() {
  local n=$1 got
  inA wg setconf fbm${T}d "$DIR/dw0.conf"
  timed_a /dev/null wg setconf fbm${T}d "$DIR/dw$n.conf" >>"$DIR/twn"
  got=$(inA wg show fbm${T}d peers | wc -l)
  [ "$got" -eq "$n" ] || { echo "wg left $got peers on the daemon's interface, expected $n" >&2; exit 1; }
}
echo
echo "full peer sets through the daemon (PUT /v1/mesh, request to answer) against wg setconf, $RUNS runs:"
printf '  %-8s %12s %12s %8s %21s\n' peers put_ms wg_ms ratio 'pair_ratio [95%]'
for N in 250 1000; do
  daemon_json "$DIR/p$N" >"$DIR/dm$N.json"
  wg_conf "$DIR/p$N" "$DIR/dpriv" 51821 >"$DIR/dw$N.conf"
  : >"$DIR/tdn"
  : >"$DIR/twn"
  alternate run_dput run_dwg "$N"
  d=$(median <"$DIR/tdn")
  w=$(median <"$DIR/twn")
  paired "$DIR/tdn" "$DIR/twn"
  printf '  %-8s %12s %12s %8s %21s\n' "$N" "$d" "$w" "$(awk -v a="$d" -v w="$w" 'BEGIN {printf "%.2f", a/w}')" "$ci"
done
