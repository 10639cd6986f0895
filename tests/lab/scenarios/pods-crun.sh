# SPDX-License-Identifier: Apache-2.0
# pods-crun: a whole container through the real path on a real kernel. The
# daemon (`fabric-agent run`, kernel WireGuard wg0 from a persisted mesh)
# discovers the two soft-RoCE HCAs as ACTIVE and writes the CDI spec; the
# scenario applies the spec's edits to a crun bundle (as a CDI-aware engine
# does) whose config sets RLIMIT_MEMLOCK to 64 KiB soft and hard; crun runs
# the hooks: create-runtime raises memlock to unlimited (root in the VM has
# CAP_SYS_RESOURCE), registers with the daemon, which moves wg0 in; the busybox
# container sees memlock unlimited, the fabric's uverbs nodes, the NCCL env
# and wg0 with its address; poststop gives wg0 back to the host.
. "$LAB/lib.sh"

command -v crun >/dev/null || fail "no crun in the guest (tests/lab/run takes the host's: apt-get install crun)"

step "fabric: two rxe devices with ACTIVE ports; cgroup v2 for crun"
rxe_pair
mkdir -p /sys/fs/cgroup
mount -t cgroup2 none /sys/fs/cgroup

step "the daemon, with a persisted mesh (kernel WireGuard wg0)"
w=/tmp/pc
mkdir -p "$w/state" "$w/bundle" "$w/out" "$w/rootfs"/{bin,proc,dev,sys,tmp,out}
echo '{"version":1,"mesh":{"cluster_id":"lab","interface":"wg0","address":"10.42.0.1/24","listen_port":51820,"peers":[]},"pods":[]}' \
  > "$w/state/state.json"
cat > "$w/agent.yaml" <<EOC
listen: "127.0.0.1:0"
state_dir: $w/state
log_level: debug
refresh_interval: 1h
overlay: {backend: kernel, interface: wg0}
pods: {socket: $w/pods.sock, cdi_dir: $w/cdi}
EOC
bg_start daemon fabric-agent run --config "$w/agent.yaml"
retry 150 0.2 grep -q "ready (generation" "$LAB_OUT/daemon.log" || { bg_log daemon; fail "daemon not ready"; }
assert_contains "$(ip -4 addr show dev wg0)" "10.42.0.1/24" "host wg0 from the persisted mesh"
spec=$w/cdi/fabric-agent.io-rdma.json
[ -f "$spec" ] || { bg_log daemon; fail "no CDI spec at $spec"; }
note "CDI spec: $(jq -c '{cdiVersion, kind, nodes: [.devices[0].containerEdits.deviceNodes[].path], env: .containerEdits.env}' "$spec")"

step "a crun bundle with the spec's edits, memlock 64 KiB"
cp "$(command -v busybox)" "$w/rootfs/bin/busybox"
for a in sh cat ls ip grep sort env touch sleep; do ln -s busybox "$w/rootfs/bin/$a"; done
(cd "$w/bundle" && crun spec)
devs='[]'
while read -r p; do
  read -r maj min < <(stat -c '%t %T' "$p")
  devs=$(jq -c --arg p "$p" --argjson a "$((16#$maj))" --argjson b "$((16#$min))" \
    '. + [{path: $p, type: "c", major: $a, minor: $b, fileMode: 438, uid: 0, gid: 0}]' <<< "$devs")
done < <(jq -r '.devices[0].containerEdits.deviceNodes[] | .hostPath // .path' "$spec")
script='grep "Max locked memory" /proc/self/limits > /out/limits; ls /dev/infiniband > /out/ib;
env | grep ^NCCL_ | sort > /out/env; ip -4 addr show dev wg0 > /out/addr 2>&1; touch /out/ready;
while [ ! -e /out/stop ]; do sleep 0.1; done'
jq --argjson devs "$devs" --slurpfile spec "$spec" --arg script "$script" --arg root "$w/rootfs" \
   --arg out "$w/out" --arg hooklog "$LAB_OUT/hook.log" '
  .process.terminal = false | .process.args = ["sh", "-c", $script]
  | .root = {path: $root, readonly: true}
  | .mounts += [{destination: "/out", type: "bind", source: $out, options: ["rbind", "rw"]}]
  | .linux.devices = $devs
  | .process.env += $spec[0].containerEdits.env
  | .process.rlimits = ((.process.rlimits // []) | map(select(.type != "RLIMIT_MEMLOCK")))
                        + [{type: "RLIMIT_MEMLOCK", soft: 65536, hard: 65536}]
  | .hooks = ($spec[0].containerEdits.hooks | group_by(.hookName)
              | map({key: .[0].hookName, value: map({path, args, timeout})}) | from_entries)
  | .annotations["run.oci.hooks.stderr"] = $hooklog' \
  "$w/bundle/config.json" > "$w/bundle/config.json.new"
mv "$w/bundle/config.json.new" "$w/bundle/config.json"
note "hooks: $(jq -c .hooks "$w/bundle/config.json")"

step "crun run"
# The guest root is the initramfs (rootfs), which pivot_root refuses (EINVAL).
bg_start crun crun run --no-pivot --bundle "$w/bundle" lab-pod
retry 300 0.1 test -e "$w/out/ready" || { bg_log crun; cat "$LAB_OUT/hook.log" 2>/dev/null; bg_log daemon | tail -n 20; fail "the container did not start"; }
assert_fails "host has no wg0 while the container holds it" ip link show dev wg0

step "kill -9 + restart of the daemon while the container holds wg0 (kernel backend)"
kill -9 "${_LAB_BG[daemon]}"
bg_wait daemon || true
mv "$LAB_OUT/daemon.log" "$LAB_OUT/daemon-1.log"
bg_start daemon fabric-agent run --config "$w/agent.yaml"
retry 150 0.2 grep -q "ready (generation" "$LAB_OUT/daemon.log" || { bg_log daemon; fail "daemon not ready after the restart"; }
assert_contains "$(bg_log daemon)" "pod lab-pod (pid" "restarted daemon adopted the pod"
assert_contains "$(bg_log daemon)" "adopted its network namespace" "restarted daemon adopted the pod"
# With the kernel backend an apply in the host namespace would create a
# second wg0 here: the restarted daemon must configure the pod's instead.
assert_fails "host has no wg0 after the restart" ip link show dev wg0
cpid=$(jq -r '.pods[0].pid' "$w/state/pods.json")
assert_contains "$(nsenter -t "$cpid" -n ip -4 addr show dev wg0)" "inet 10.42.0.1/24" "the container's wg0 after the restart"
touch "$w/out/stop"
rc=0
bg_wait crun || rc=$?
[ "$rc" -eq 0 ] || { bg_log crun; cat "$LAB_OUT/hook.log" 2>/dev/null; bg_log daemon | tail -n 20; fail "crun run exited $rc"; }
assert_eq "$(tr -s ' ' < "$w/out/limits")" "Max locked memory unlimited unlimited bytes " "container's memlock"
ib=$(tr '\n' ' ' < "$w/out/ib")
assert_contains "$ib" "rdma_cm" "container's /dev/infiniband"
assert_contains "$ib" "uverbs" "container's /dev/infiniband"
assert_not_contains "$ib" "umad" "container's /dev/infiniband"
assert_contains "$(cat "$w/out/env")" "NCCL_SOCKET_IFNAME=wg0" "container's NCCL env"
assert_contains "$(cat "$w/out/env")" "NCCL_IB_HCA==$RXE_A:1,$RXE_B:1" "container's NCCL env"
assert_contains "$(cat "$w/out/addr")" "inet 10.42.0.1/24" "wg0 inside the container"
assert_contains "$(cat "$LAB_OUT/daemon-1.log")" "registered; wg0 10.42.0.1/24 moved into its network namespace" \
  "first daemon's log: registration"

step "poststop: wg0 back on the host, registration gone"
assert_contains "$(ip -4 addr show dev wg0)" "10.42.0.1/24" "host wg0 after the container exited"
assert_eq "$(jq -c .pods "$w/state/pods.json")" "[]" "persisted registrations"
assert_contains "$(bg_log daemon)" "pod lab-pod unregistered" "daemon log: unregistration"
