# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by bench/mesh/run.sh: the synthetic peer lists and the
# desired-state documents made of them.

# gen_peers N OUT: N peers, one per line "KEY ENDPOINT PREFIX": random 32-byte
# public keys, endpoints in 192.0.0/16, one /32 each in 10.64/16.
gen_peers() {
  local n=$1 out=$2
  : >"$out"
  for ((k = 0; k < n; k++)); do
    printf '%s 192.0.%d.%d:51820 10.64.%d.%d/32\n' "$(head -c32 /dev/urandom | base64)" \
      $((k / 250)) $((k % 250 + 1)) $((k / 250 + 1)) $((k % 250 + 1)) >>"$out"
  done
}

# mesh_json PEERS_FILE [IFNAME]: the desired state of a node at 10.64.0.1/16
# on IFNAME (default wgb) with the peers of PEERS_FILE (may be empty).
mesh_json() {
  printf '{"cluster_id":"bench","interface":"%s","address":"10.64.0.1/16","listen_port":51820,"peers":[' "${2:-wgb}"
  awk '{printf "%s{\"public_key\":\"%s\",\"endpoint\":\"%s\",\"allowed_ips\":[\"%s\"]}", (NR>1?",":""), $1, $2, $3}' "$1"
  printf ']}\n'
}

# mesh_files DIR: the lab's 250-peer workload on interface wgb, written to
# DIR: empty.json (no peer), m250.json (250 peers of gen_peers; their list
# in p250).
mesh_files() {
  : >"$1/none"
  gen_peers 250 "$1/p250"
  mesh_json "$1/none" >"$1/empty.json"
  mesh_json "$1/p250" >"$1/m250.json"
}
