# SPDX-License-Identifier: Apache-2.0
# lab: machines
# provider-kubernetes: deploy/kubernetes run by a real container engine on a
# GPU node's RDMA fabric (soft-RoCE). One machine boots Debian 12 with
# systemd; the package is not installed on it (the node runs the agent as a
# DaemonSet only); the package becomes the image fabric-agent:0.1.0 by
# docs/kubernetes.md's Dockerfile, without a registry; the DaemonSet's pod
# template, as `kubectl kustomize deploy/kubernetes` renders it, runs as a
# Pod under `podman kube play` with the ConfigMap and the token Secret the
# docs have the operator create; a second pod, rendered with the component
# rdma-device-plugin, runs the agent without privileged. Podman 4.3.1
# (Debian 12) cannot express every field the manifest uses: each stand-in
# is listed at k_pod below and in docs/kubernetes.md ("Tests").
# Runs on the host (tests/lab/machines.sh); `vm 0 CMD` runs CMD in the machine.

K8S=$SRC_DIR/deploy/kubernetes
KF=$RUN_DIR/node0/share/files     # /lab/files in the machine
# What the kubelet would lay out on the node for the volumes Podman cannot
# make as it does (k_pod), in the machine's /run (a tmpfs, as the kubelet's
# secret volumes and medium Memory emptyDirs are).
KUBELET=/run/lab-kubelet
mkdir -p "$KF"

# ---------------------------------------------------------------- the image
# k_chroot DIR CMD...: CMD chrooted into DIR (the packaging tests' in_root,
# with the lab's apt archive cache).
k_chroot() {
  ( FA_TEST_NAME=lab-image; source "$SRC_DIR/tests/packaging/lib.sh"; FA_ROOT_APT=$CACHE/machine/archives in_root "$@" )
}

# k_dockerfile: the Dockerfile of docs/kubernetes.md, one instruction a line
# (continuations joined, comments and blank lines left out).
k_dockerfile() {
  sed -n '/^```dockerfile$/,/^```$/{/^```/d;p}' "$SRC_DIR/docs/kubernetes.md" |
    sed -e ':a' -e '/\\$/{N;s/\\\n//;ba}' | grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$'
}

# k_image_build OUT TAG: the image as `docker build` makes it from that
# Dockerfile, written as a docker-archive (`podman load`; one layer, the
# config's Env and Entrypoint). FROM debian:12-slim without a registry:
# the packaging tests' Debian 12 minbase root, without the systemd it adds,
# slimmed as the debian:12-slim image is (dpkg's path excludes).
k_image_build() {
  local out=$1 tag=$2 tmp root log instr args entry= ls cs
  [ -f "$out" ] && return 0
  tmp=$(mktemp -d "$CACHE/machine/kube-image.tmp.XXXXXX")
  root=$tmp/root log=$tmp/build.log
  ( FA_TEST_NAME=lab-image; source "$SRC_DIR/tests/packaging/lib.sh"; fa_unpack_root "$root" 12 ) ||
    { rm -rf "$tmp"; echo "the Debian 12 root did not unpack" >&2; return 1; }
  printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    'path-exclude /usr/share/groff/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/linda/*' \
    'path-exclude /usr/share/lintian/overrides/*' 'path-exclude /usr/share/locale/*' \
    'path-exclude /usr/share/man/*' > "$root/etc/dpkg/dpkg.cfg.d/docker"
  # Minbase: the packages of priority required and what they depend on;
  # systemd and what it brought go.
  if ! k_chroot "$root" sh -c 'apt-mark auto $(dpkg-query -W -f "\${Package} \${Priority}\n" | awk "\$2 != \"required\" { print \$1 }") &&
      apt-get -q -y purge --auto-remove systemd && rm -rf /var/lib/apt/lists/*' > "$log" 2>&1; then
    tail -n 20 "$log" >&2; rm -rf "$tmp"; echo "debian:12-slim's stand-in: apt-get failed" >&2; return 1
  fi
  find "$root/usr/share/doc" -mindepth 2 ! -type d ! -name copyright -delete
  rm -rf "$root"/usr/share/{groff,info,linda,locale,man}/* "$root"/usr/share/lintian/overrides/* "$root"/var/cache/apt/*.bin
  while read -r instr args; do
    case "$instr" in
      FROM) [ "$args" = debian:12-slim ] || { rm -rf "$tmp"; echo "Dockerfile: FROM $args: the test stands in for debian:12-slim only" >&2; return 1; } ;;
      COPY)
        # COPY the package's file name, as the packaging build names it.
        set -- $args
        [ "$#" -eq 2 ] && [ "$1" = "$(basename "$M_DEB")" ] ||
          { rm -rf "$tmp"; echo "Dockerfile: COPY $args: expected COPY $(basename "$M_DEB") DIR/" >&2; return 1; }
        cp "$M_DEB" "$root$2" ;;
      RUN)
        echo "RUN $args" >> "$log"
        k_chroot "$root" sh -c "$args" >> "$log" 2>&1 || { tail -n 20 "$log" >&2; rm -rf "$tmp"; echo "Dockerfile: RUN failed" >&2; return 1; } ;;
      ENTRYPOINT) entry=$args ;;
      *) rm -rf "$tmp"; echo "Dockerfile: $instr: not an instruction this test builds" >&2; return 1 ;;
    esac
  done < <(k_dockerfile)
  : > "$root/etc/resolv.conf"
  rm -f "$root"/var/cache/apt/*.bin
  mkdir "$tmp/a"
  tar -C "$root" --numeric-owner -cf "$tmp/layer.tar" .
  ls=$(sha256sum < "$tmp/layer.tar" | cut -d' ' -f1)
  mkdir "$tmp/a/$ls" && mv "$tmp/layer.tar" "$tmp/a/$ls/layer.tar"
  # debian:12-slim's Env; ENTRYPOINT resets the base's Cmd.
  jq -cn --arg l "sha256:$ls" --argjson e "${entry:-null}" \
    '{architecture: "amd64", os: "linux", rootfs: {type: "layers", diff_ids: [$l]},
      config: {Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], Entrypoint: $e}}' > "$tmp/a/config.json"
  cs=$(sha256sum < "$tmp/a/config.json" | cut -d' ' -f1)
  mv "$tmp/a/config.json" "$tmp/a/$cs.json"
  jq -cn --arg c "$cs.json" --arg l "$ls/layer.tar" --arg t "$tag" '[{Config: $c, RepoTags: [$t], Layers: [$l]}]' > "$tmp/a/manifest.json"
  tar -C "$tmp/a" -cf "$tmp/image.tar" manifest.json "$cs.json" "$ls"
  mv "$tmp/image.tar" "$out"
  rm -rf "$tmp"
}

# ---------------------------------------------------------------- the manifests
# k_render [COMPONENT]: deploy/kubernetes as `kubectl apply -k` applies it
# (with COMPONENT added to its components), one JSON object per document:
# kubectl's offline conversion (removing an annotation none of them has,
# --local: no cluster), which adds an empty annotations map.
k_render() {
  local dir=$K8S
  if [ -n "${1:-}" ]; then
    dir=$RUN_DIR/kustomize-$1
    rm -rf "$dir" && cp -r "$K8S" "$dir" && rm -rf "$dir/validate"
    printf 'components:\n  - %s\n' "$1" >> "$dir/kustomization.yaml"
  fi
  kubectl kustomize "$dir" | kubectl annotate --local -f - -o json fabric-agent.io/none-
}

# k_pod NODE_IP NODE_NAME: the DaemonSet's pod template as the Pod the
# DaemonSet controller would make (metadata from the template, name and
# namespace from the DaemonSet), then Podman 4.3.1's stand-ins:
#   ports           Podman publishes every containerPort on the host and refuses
#                   that with hostNetwork; under hostNetwork they only name the
#                   host's ports: removed.
#   livenessProbe   Podman runs an httpGet probe as `curl` inside the container
#                   (the image has none) and restarts the container when it
#                   fails: removed; the test makes the probes' request from the
#                   node's network namespace, as the kubelet does. (Podman
#                   ignores startupProbe and readinessProbe.)
#   status.hostIP   not in Podman's downward API: the value the kubelet reports
#                   without --node-ip, the address of the default route's NIC.
#   hostname        hostNetwork gives a Kubernetes pod the node's UTS namespace,
#                   Podman a hostname of its own (the pod's name): the node's.
#   secret volume   Podman 4.3.1 dereferences an unset `optional`, writes the
#                   base64 text instead of the bytes, and ignores defaultMode
#                   (0644): a hostPath directory holding each key decoded, at
#                   defaultMode, as the kubelet writes a secret volume.
#   configMap       Podman ignores subPath (it mounts the volume's directory over
#                   the file): a hostPath File holding the key, as the kubelet
#                   bind-mounts it.
#   emptyDir        Podman's starts with the image's directory (0755): a fresh
#                   hostPath directory per pod, 0777 as the kubelet makes one.
#   init container  Podman removes a `once` init container as it exits and can
#                   find it still running (play fails): the annotation that
#                   keeps it (`always`, run at each start of the pod).
#   hostPID         not read by Podman 4.3.1's kube play (4.4 reads it): the play
#                   runs with a containers.conf whose default PID namespace is
#                   the host's (k_play), which the pod's containers take as
#                   they name none.
#   device plugin   (pod 2, the component rdma-device-plugin) no kubelet to ask
#                   the RDMA shared device plugin for rdma/rdma_shared_device_a:
#                   the containers.conf adds what its Allocate answers, every
#                   character device of the node's /dev/infiniband (rdmamap's
#                   uverbs, umad, issm and rdma_cm), as the kubelet adds the
#                   answer's DeviceSpecs. Podman ignores the limit itself.
k_pod() {
  jq --arg ip "$1" --arg node "$2" --arg kubelet "$KUBELET" '
    select(.kind == "DaemonSet")
    | {apiVersion: "v1", kind: "Pod",
       metadata: (.spec.template.metadata + {name: .metadata.name, namespace: .metadata.namespace}),
       spec: .spec.template.spec}
    | .metadata.annotations["io.podman.annotations.init.container.type"] = "always"
    | .spec.hostname = $node
    | .spec.containers |= map(del(.ports, .livenessProbe))
    | (.spec.containers[], .spec.initContainers[]?) |= (if .env then .env |= map(
        if .valueFrom.fieldRef.fieldPath == "status.hostIP" then {name, value: $ip} else . end) else . end)
    | [.spec.volumes[] | select(.configMap) | .name] as $cms
    | (.spec.containers[], .spec.initContainers[]?) |= (if .volumeMounts then .volumeMounts |= map(
        if (.name | IN($cms[])) then del(.subPath) else . end) else . end)
    | .spec.volumes |= map(
        if .secret or .emptyDir then {name, hostPath: {path: "\($kubelet)/\(.name)", type: "Directory"}}
        elif .configMap then {name, hostPath: {path: "\($kubelet)/\(.name)", type: "File"}}
        else . end)'
}

# k_kubelet_files: what the kubelet would write for the pod's volumes that
# k_pod stands in for, into /lab/files/kubelet/ with a list k_layout reads.
k_kubelet_files() {
  local ds=$RUN_DIR/daemonset.json v name key mode src subs
  jq 'select(.kind == "DaemonSet")' "$RUN_DIR/render.json" > "$ds"
  rm -rf "$KF/kubelet" && mkdir -p "$KF/kubelet"
  : > "$KF/kubelet/layout"
  while read -r v; do
    name=$(jq -r .name <<<"$v")
    if [ "$(jq -r '.secret != null' <<<"$v")" = true ]; then
      # Each key of the Secret, decoded, at defaultMode (the kubelet's default 0644).
      src=$(jq -r .secret.secretName <<<"$v")
      mode=$(printf '%o' "$(jq -r '.secret.defaultMode // 420' <<<"$v")")
      mkdir -p "$KF/kubelet/$name"
      for key in $(jq -r --arg s "$src" 'select(.kind == "Secret" and .metadata.name == $s) | .data | keys[]' "$RUN_DIR/secret.json"); do
        jq -r --arg s "$src" --arg k "$key" 'select(.kind == "Secret" and .metadata.name == $s) | .data[$k]' "$RUN_DIR/secret.json" |
          base64 -d > "$KF/kubelet/$name/$key"
        echo "secret $name $key $mode" >> "$KF/kubelet/layout"
      done
    elif [ "$(jq -r '.configMap != null' <<<"$v")" = true ]; then
      # The one key its mounts name with subPath, at defaultMode.
      src=$(jq -r .configMap.name <<<"$v")
      mode=$(printf '%o' "$(jq -r '.configMap.defaultMode // 420' <<<"$v")")
      subs=$(jq -r --arg n "$name" '.spec.template.spec | (.containers + (.initContainers // []))[] | (.volumeMounts // [])[]
        | select(.name == $n) | .subPath // "(none)"' "$ds" | sort -u)
      case "$subs" in
        *$'\n'*|"(none)"|"") fail "configMap volume $name: mounted with subPaths '$subs'; the stand-in makes one subPath mount" ;;
      esac
      jq -r --arg c "$src" --arg k "$subs" 'select(.kind == "ConfigMap" and .metadata.name == $c) | .data[$k] // error("no key")' \
        "$RUN_DIR/render.json" > "$KF/kubelet/$name" || fail "ConfigMap $src has no key $subs"
      echo "configmap $name - $mode" >> "$KF/kubelet/layout"
    elif [ "$(jq -r '.emptyDir != null' <<<"$v")" = true ]; then
      echo "emptydir $name - 777" >> "$KF/kubelet/layout"
    fi
  done < <(jq -c '.spec.template.spec.volumes[]' "$ds")
}

# k_layout: in the machine, the kubelet's part for a new pod: its emptyDirs
# fresh (0777), its secret and configMap files.
k_layout() {
  vm 0 "set -e; K=$KUBELET; F=/lab/files/kubelet; mkdir -p \$K
    while read -r kind name key mode; do
      case \$kind in
        secret) install -d -m 0755 \$K/\$name; install -m \$mode \$F/\$name/\$key \$K/\$name/\$key ;;
        configmap) install -m \$mode \$F/\$name \$K/\$name ;;
        emptydir) rm -rf \$K/\$name; mkdir \$K/\$name; chmod 0777 \$K/\$name ;;
      esac
    done < \$F/layout"
}

# k_api METHOD PATH [HEADER_FILE [BODY]]: an HTTP request to the agent's
# listen address (127.0.0.1:7471, the ConfigMap's) from the machine's own
# network namespace (bash's /dev/tcp: the machine has no curl); HEADER_FILE
# names a file in /lab/files, "-" for none. Sets API_CODE and API_OUT.
k_api() {
  local m=$1 p=$2 h=${3:--} body=${4:-} out
  printf '%s' "$body" > "$RUN_DIR/request.body"
  [ "$h" = - ] || h=/lab/files/$h
  out=$(python3 "$LAB_DIR/qga.py" exec "$RUN_DIR/node0/qga.sock" --timeout 120 --stdin "$RUN_DIR/request.body" -- \
    "bash /lab/files/http.sh 127.0.0.1 7471 $m $p $h") || { API_CODE=000; API_OUT=$out; return 1; }
  API_CODE=$(sed -n '1s|^HTTP/1\.1 \([0-9]*\) .*|\1|p' <<<"$out")
  API_OUT=$(sed '1,/^\r$/d' <<<"$out")
}
cat > "$KF/http.sh" <<'EOF'
# http.sh HOST PORT METHOD PATH HEADER_FILE|- < BODY: one request, the whole answer.
h=$1 port=$2 m=$3 p=$4 hf=$5
body=$(cat)
exec 3<>"/dev/tcp/$h/$port"
{
  printf '%s %s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n' "$m" "$p" "$h" "$port"
  [ "$hf" = - ] || printf '%s\r\n' "$(cat "$hf")"
  [ -z "$body" ] || printf 'Content-Type: application/json\r\nContent-Length: %s\r\n' "${#body}"
  printf '\r\n%s' "$body"
} >&3
cat <&3
EOF

printf '%s\n' '[containers]' 'pidns = "host"' > "$KF/hostpid.conf"

k_healthy() { k_api GET /healthz - && [ "$API_CODE" = 200 ]; }
# k_play N [POD CONF]: the kubelet's part, then `podman kube play` of
# /lab/files/POD (pod.json) with the containers.conf /lab/files/CONF
# (hostpid.conf); until /healthz answers.
k_play() {
  local t out rc=0 pod=${2:-pod.json} conf=${3:-hostpid.conf}
  t=$(now)
  k_layout
  out=$(vm 0 "CONTAINERS_CONF=/lab/files/$conf podman kube play /lab/files/$pod 2>&1") || rc=$?
  [ "$rc" -eq 0 ] || { echo "$out"; vm 0 'podman ps -a; podman logs fabric-agent-fabric-agent' || true; fail "podman kube play (pod $1) exited $rc"; }
  retry 120 0.5 k_healthy || true
  [ "$API_CODE" = 200 ] || { vm 0 'podman ps -a; podman logs fabric-agent-node-address; podman logs fabric-agent-fabric-agent' || true; fail "pod $1: /healthz does not answer (${API_CODE:-000})"; }
  note "pod $1: played and serving in $(since "$t")s"
}

# k_probe: the agent's RDMA probe, rxe0 to itself over the fabric address:
# the verbs device, its registered memory, a run.
k_probe() {
  local pkey
  pkey=$(openssl rand -hex 32)
  k_api POST /v1/probes/rdma/serve auth "{\"key\":\"$pkey\",\"bind\":\"$FABRIC_IP\"}"
  [ "$API_CODE" = 200 ] || echo "$API_OUT"
  assert_eq "$API_CODE" 200 "POST /v1/probes/rdma/serve"
  assert_eq "$(jq -r '"\(.serving) \(.hca)"' <<<"$API_OUT")" "true rxe0:1" "probe listener (serving, HCA)"
  k_api POST /v1/probes/rdma/run auth "{\"peer\":\"$FABRIC_IP\",\"key\":\"$pkey\",\"duration_s\":1}"
  note "probe: $(jq -c '{status, reason, gbps, hca, gid_index}' <<<"$API_OUT")"
  # Emulated RDMA runs far below the port's rate: ok or degraded (below_rate).
  assert_match "$(jq -r .status <<<"$API_OUT")" '^(ok|degraded)$' "probe status"
  assert_gt "$(jq -r .gbps <<<"$API_OUT")" 0 "probe Gb/s"
  k_api DELETE /v1/probes/rdma/serve auth
}

# k_renter: a renter's container asking for the fabric (CDI), on the node
# without the package: wg0 and the NCCL variables move in, GET /v1/pods
# lists it, and wg0 comes back at its stop. Leaves the node's wg0 in L (wg0).
k_renter() {
  local t rc out
  t=$(now)
  rc=0; out=$(vm 0 'podman run -d --name renter --network none --device fabric-agent.io/rdma=all --rootfs /var/lib/lab-renter:O sleep infinity 2>&1') || rc=$?
  [ "$rc" -eq 0 ] || { echo "$out"; vm 0 'journalctl -t fabric-agent-oci-hook -o cat' || true; fail "podman run of the renter's container (its createRuntime hook) exited $rc"; }
  note "renter's container started in $(since "$t")s"
  mapfile -t L < <(vm 0 'podman exec renter ip -4 -o addr show dev wg0 | awk "{ print \$4 }"; podman exec renter sh -c "tr \"\\0\" \"\\n\" < /proc/1/environ | sed -n s/^NCCL_SOCKET_IFNAME=//p"
    test -e /sys/class/net/wg0 && echo "on the node" || echo "not on the node"
    podman exec renter ls /dev/infiniband | paste -sd" "')
  assert_eq "${L[0]}" 10.42.0.1/24 "the renter's container: wg0 moved in, its address"
  assert_eq "${L[1]}" wg0 "the renter's container: NCCL_SOCKET_IFNAME of its process (the spec's env)"
  assert_eq "${L[2]}" "not on the node" "the node's wg0 while the container holds it"
  assert_contains "${L[3]}" uverbs "the renter's container: /dev/infiniband"
  k_api GET /v1/pods auth
  assert_eq "$(jq -r '.pods | length' <<<"$API_OUT")" 1 "GET /v1/pods: the renter's container registered"
  assert_eq "$(vm 0 'podman stop -t 5 renter >/dev/null 2>&1; podman rm renter >/dev/null 2>&1; podman ps -a -q --filter name=renter | wc -l')" 0 "the renter's container stopped and removed"
  retry 30 0.5 vm 0 'test -e /sys/class/net/wg0' || fail "wg0 did not come back to the node after the renter's container stopped (its poststop hook)"
  mapfile -t L < <(wg0)
  assert_eq "${L[1]} ${L[2]} ${L[3]} ${L[4]}" "wireguard $pub $peer 10.42.0.1/24" "the node's wg0 after the renter's container (kind, key, peers, address)"
}

# ---------------------------------------------------------------- the run
step "the manifests, as kubectl kustomize deploy/kubernetes renders them"
k_render > "$RUN_DIR/render.json"
assert_eq "$(jq -r .kind "$RUN_DIR/render.json" | sort | tr '\n' ' ')" "ConfigMap DaemonSet Namespace " "rendered kinds"
IMAGE=$(jq -r 'select(.kind == "DaemonSet") | .spec.template.spec | (.containers + .initContainers) | map(.image) | unique | join(" ")' "$RUN_DIR/render.json")
assert_eq "$IMAGE" fabric-agent:0.1.0 "the pod's image (every container)"
# The token and Secret as docs/kubernetes.md has the operator make them
# (--dry-run=client -o json: the object `kubectl create` would send).
(umask 077; openssl rand -hex 32 > "$RUN_DIR/token")
(cd "$RUN_DIR" && kubectl -n fabric-agent create secret generic fabric-agent-token --from-file=token=token --dry-run=client -o json) > "$RUN_DIR/secret.json"

step "the image $IMAGE: docs/kubernetes.md's Dockerfile with $(basename "$M_DEB")"
key=$( { sha256sum < "$M_DEB"; k_dockerfile; declare -f k_image_build k_chroot; echo "$IMAGE"
         ( source "$SRC_DIR/tests/packaging/lib.sh"; echo "$FA_ROOT_TARBALL" ); } | sha256sum | cut -c1-16)
K_IMAGE=$CACHE/machine/kube-image-$key.tar
t=$(now)
[ -f "$K_IMAGE" ] || with_lock kube-image k_image_build "$K_IMAGE" "localhost/$IMAGE" || fail "building the image failed"
find "$CACHE/machine" -maxdepth 1 -name 'kube-image-*.tar' -mtime +3 -delete 2>/dev/null || true
touch "$K_IMAGE"
note "$(basename "$K_IMAGE"): $(( $(stat -c %s "$K_IMAGE") / 1048576 )) MiB ($(since "$t")s)"
ln "$K_IMAGE" "$KF/image.tar" 2>/dev/null || cp "$K_IMAGE" "$KF/image.tar"

step "boot the node (Debian 12, systemd, the lab kernel, rxe0 on the fabric NIC)"
m_boot 0
m_wait 0
note "node0: systemd running ${M_BOOT_S[0]}s after QEMU started"
mapfile -t L < <(vm 0 'cat /sys/class/infiniband/rxe0/ports/1/state
  dpkg-query -W -f "\${Status}\n" fabric-agent 2>/dev/null || echo absent
  systemctl list-unit-files --no-legend fabric-agent.service | wc -l
  test -e /var/lib/fabric-agent && echo present || echo absent
  ip -4 -o route get 192.0.2.1
  ip -4 -o addr show')
assert_eq "${L[0]}" "4: ACTIVE" "node0 rxe0 port"
# A DaemonSet-only node: the package is not installed, no unit runs the agent.
assert_eq "${L[1]}" absent "node0: the package"
assert_eq "${L[2]}" 0 "node0: fabric-agent.service unit files"
assert_eq "${L[3]}" absent "node0: /var/lib/fabric-agent before the pod"
NODE_IP=$(sed -n 's/.* src \([0-9.]*\).*/\1/p' <<<"${L[4]}")
FABRIC_IP=$(printf '%s\n' "${L[@]:5}" | awk '/ 192\.168\.77\./ { sub(/\/.*/, "", $4); print $4 }')
assert_eq "$NODE_IP" 10.0.2.15 "node0: the default route's address (the kubelet's node IP)"
assert_eq "$FABRIC_IP" 192.168.77.1 "node0: the fabric address"

step "podman load the image (no registry)"
t=$(now)
assert_eq "$(vm 0 "podman load -q -i /lab/files/image.tar >/dev/null && podman image inspect --format '{{json .Config.Entrypoint}}' $IMAGE")" \
  '["/usr/bin/fabric-agent"]' "$IMAGE: entrypoint"
note "podman load: $(since "$t")s"

step "the Pod: the DaemonSet's template, with the stand-ins for what Podman 4.3.1 cannot express"
k_pod "$NODE_IP" node0 < "$RUN_DIR/render.json" > "$KF/pod.json"
k_kubelet_files
# Every difference from the template, for the record.
diff <(jq -S 'select(.kind == "DaemonSet") | .spec.template.spec' "$RUN_DIR/render.json") <(jq -S .spec "$KF/pod.json") \
  > "$RUN_DIR/out/pod-stand-ins.diff" || true
note "stand-ins: $(jq -c '{annotations: .metadata.annotations, hostname: .spec.hostname, volumes: [.spec.volumes[] | select(.hostPath.path | startswith("/run/lab-kubelet")) | .name]}' "$KF/pod.json") (out/pod-stand-ins.diff)"
# Header files for the client (mode 0600: never the token in argv).
(umask 077
 printf 'Authorization: Bearer %s' "$(cat "$RUN_DIR/token")" > "$KF/auth"
 printf 'Authorization: Bearer %s' "$(openssl rand -hex 32)" > "$KF/auth-wrong")

step "podman kube play: pod 1"
k_play 1
mapfile -t L < <(vm 0 'podman inspect --format "{{.Id}} {{.State.Pid}}" fabric-agent-fabric-agent; readlink /proc/1/ns/net /proc/1/ns/pid')
ctr1=${L[0]% *} pid=${L[0]#* } host_net=${L[1]}
assert_eq "$(vm 0 "readlink /proc/$pid/ns/pid")" "${L[2]}" "the agent's PID namespace (the node's: hostPID, by the stand-in)"
log=$(vm 0 'podman logs fabric-agent-fabric-agent 2>&1')

step "the init container node-address: its drop-in is read"
# `fabric-agent status` in the pod reads the token from the Secret's mount.
vm 0 'podman exec fabric-agent-fabric-agent fabric-agent status --json' > "$RUN_DIR/out/status1.json" ||
  { cat "$RUN_DIR/out/status1.json"; fail "fabric-agent status in the pod failed"; }
st=$RUN_DIR/out/status1.json
assert_eq "$(jq -r .mesh.endpoint "$st")" "$NODE_IP:51820" "mesh.endpoint (the node's address from the drop-in; the fabric's $FABRIC_IP without it)"
dropin=$(jq -r '.spec.initContainers[] | select(.name == "node-address") | .args[0]' "$KF/pod.json")
assert_contains "$log" "starting (config: /etc/fabric-agent/agent.yaml + $dropin/10-node-address.yaml)" "the agent's start line"
# Podman starts a pod's containers once its init containers exited 0; the
# directory's mode and the file are node-address's work.
dropin_vol=$(jq -r --arg d "$dropin" '.spec.initContainers[] | select(.name == "node-address") | .volumeMounts[] | select(.mountPath == $d) | .name' "$KF/pod.json")
assert_eq "$(vm 0 "stat -c %a $KUBELET/$dropin_vol $KUBELET/$dropin_vol/10-node-address.yaml | tr '\\n' ' '")" "755 644 " "the emptyDir (made 0777) and the drop-in, after node-address"

step "/healthz on the node's 127.0.0.1:7471 (hostNetwork), the probes' request"
probes=$(jq -r 'select(.kind == "DaemonSet") | .spec.template.spec.containers[] | select(.name == "fabric-agent")
  | [.startupProbe, .livenessProbe, .readinessProbe] | map(.httpGet | "\(.host) \(.port) \(.path)") | unique | join(",")' "$RUN_DIR/render.json")
assert_eq "$probes" "127.0.0.1 7471 /healthz" "startupProbe, livenessProbe, readinessProbe: one request"
k_api GET /healthz -
assert_eq "$API_CODE $API_OUT" '200 {"status":"ok"}' "GET http://127.0.0.1:7471/healthz from the node's namespace"
assert_eq "$(vm 0 "readlink /proc/$pid/ns/net")" "$host_net" "the agent's network namespace (the node's)"

step "/v1/status with the Secret's token: the RoCE fabric; without it: 401"
assert_eq "$(jq -r '"\(.inspect.fabric.kind) \(.inspect.fabric.ports | join(","))"' "$st")" "roce rxe0:1" "fabric-agent status in the pod: fabric.kind, fabric.ports"
k_api GET /v1/status auth
assert_eq "$API_CODE" 200 "GET /v1/status with the Secret's token"
printf '%s\n' "$API_OUT" > "$RUN_DIR/out/status-http.json"
assert_eq "$(jq -r '"\(.inspect.fabric.kind) \(.inspect.fabric.ports | join(","))"' <<<"$API_OUT")" "roce rxe0:1" "GET /v1/status: fabric.kind, fabric.ports"
assert_eq "$(jq -c .warnings <<<"$API_OUT")" "[]" "GET /v1/status: warnings (the read-only root, the mounts)"
k_api GET /v1/status -
assert_eq "$API_CODE" 401 "GET /v1/status without a token"
k_api GET /v1/status auth-wrong
assert_eq "$API_CODE" 401 "GET /v1/status with another token"

step "the node's paths: NFD's feature file, the state, the pods socket, the CDI spec"
nfd=$(jq -r 'select(.kind == "DaemonSet") | .spec.template.spec.volumes[] | select(.name == "nfd-features") | .hostPath.path' "$RUN_DIR/render.json")
mapfile -t L < <(vm 0 'stat -c "%F %a" /var/lib/fabric-agent/wg.key /run/fabric-agent/pods.sock
  grep -q "\"fabric-agent.io/rdma\"" /run/cdi/fabric-agent.io-rdma.json && echo "names fabric-agent.io/rdma" || echo "no such kind"'"
  cat $nfd/fabric-agent")
assert_match "${L[0]}" '^regular (empty )?file 600$' "the node's /var/lib/fabric-agent/wg.key (the node's WireGuard key)"
assert_match "${L[1]}" '^socket ' "the node's /run/fabric-agent/pods.sock"
assert_eq "${L[2]}" "names fabric-agent.io/rdma" "the node's /run/cdi/fabric-agent.io-rdma.json"
f=$(printf '%s\n' "${L[@]:3}")
assert_contains "$f" "fabric-agent.io/fabric.kind=roce" "the node's $nfd/fabric-agent"
assert_contains "$f" "fabric-agent.io/fabric.rails=1" "the node's $nfd/fabric-agent"

step "the RDMA probe in the pod: verbs on /dev/infiniband (privileged), rxe0 to itself"
k_probe

step "PUT /v1/mesh: kernel WireGuard wg0 in the node's namespace"
peer=$(wg genkey | wg pubkey)
k_api PUT /v1/mesh auth "{\"cluster_id\":\"lab-k8s\",\"address\":\"10.42.0.1/24\",\"peers\":[{\"public_key\":\"$peer\",\"endpoint\":\"192.168.77.2:51820\",\"allowed_ips\":[\"10.42.0.2/32\"]}]}"
[ "$API_CODE" = 200 ] || echo "$API_OUT"
assert_eq "$API_CODE" 200 "PUT /v1/mesh"
assert_eq "$(jq -r '"\(.backend) \(.changes.created)"' <<<"$API_OUT")" "kernel true" "PUT /v1/mesh: backend, created"
pub=$(jq -r .public_key <<<"$API_OUT")
wg0() {  # wg0: the node's wg0 as five lines: ifindex, kind, public key, peers, address
  vm 0 'cat /sys/class/net/wg0/ifindex; ip -d -o link show dev wg0 | grep -ow wireguard; wg show wg0 public-key
    wg show wg0 peers | paste -sd,; ip -4 -o addr show dev wg0 | awk "{ print \$4 }"'
}
mapfile -t L < <(wg0)
ifindex=${L[0]}
assert_eq "${L[1]}" wireguard "the node's wg0: link kind"
assert_eq "${L[2]} ${L[3]} ${L[4]}" "$pub $peer 10.42.0.1/24" "the node's wg0: public key, peers, address"
assert_contains "$(vm 0 'cat /var/lib/fabric-agent/state.json')" '"lab-k8s"' "the node's /var/lib/fabric-agent/state.json (the desired mesh)"

step "a renter's container on the node (CDI): the spec's hooks run the agent's copy, the node has no fabric-agent"
vm 0 'cat /run/cdi/fabric-agent.io-rdma.json' > "$RUN_DIR/out/cdi.json"
H=/var/lib/fabric-agent/hook
assert_eq "$(jq -r '.containerEdits.hooks | map(.path) | unique | join(" ")' "$RUN_DIR/out/cdi.json")" "$H/lib/ld-linux-x86-64.so.2" \
  "the CDI spec's hooks: the copied loader"
assert_eq "$(jq -r '.containerEdits.hooks[0].args[1:5] | join(" ")' "$RUN_DIR/out/cdi.json")" "--library-path $H/lib $H/fabric-agent oci-hook" \
  "the CDI spec's createRuntime hook: the copy, its libraries"
mapfile -t L < <(vm 0 "test -e /usr/bin/fabric-agent && echo present || echo absent
  stat -c '%U %a' $H $H/lib $H/fabric-agent $H/fabric-agent-runtime
  $H/lib/ld-linux-x86-64.so.2 --library-path $H/lib --list $H/fabric-agent | grep -c ' => '
  $H/lib/ld-linux-x86-64.so.2 --library-path $H/lib --list $H/fabric-agent | grep -c ' => $H/lib/'")
assert_eq "${L[0]}" absent "the node's /usr/bin/fabric-agent (no package)"
assert_eq "${L[1]} ${L[2]} ${L[3]} ${L[4]}" "root 755 root 755 root 755 root 755" "the node's $H, lib/, fabric-agent, fabric-agent-runtime (owner, mode)"
assert_gt "${L[5]}" 3 "libraries the copy needs"
assert_eq "${L[6]}" "${L[5]}" "libraries the copy needs, found in $H/lib"
assert_contains "$(vm 0 'podman logs fabric-agent-fabric-agent 2>&1')" "the hooks run the copy of this agent in $H" "the agent's log"
k_renter
ifindex=${L[0]}

step "the pod removed (SIGTERM): wg0 stays in the node's namespace"
t=$(now)
assert_eq "$(vm 0 'podman pod stop fabric-agent >/dev/null 2>&1; podman inspect --format "{{.State.ExitCode}}" fabric-agent-fabric-agent')" 0 \
  "the agent's exit status at the pod's stop"
assert_eq "$(vm 0 'podman kube play --down /lab/files/pod.json >/dev/null 2>&1; podman ps -a -q | wc -l')" 0 "containers left after kube play --down"
note "stopped and removed in $(since "$t")s"
mapfile -t L < <(wg0)
assert_eq "${L[*]}" "$ifindex wireguard $pub $peer 10.42.0.1/24" "the node's wg0 without the pod (ifindex, kind, key, peers, address)"

step "pod 2, without privileged (the component rdma-device-plugin): the Pod and its stand-ins"
k_render rdma-device-plugin > "$RUN_DIR/render-rdma-device-plugin.json"
k_pod "$NODE_IP" node0 < "$RUN_DIR/render-rdma-device-plugin.json" > "$KF/pod2.json"
assert_eq "$(jq -c '.spec.containers[] | select(.name == "fabric-agent") | [.securityContext.privileged, .securityContext.capabilities.add, .resources.limits]' "$KF/pod2.json")" \
  '[false,["NET_ADMIN","SYS_ADMIN","SYS_PTRACE","IPC_LOCK"],{"rdma/rdma_shared_device_a":"1"}]' "pod 2: the agent's securityContext and limits"
assert_eq "$(jq -r '[.spec.volumes[] | select(.hostPath.path == "/dev/infiniband")] | length' "$KF/pod2.json")" 0 "pod 2: the hostPath /dev/infiniband"
# The device plugin's answer: every character device of the node's /dev/infiniband.
devices=$(vm 0 'find /dev/infiniband -type c | sort | sed "s/.*/\"&\"/" | paste -sd,')
assert_contains "$devices" '"/dev/infiniband/uverbs0"' "the node's /dev/infiniband"
{ cat "$KF/hostpid.conf"; printf 'devices = [%s]\n' "$devices"; } > "$KF/device-plugin.conf"
note "the device plugin's stand-in: devices = [$devices]"

step "podman kube play: pod 2 adopts wg0"
k_play 2 pod2.json device-plugin.conf
mapfile -t L < <(vm 0 'podman inspect --format "{{.Id}} {{.State.Pid}} {{.HostConfig.Privileged}}" fabric-agent-fabric-agent')
read -r ctr2 pid2 priv2 <<<"${L[0]}"
assert_ne "$ctr2" "$ctr1" "the agent's container (a new one)"
log=$(vm 0 'podman logs fabric-agent-fabric-agent 2>&1')
assert_match "$(grep 'adopted persisted mesh' <<<"$log")" 'wg0: adopted persisted mesh of cluster lab-k8s .*"created":false,"device_changed":false,.*"peers_added":0,"peers_removed":0' \
  "pod 2's log: wg0 adopted, nothing recreated or re-sent"
mapfile -t L < <(wg0)
assert_eq "${L[*]}" "$ifindex wireguard $pub $peer 10.42.0.1/24" "the node's wg0 under pod 2 (the same interface: ifindex, kind, key, peers, address)"
k_api GET /v1/mesh auth
assert_eq "$API_CODE" 200 "GET /v1/mesh"
assert_eq "$(jq -r '"\(.desired.cluster_id) \(.live.public_key) \(.live.peers | map(.public_key) | join(","))"' <<<"$API_OUT")" "lab-k8s $pub $peer" "pod 2: GET /v1/mesh (desired cluster, live key and peers)"

step "pod 2: the unit's capabilities, the default seccomp filter, the devices the plugin gave"
# CAP_NET_ADMIN 12, CAP_IPC_LOCK 14, CAP_SYS_PTRACE 19, CAP_SYS_ADMIN 21.
caps=$(printf '%016x' $(( (1 << 12) | (1 << 14) | (1 << 19) | (1 << 21) )))
mapfile -t L < <(vm 0 "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/$pid2/status | awk '{ print \$2 }'
  podman exec fabric-agent-fabric-agent ls /dev/infiniband | paste -sd' '")
assert_eq "$priv2" false "pod 2: the agent's container privileged"
assert_eq "${L[0]} ${L[1]}" "$caps $caps" "pod 2: the agent's effective and bounding capabilities (NET_ADMIN SYS_ADMIN SYS_PTRACE IPC_LOCK)"
assert_eq "${L[2]} ${L[3]}" "1 2" "pod 2: the agent's NoNewPrivs, Seccomp (2: a filter)"
assert_contains "${L[4]}" uverbs0 "pod 2: /dev/infiniband in the agent's container"
k_api GET /v1/status auth
assert_eq "$(jq -r '"\(.inspect.fabric.kind) \(.inspect.fabric.ports | join(","))"' <<<"$API_OUT")" "roce rxe0:1" "pod 2: GET /v1/status: fabric.kind, fabric.ports"

step "pod 2: the RDMA probe (verbs through the device cgroup, memory registered with IPC_LOCK)"
k_probe

step "pod 2: a renter's container gets wg0 (setns with SYS_ADMIN, /proc/PID/ns/net with SYS_PTRACE)"
k_renter
