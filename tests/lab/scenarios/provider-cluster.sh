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

# api N METHOD PATH [BODY]: the control plane's request to machine N; the
# body on stdout, the HTTP status in API_CODE.
api() {
  local n=$1 m=$2 p=$3 body=${4:-} out
  out=$(curl -sS --max-time "${API_TIMEOUT:-60}" --cacert "$CA/ca.crt" -H @"${AUTH[$n]}" -X "$m" \
    ${body:+-H 'Content-Type: application/json' --data-binary "$body"} \
    -w '\n%{http_code}' "${API[$n]}$p") || { API_CODE=000; echo "$out"; return 1; }
  API_CODE=${out##*$'\n'}
  printf '%s\n' "${out%$'\n'*}"
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
for n in 0 1; do
  vm_put "$n" "$M_DEB"
  out=$(vm "$n" "cd /lab/files && apt install -y ./$deb 2>&1") || { echo "$out"; fail "node$n: apt install ./$deb failed"; }
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
  AUTH[$n]=$RUN_DIR/auth$n
  (umask 077; printf 'Authorization: Bearer %s\n' "$(vm "$n" 'cat /var/lib/fabric-agent/token')" > "${AUTH[$n]}")
  retry 30 1 api "$n" GET /v1/status >/dev/null
  assert_eq "$API_CODE" 200 "node$n: GET /v1/status over TLS through the port forward"
done
