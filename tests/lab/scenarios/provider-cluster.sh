# SPDX-License-Identifier: Apache-2.0
# lab: machines
# provider-cluster: the product as a provider runs it. Two machines boot
# Debian 12 with systemd; on each the package is installed with apt, the
# operator sets provider_id and TLS as the README says, systemd runs the
# agent; the control plane (`fabric-agent cluster form`, on the host) forms
# the mesh over the API's port forwards; a renter's whole-machine container
# (podman, --device fabric-agent.io/rdma=all) on each machine runs the
# product page's checks and an RDMA transfer to the other; then the faults.
# Runs on the host (tests/lab/machines.sh); `vm N CMD` runs CMD in machine N.

CA=$RUN_DIR/tls
API=()       # https://127.0.0.1:PORT of each machine's API (port forward)
AUTH=()      # a curl header file per machine (mode 0600): tokens never go in argv

# api N METHOD PATH [BODY]: the control plane's request to machine N; sets
# API_OUT (the body) and API_CODE (the HTTP status, 000 when none came).
api() {
  local n=$1 m=$2 p=$3 body=${4:-} out rc=0
  # The body on stdin: a probe key must not be in curl's arguments either.
  out=$(curl -sS --max-time "${API_TIMEOUT:-60}" --cacert "$CA/ca.crt" -H @"${AUTH[$n]}" -X "$m" \
    ${body:+-H 'Content-Type: application/json' --data-binary @-} \
    -w '\n%{http_code}' "${API[$n]}$p" 2>&1 <<<"$body") || rc=$?
  API_CODE=${out##*$'\n'}
  API_OUT=${out%$'\n'*}
  [ "$rc" -eq 0 ] || { API_CODE=000; API_OUT=$out; return 1; }
}

# The lab's TLS: one CA, a certificate per machine for the addresses the
# control plane uses (the port forward on 127.0.0.1) and the machine's own.
mk_tls() {
  mkdir -p "$CA"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=fabric-lab-ca \
    -keyout "$CA/ca.key" -out "$CA/ca.crt" 2>/dev/null
  local n
  for n in 0 1; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=node$n" \
      -keyout "$CA/node$n.key" -out "$CA/node$n.csr" 2>/dev/null
    openssl x509 -req -in "$CA/node$n.csr" -CA "$CA/ca.crt" -CAkey "$CA/ca.key" -CAcreateserial -days 2 \
      -extfile <(printf 'subjectAltName=IP:127.0.0.1,IP:10.0.2.15,DNS:node%s\n' "$n") -out "$CA/node$n.crt" 2>/dev/null
  done
}

step "boot two machines (Debian 12, systemd, the lab kernel)"
m_boot 0
m_boot 1
m_wait 0
m_wait 1
for n in 0 1; do
  note "node$n: systemd running ${M_BOOT_S[$n]}s after QEMU started; $(vm $n 'systemd-analyze time' | head -n 1)"
done
assert_eq "$(vm 0 'ps -p 1 -o comm=')" systemd "PID 1 of node0"
assert_eq "$(vm 1 'cat /sys/class/infiniband/rxe0/ports/1/state')" "4: ACTIVE" "node1 rxe0 port"

step "install the package on each machine: apt install ./fabric-agent_*.deb"
deb=$(basename "$M_DEB")
vm_put 0 "$M_DEB"
vm_put 1 "$M_DEB"
# node1's operator pre-provisioned a token with the wrong mode (0644), which
# the daemon refuses at start: the install must say so, not read as done.
vm 1 "install -d -m 0700 /var/lib/fabric-agent && (umask 022; od -An -vtx1 -N32 /dev/urandom | tr -d ' \\n' > /var/lib/fabric-agent/token; echo >> /var/lib/fabric-agent/token)"
p0=$(vm_start 0 "cd /lab/files && apt install -y ./$deb 2>&1")
p1=$(vm_start 1 "cd /lab/files && apt install -y ./$deb 2>&1")
rc=0; out=$(vm_collect 0 "$p0") || rc=$?
[ "$rc" -eq 0 ] || { echo "$out"; vm 0 'systemctl status --no-pager fabric-agent' || true; fail "node0: apt install ./$deb exited $rc"; }
rc=0; out=$(vm_collect 1 "$p1") || rc=$?
assert_ne "$rc" 0 "node1: apt install's status with a service that cannot start (token mode 0644)"
assert_contains "$out" "fabric-agent: the service did not start" "node1: apt install's output"
assert_ne "$(vm 1 'systemctl is-active fabric-agent || true')" active "node1: unit after the failed start"
note "node1: $(vm 1 'journalctl -u fabric-agent -o cat -p err -n 1')"
vm 1 'chmod 0600 /var/lib/fabric-agent/token && dpkg --configure -a' >/dev/null
for n in 0 1; do
  assert_eq "$(vm "$n" 'dpkg-query -W -f "\${Status}" fabric-agent')" "install ok installed" "node$n: package state"
  assert_eq "$(vm "$n" 'systemctl is-enabled fabric-agent')" enabled "node$n: unit enabled by the package"
  assert_eq "$(vm "$n" 'systemctl is-active fabric-agent')" active "node$n: unit started by the package"
done

step "the operator's configuration: provider_id, the API on the uplink with TLS"
mk_tls
for n in 0 1; do
  vm_put "$n" "$CA/node$n.crt"
  vm_put "$n" "$CA/node$n.key"
  vm "$n" "install -d -m 0700 /etc/fabric-agent/tls &&
    install -m 0644 /lab/files/node$n.crt /etc/fabric-agent/tls/node.crt &&
    install -m 0600 /lab/files/node$n.key /etc/fabric-agent/tls/node.key &&
    sed -i -e 's|^#provider_id: \"\"|provider_id: \"lab-provider\"|' \
      -e 's|^#listen: 127.0.0.1:7471|listen: 10.0.2.15:7471|' \
      -e 's|^#tls:|tls:|' \
      -e 's|^#  cert: \"\" .*|  cert: /etc/fabric-agent/tls/node.crt|' \
      -e 's|^#  key: \"\" .*|  key: /etc/fabric-agent/tls/node.key|' /etc/fabric-agent/agent.yaml"
  out=$(vm "$n" 'fabric-agent inspect --config /etc/fabric-agent/agent.yaml 2>&1') || { echo "$out"; fail "node$n: fabric-agent inspect refused the edited config"; }
  vm "$n" 'systemctl restart fabric-agent'
  assert_eq "$(vm "$n" 'systemctl is-active fabric-agent')" active "node$n: unit after the restart with the operator's config"
  API[$n]=https://127.0.0.1:${M_API_PORT[$n]}
done

step "tokens, as the README says: /var/lib/fabric-agent/token on each machine"
for n in 0 1; do
  (umask 077; vm "$n" 'cat /var/lib/fabric-agent/token' > "$RUN_DIR/token$n")
  AUTH[$n]=$RUN_DIR/auth$n
  (umask 077; printf 'Authorization: Bearer %s\n' "$(cat "$RUN_DIR/token$n")" > "${AUTH[$n]}")
  retry 30 1 api "$n" GET /v1/status
  assert_eq "$API_CODE" 200 "node$n: GET /v1/status over TLS through the port forward"
done
cmp -s "$RUN_DIR/token0" "$RUN_DIR/token1" && fail "the two machines made the same token"
pass "each machine made its own token"
# `cluster form --token-file F` presents one token to every agent, so the
# provider gives the machines of a cluster one token: node1 gets node0's
# (docs/operator.md: replace the file, systemctl reload).
python3 "$LAB_DIR/qga.py" exec "$RUN_DIR/node1/qga.sock" --stdin "$RUN_DIR/token0" -- \
  'umask 077; cat > /var/lib/fabric-agent/token.new && mv /var/lib/fabric-agent/token.new /var/lib/fabric-agent/token && systemctl reload fabric-agent'
cp "${AUTH[0]}" "${AUTH[1]}"
retry 20 0.5 sh -c "curl -sf --cacert '$CA/ca.crt' -H @'${AUTH[1]}' -o /dev/null '${API[1]}/v1/status'"

step "the control plane: fabric-agent cluster form against both agents"
rc=0
out=$("$BINARY" cluster form --agent "${API[0]}" --agent "${API[1]}" --token-file "$RUN_DIR/token0" \
  --ca-file "$CA/ca.crt" --timeout 120 --json 2>&1) || rc=$?
echo "$out" | sed -n '/^cluster /p'
[ "$rc" -eq 0 ] || { echo "$out"; fail "fabric-agent cluster form exited $rc"; }
for n in 0 1; do
  api "$n" GET /v1/mesh
  m=$API_OUT
  assert_eq "$(jq -r .desired.address <<<"$m")" "10.42.0.$((n + 1))/24" "node$n: the desired mesh's address"
  assert_eq "$(jq -r '.live.peers | length' <<<"$m")" 1 "node$n: live peers"
  # Kernel WireGuard (the machines have the module), not wireguard-go's tun.
  assert_match "$(vm "$n" 'ip -d -o link show dev wg0')" ' wireguard ' "node$n: wg0's link kind"
done

step "the rental's SSH login: PUT /v1/login on each machine (docs/api.md)"
# What the control plane mints per rental with OpenSSH's tools: a CA and a
# user key pair; per node a host key and a certificate for its overlay address.
ssh_dir=$RUN_DIR/ssh
mkdir -p -m 0700 "$ssh_dir"
cluster=$(jq -r .desired.cluster_id <<<"$m")
ssh-keygen -q -t ed25519 -N '' -C "$cluster-ca" -f "$ssh_dir/ca"
ssh-keygen -q -t ed25519 -N '' -C "$cluster-user" -f "$ssh_dir/user"
for n in 0 1; do
  ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/host$n"
  ssh-keygen -q -s "$ssh_dir/ca" -I "$cluster/node$n" -h -n "10.42.0.$((n + 1))" -V -5m:+1d "$ssh_dir/host$n.pub"
  body=$(jq -n --arg c "$cluster" --rawfile ca "$ssh_dir/ca.pub" --rawfile hk "$ssh_dir/host$n" \
    --rawfile hc "$ssh_dir/host$n-cert.pub" --rawfile up "$ssh_dir/user.pub" --rawfile uk "$ssh_dir/user" \
    '{cluster_id: $c, ca_public_key: $ca, host_key: $hk, host_certificate: $hc, user_public_key: $up, user_key: $uk}')
  api "$n" PUT /v1/login "$body"
  [ "$API_CODE" = 200 ] || echo "$API_OUT"
  assert_eq "$API_CODE" 200 "node$n: PUT /v1/login"
  assert_eq "$(jq -c .principals <<<"$API_OUT")" "[\"10.42.0.$((n + 1))\"]" "node$n: the host certificate's principals"
  assert_eq "$(jq -r .ca_fingerprint <<<"$API_OUT")" "$(ssh-keygen -l -f "$ssh_dir/ca.pub" | awk '{ print $2 }')" "node$n: the CA's fingerprint"
  j=$(vm "$n" 'journalctl -u fabric-agent -b -o cat')
  assert_contains "$j" "SSH login material of cluster $cluster kept" "node$n: the log line"
  # Lines 5 and 6 of an Ed25519 key file carry its private half (line 2 is
  # the header every such file shares).
  for k in host$n user; do
    for l in 5 6; do
      assert_not_contains "$j$API_OUT" "$(sed -n ${l}p "$ssh_dir/$k")" "node$n: the journal and the answer ($k's private key, line $l)"
    done
  done
done

step "a renter's whole-machine container on each machine (podman --device fabric-agent.io/rdma=all)"
# The machines have no GPU: the hook's whole-machine check then has nothing
# to hold and passes (docs/pods.md), which is what is asserted here; the
# refusal of a container holding part of the GPUs is tested with fake GPU
# nodes in pods_unit and pods_netns.
for n in 0 1; do
  assert_eq "$(vm "$n" 'ls /dev/nvidia[0-9]* /dev/kfd 2>/dev/null | wc -l')" 0 "node$n: GPU device nodes"
done
renter() {  # renter N ROLE: starts the renter's job in machine N
  local n=$1 role=$2
  mkdir -p "$RUN_DIR/node$n/share/out/renter"
  vm_put "$n" "$LAB_DIR/guest/renter.sh"
  vm_put "$n" "$LAB_DIR/guest/lib.sh"
  # NET_ADMIN for `wg show` (genetlink), NET_RAW for iputils' ping (a file
  # capability): a renter's image that runs them needs both.
  vm "$n" "podman run -d --name renter --network none --cap-add NET_ADMIN,NET_RAW \
    --device fabric-agent.io/rdma=all -e LAB_PEER=10.42.0.$((2 - n)) -e LAB_ROLE=$role \
    -v /lab/files/renter.sh:/renter.sh:ro -v /lab/out/renter:/out \
    --rootfs /var/lib/lab-renter:O sh /renter.sh 2>&1"
}
renter 1 server >/dev/null || { vm 1 'journalctl -t fabric-agent-oci-hook -o cat'; fail "node1: podman run of the renter's container failed"; }
renter 0 client >/dev/null || { vm 0 'journalctl -t fabric-agent-oci-hook -o cat'; fail "node0: podman run of the renter's container failed"; }
for n in 0 1; do
  o=$RUN_DIR/node$n/share/out/renter
  retry 180 1 test -e "$o/done" || { vm "$n" 'podman logs renter; journalctl -u fabric-agent -o cat -n 20'; fail "node$n: the renter's job did not finish"; }
  a=10.42.0.$((n + 1))
  assert_contains "$(cat "$o/addr")" "inet $a/24" "node$n container: ip -4 addr show wg0"
  assert_eq "$(grep -c '^peer: ' "$o/wg")" 1 "node$n container: wg show's peers"
  assert_match "$(grep 'latest handshake' "$o/wg")" 'latest handshake: (Now|[0-9]+ seconds? ago|1 minute(, [0-9]+ seconds?)? ago)' "node$n container: wg show's handshake"
  # One uverbs per fabric port, the fabric HCA's (rxe0), not rxe_up's, no umad.
  fab_uverbs=$(vm "$n" 'grep -l "^rxe0$" /sys/class/infiniband_verbs/uverbs*/ibdev | cut -d/ -f5')
  assert_eq "$(tr '\n' ' ' < "$o/ib")" "rdma_cm $fab_uverbs " "node$n container: ls /dev/infiniband"
  gid=$(vm "$n" "bash -c '. /lab/files/lib.sh; gid_index rxe0 1 192.168.77.$((n + 1))'")
  assert_eq "$(tr '\n' ' ' < "$o/env")" "NCCL_IB_GID_INDEX=$gid NCCL_IB_HCA==rxe0:1 NCCL_SOCKET_IFNAME=wg0 " "node$n container: NCCL env"
  assert_eq "$(tr -s ' ' < "$o/limits")" "Max locked memory unlimited unlimited bytes " "node$n container: memlock raised by the hook"
  assert_eq "$(cat "$o/ping.rc")" 0 "node$n container: ping -c3 10.42.0.$((2 - n)) over the overlay"
  if [ "$n" -eq 0 ]; then
    # ssh 10.42.0.2 from node0's container lands in node1's container, as
    # root, with BatchMode=yes and StrictHostKeyChecking=yes; its sessions
    # get the NCCL variables node1's container has.
    [ "$(cat "$o/ssh.rc")" = 0 ] || { cat "$o/ssh.err"; tail -n 20 "$RUN_DIR/node1/share/out/renter/sshd.log"; }
    assert_eq "$(cat "$o/ssh.rc")" 0 "node0 container: ssh 10.42.0.2 (BatchMode, StrictHostKeyChecking=yes)"
    assert_eq "$(tr '\n' ' ' < "$o/ssh")" "$(vm 1 'podman exec renter hostname') 0 " "node0 container: ssh 10.42.0.2 'hostname; id -u' (node1's container, root)"
    assert_eq "$(tr '\n' ' ' < "$o/ssh-env")" "$(tr '\n' ' ' < "$RUN_DIR/node1/share/out/renter/env")" "node0 container: ssh 10.42.0.2 env | grep NCCL_ (node1's variables)"
    assert_contains "$(cat "$o/ssh-env")" "NCCL_IB_HCA==rxe0:1" "node0 container: NCCL_IB_HCA in node1's ssh session"
  fi
  assert_contains "$(cat "$o/ping")" "3 received" "node$n container: ping"
  assert_eq "$(cat "$o/rdma-target")" "rxe0 1 $gid" "node$n container: ib_write_bw's HCA, port and GID index (from NCCL_IB_*)"
  assert_eq "$(cat "$o/bw.rc")" 0 "node$n container: ib_write_bw's status"
  if [ "$n" -eq 0 ]; then
    bw=$(awk '/#bytes/ { getline; print $4; exit }' "$o/bw")
    assert_gt "${bw:-0}" 0 "node$n container: ib_write_bw (client) average MB/s"
  else
    iters=$(awk '/#bytes/ { getline; print $2; exit }' "$o/bw")
    assert_gt "${iters:-0}" 0 "node$n container: ib_write_bw (server) iterations"
  fi
  api "$n" GET /v1/pods
  pods=$API_OUT
  assert_eq "$(jq -c '[.pods[] | {alive, interface, address}]' <<<"$pods")" "[{\"alive\":true,\"interface\":\"wg0\",\"address\":\"$a/24\"}]" "node$n: GET /v1/pods"
done

step "the daemon's probe API: node0 measures the pair over verbs (POST /v1/probes/rdma/serve|run)"
# The control plane's probe key for this pair, given to both agents.
key=$(openssl rand -hex 32)
api 1 POST /v1/probes/rdma/serve "{\"key\":\"$key\",\"bind\":\"192.168.77.2\"}"
r=$API_OUT
assert_eq "$API_CODE" 200 "node1: POST /v1/probes/rdma/serve"
assert_eq "$(jq -r '"\(.serving) \(.hca) \(.gid_index)"' <<<"$r")" "true rxe0:1 1" "node1: probe listener (serving, HCA, GID index)"
API_TIMEOUT=120 api 0 POST /v1/probes/rdma/run "{\"peer\":\"192.168.77.2\",\"key\":\"$key\",\"duration_s\":2}"
r=$API_OUT
assert_eq "$API_CODE" 200 "node0: POST /v1/probes/rdma/run"
note "probe: $(jq -c '{status, reason, message, gbps, latency_us, hca, gid_index, gid}' <<<"$r")"
# Emulated RDMA runs far below the 2.5 Gb/s soft-RoCE reports, so a
# measurement is ok or degraded (below_rate); failed means it did not run.
assert_match "$(jq -r .status <<<"$r")" '^(ok|degraded)$' "probe status"
assert_gt "$(jq -r .gbps <<<"$r")" 0 "probe Gb/s"
for q in p50 p90 p99 max; do
  assert_gt "$(jq -r ".latency_us.$q" <<<"$r")" 0 "probe latency_us.$q"
done
assert_eq "$(jq -r '"\(.hca) \(.gid_index) \(.gid)"' <<<"$r")" "rxe0 1 ::ffff:192.168.77.1" "probe's HCA, GID index and GID (what NCCL uses)"
api 1 DELETE /v1/probes/rdma/serve

step "/metrics of each machine: promtool check metrics, the rxe port counters"
sent_pkts() { awk '/^fabric_agent_port_hw_events_total\{.*device="rxe0".*counter="sent_pkts"/ { print $2 }' "$1"; }
for n in 0 1; do
  # The counters are those of the last discovery pass (one per
  # refresh_interval, 30 s): wait for one after the traffic above.
  for _ in $(seq 1 45); do
    api "$n" GET /metrics
    printf '%s\n' "$API_OUT" > "$RUN_DIR/out/metrics$n.txt"
    [ "$(sent_pkts "$RUN_DIR/out/metrics$n.txt")" -gt 0 ] 2>/dev/null && break
    sleep 1
  done
  assert_eq "$API_CODE" 200 "node$n: GET /metrics"
  rc=0; out=$(promtool check metrics < "$RUN_DIR/out/metrics$n.txt" 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || { echo "$out"; fail "node$n: promtool check metrics exited $rc"; }
  pass "node$n: promtool check metrics"
  # soft-RoCE has no IB port counters (ports/1/counters), only hw_counters;
  # the ib_write_bw and probe traffic above moved them.
  v=$(sent_pkts "$RUN_DIR/out/metrics$n.txt")
  assert_gt "${v:-none}" 0 "node$n: rxe0's sent_pkts in /metrics"
  names=$(awk '!/^#/ { sub(/{.*/, "", $1); print $1 }' "$RUN_DIR/out/metrics$n.txt" | sort -u | tr '\n' ' ')
  assert_not_contains "$names" "_bits" "node$n: metric names (bytes, never bits)"
done

step "fault: systemctl restart fabric-agent on node1 while node0's container pings it and the control plane long-polls"
etag=$(curl -sS --cacert "$CA/ca.crt" -H @"${AUTH[1]}" -o /dev/null -D - "${API[1]}/v1/status" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')
assert_match "$etag" '^W/"' "node1: status ETag"
bg_start longpoll curl -sS --max-time 200 --cacert "$CA/ca.crt" -H @"${AUTH[1]}" -H "If-None-Match: $etag" \
  -o "$RUN_DIR/out/longpoll.body" -w '%{http_code}\n' "${API[1]}/v1/status?wait=180"
ping_pid=$(vm_start 0 'podman exec renter ping -i 0.1 -c 150 -W 1 10.42.0.2')
sleep 3
kill -0 "${_LAB_BG[longpoll]}" || { bg_log longpoll; fail "the long-poll ended before the restart"; }
since=$(vm 1 'date +%s')
vm 1 'systemctl restart fabric-agent'
rc=0; out=$(vm_collect 0 "$ping_pid") || rc=$?
summary=$(grep 'packets transmitted' <<<"$out" || true)
note "node0 container -> 10.42.0.2 during the restart: $summary"
assert_contains "$summary" " 0% packet loss" "ping over the overlay across node1's agent restart"
assert_eq "$rc" 0 "ping's status"
bg_wait longpoll || true
note "the long-poll pending at the stop: $(bg_log longpoll | tail -n 1)"
j=$(vm 1 "journalctl -u fabric-agent --since @$since -o cat")
assert_contains "$j" "fabric-agent.service: Deactivated successfully." "node1: the stop with a long-poll waiting"
assert_not_contains "$j" "code=killed" "node1: the stop"
assert_not_contains "$j" "code=dumped" "node1: the stop"
assert_not_contains "$j" "Failed with result" "node1: the stop"
assert_eq "$(vm 1 'systemctl show -p NRestarts --value fabric-agent')" 0 "node1: automatic restarts (Restart=on-failure)"
assert_eq "$(vm 1 'systemctl is-active fabric-agent')" active "node1: unit after the restart"
assert_contains "$j" "adopted its network namespace" "node1: the new daemon adopted the pod's wg0"

step "fault: a second fabric container on node0, which already has one, is refused"
rc=0; out=$(vm 0 'podman run --rm --network none --device fabric-agent.io/rdma=all --rootfs /var/lib/lab-renter:O true 2>&1') || rc=$?
assert_ne "$rc" 0 "node0: podman run of a second fabric container"
line=$(vm 0 'journalctl -t fabric-agent-oci-hook -o cat -n 1')
assert_match "$line" '^fabric-agent: refused: container [0-9a-f]+ \(pid [0-9]+\) already holds the RDMA fabric of this host; one fabric container per machine$' "node0: the hook's line"
api 0 GET /v1/pods
assert_eq "$(jq -c '[.pods[] | .alive]' <<<"$API_OUT")" "[true]" "node0: registrations (the first container only)"

step "fault: node1 reboots: the service comes back by itself, the mesh from persisted state"
boot0=$(vm 1 'cat /proc/sys/kernel/random/boot_id')
t_reboot=$(now)
vm_start 1 'systemctl reboot' >/dev/null
retry 120 1 sh -c "b=\$(python3 '$LAB_DIR/qga.py' exec '$RUN_DIR/node1/qga.sock' --timeout 5 -- 'cat /proc/sys/kernel/random/boot_id' 2>/dev/null) && [ -n \"\$b\" ] && [ \"\$b\" != '$boot0' ]" ||
  { m_console_tail 1; fail "node1 did not come back from the reboot"; }
state=$(vm 1 'systemctl is-system-running --wait' || true)
note "node1 rebooted to '$state' in $(since "$t_reboot")s; $(vm 1 'systemd-analyze time' | head -n 1)"
retry 60 1 sh -c "[ \"\$(python3 '$LAB_DIR/qga.py' exec '$RUN_DIR/node1/qga.sock' -- 'systemctl is-active fabric-agent')\" = active ]" ||
  { vm 1 'systemctl status fabric-agent --no-pager; journalctl -b -u fabric-agent -o cat'; fail "node1: fabric-agent not active after the reboot"; }
pass "node1: fabric-agent active after the reboot, started by systemd"
assert_contains "$(vm 1 'ip -4 addr show dev wg0')" "inet 10.42.0.2/24" "node1: host wg0 from the persisted mesh (the pod died with the machine)"
assert_eq "$(vm 1 'wg show wg0 peers | wc -l')" 1 "node1: wg0 peers"
api 1 GET /v1/pods
assert_eq "$(jq -c .pods <<<"$API_OUT")" "[]" "node1: registrations (the pod that died with the reboot is gone)"
rc=0; out=$(vm 0 'podman exec renter ping -c 3 -w 30 10.42.0.2') || rc=$?
assert_eq "$rc" 0 "node0 container: ping 10.42.0.2 after node1's reboot"
assert_match "$(vm 1 'wg show wg0 latest-handshakes' | awk '{ print $2 }')" '^[1-9][0-9]*$' "node1: a handshake with node0 after the reboot"

step "fault: node1's fabric netdev down: a new fabric container is refused, naming the port"
fab=$(vm 1 "ip -o link | awk -F': ' '/52:54:00:fa:00:01/ { print \$2 }'")
rc=0; out=$(vm 1 "ip link set $fab down && podman run --rm --network none --device fabric-agent.io/rdma=all --rootfs /var/lib/lab-renter:O true 2>&1") || rc=$?
assert_ne "$rc" 0 "node1: podman run with the fabric port down"
line=$(vm 1 'journalctl -t fabric-agent-oci-hook -o cat -n 1')
assert_match "$line" '^fabric-agent: refused: no fabric port is ACTIVE \(rxe0:1 is [A-Z_]+\)$' "node1: the hook's line"
assert_not_contains "$line" "rxe0:1 is ACTIVE" "node1: the port's state in the line"
vm 1 "ip link set $fab up"
retry 50 0.2 sh -c "[ \"\$(python3 '$LAB_DIR/qga.py' exec '$RUN_DIR/node1/qga.sock' -- 'cat /sys/class/infiniband/rxe0/ports/1/state')\" = '4: ACTIVE' ]"
rc=0; out=$(vm 1 'podman run --rm --network none --device fabric-agent.io/rdma=all --rootfs /var/lib/lab-renter:O true 2>&1') || rc=$?
[ "$rc" -eq 0 ] || { echo "$out"; vm 1 'journalctl -t fabric-agent-oci-hook -o cat -n 3'; fail "node1: a fabric container once the port is back"; }
pass "node1: a fabric container starts again once the port is ACTIVE"

step "logs under journald: priorities (journalctl -p), one timestamp"
# A config the agent refuses on reload is logged as an error and the running
# config stays (docs/operator.md).
vm 1 "cp /etc/fabric-agent/agent.yaml /root/agent.yaml && echo 'refresh_interval: soon' >> /etc/fabric-agent/agent.yaml && systemctl reload fabric-agent"
retry 20 0.5 sh -c "python3 '$LAB_DIR/qga.py' exec '$RUN_DIR/node1/qga.sock' -- 'journalctl -u fabric-agent -b -o cat -p warning' | grep -q 'reload failed'"
vm 1 'cp /root/agent.yaml /etc/fabric-agent/agent.yaml && systemctl reload fabric-agent'
warn=$(vm 1 'journalctl -u fabric-agent -b -o cat -p warning _COMM=fabric-agent')
assert_contains "$warn" "reload failed, keeping the running config" "node1: journalctl -p warning -u fabric-agent (an error)"
assert_contains "$warn" "warning [pods] CDI spec: no fabric port is ACTIVE" "node1: journalctl -p warning -u fabric-agent (the port-down warning)"
assert_not_contains "$warn" "ready (generation" "node1: journalctl -p warning (an info line)"
info=$(vm 1 'journalctl -u fabric-agent -b -o cat -p info _COMM=fabric-agent')
assert_contains "$info" "] ready (generation" "node1: journalctl -p info -u fabric-agent"
assert_eq "$(grep -cE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' <<<"$info" || true)" 0 "node1: agent lines carrying a time of their own in the journal"
assert_eq "$(grep -cE '^<[0-9]>' <<<"$info" || true)" 0 "node1: priority prefixes left in the journal"

step "the unit's sandbox: systemd-analyze security fabric-agent"
sec=$(vm 0 'systemd-analyze security --no-pager fabric-agent')
printf '%s\n' "$sec" | grep '✗' | sed 's/^/   /'
exposure=$(sed -n 's/.*Overall exposure level for fabric-agent.service: \([0-9.]*\).*/\1/p' <<<"$sec")
note "overall exposure: $exposure"
assert_match "$exposure" '^[0-9]+\.[0-9]$' "exposure level"
