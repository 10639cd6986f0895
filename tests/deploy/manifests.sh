#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/kubernetes checked offline against the Kubernetes API's schema and
# types (deploy/kubernetes/validate/check.js: kubernetes-models' JSON Schema
# validator and its TypeScript types under tsc), as files and as `kubectl
# kustomize` renders them; the ConfigMap's agent.yaml through the agent's own
# config loader; the init container node-address's command, run on a
# stand-in for its emptyDir with an IPv4 and an IPv6 HOST_IP, and the daemon
# advertising that address; the two components rendered and checked. A
# misspelt field must be refused, or the check proves nothing.
# Usage: manifests.sh SOURCE_DIR WORK_DIR FABRIC_AGENT
set -euo pipefail
src=$1 work=$2 bin=$3
deploy=$src/deploy/kubernetes
mkdir -p "$work"
# The checker's packages, pinned by its package-lock.json, installed beside
# it in the build tree (never in the checkout); again only when the lock changes.
cp "$deploy/validate/package.json" "$deploy/validate/package-lock.json" "$deploy/validate/check.js" "$work/"
if ! cmp -s "$work/package-lock.json" "$work/node_modules/.installed-lock" 2>/dev/null; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$work/package-lock.json" "$work/node_modules/.installed-lock"
fi
check() { node "$work/check.js" --external-secret fabric-agent-token "$@"; }
manifests=("$deploy"/namespace.yaml "$deploy"/configmap.yaml "$deploy"/daemonset.yaml)

echo "== the files"
check "${manifests[@]}"
echo "== as kubectl kustomize renders them"
kubectl kustomize "$deploy" | check -

echo "== the ConfigMap's agent.yaml, loaded by fabric-agent"
node -e '
  const YAML = require(process.argv[1] + "/node_modules/yaml");
  const cm = YAML.parse(require("fs").readFileSync(process.argv[2], "utf8"));
  process.stdout.write(cm.data["agent.yaml"]);' "$work" "$deploy/configmap.yaml" > "$work/agent.yaml"
"$bin" inspect --config "$work/agent.yaml" --json > /dev/null
echo "agent.yaml: loads"

echo "== the init container node-address: its drop-in, read by the agent"
# Its command as the manifest has it, and the wiring that lets the test stand
# a directory in for its argument: that argument is its mount of an emptyDir,
# which the agent container mounts read-only as its drop-in directory.
node -e '
  const YAML = require(process.argv[1] + "/node_modules/yaml");
  const ds = YAML.parse(require("fs").readFileSync(process.argv[2], "utf8")).spec.template.spec;
  const fail = (m) => { console.error("FAIL: daemonset.yaml: " + m); process.exit(1); };
  const init = (ds.initContainers || []).find((c) => c.name === "node-address") || fail("no initContainer node-address");
  const agent = ds.containers.find((c) => c.name === "fabric-agent");
  const env = (init.env || []).find((e) => e.name === "HOST_IP");
  if (!env || !env.valueFrom || !env.valueFrom.fieldRef || env.valueFrom.fieldRef.fieldPath !== "status.hostIP")
    fail("node-address: HOST_IP is not the downward API'"'"'s status.hostIP");
  const out = (init.volumeMounts || []).find((m) => init.args && init.args.length === 1 && m.mountPath === init.args[0]);
  if (!out) fail("node-address: its one argument is not one of its mounts");
  const vol = ds.volumes.find((v) => v.name === out.name);
  if (!vol || !vol.emptyDir) fail("node-address: volume " + out.name + " is not an emptyDir");
  const m = agent.volumeMounts.find((m) => m.name === out.name);
  if (!m || m.mountPath !== "/etc/fabric-agent/agent.yaml.d" || m.readOnly !== true)
    fail("fabric-agent: does not mount " + out.name + " read-only at /etc/fabric-agent/agent.yaml.d");
  process.stdout.write(init.command.map((a) => a + "\0").join(""));' "$work" "$deploy/daemonset.yaml" > "$work/node-address.argv"
mapfile -d '' -t node_address < "$work/node-address.argv"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
chmod 600 "$work/token"
# The nodes under /tmp: the pods socket's path must fit a sockaddr_un.
nodes=$(mktemp -d /tmp/fa-manifests-XXXXXX)
agent_pid=
trap '[ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null || true; rm -rf "$nodes"' EXIT
#   node_address_case HOST_IP EXPECTED_ENDPOINT
node_address_case() {
  local d=$nodes/${1//:/-} ip=$1 want=$2
  mkdir "$d"
  # The ConfigMap's agent.yaml with this test's paths, beside its drop-in
  # directory: the stand-in for the emptyDir, 0777 as the kubelet makes it.
  node -e '
    const YAML = require(process.argv[1] + "/node_modules/yaml");
    const [d, fixture, token] = process.argv.slice(3);
    const c = YAML.parse(require("fs").readFileSync(process.argv[2], "utf8"));
    Object.assign(c, { listen: "127.0.0.1:0", token_file: token, state_dir: d + "/state", sysfs_root: fixture,
                       pods: { socket: d + "/pods.sock", cdi_dir: d + "/cdi" }, nfd: { feature_file: "" } });
    process.stdout.write(YAML.stringify(c));' "$work" "$work/agent.yaml" "$d" "$src/tests/fixtures/a-ib-8gpu" "$work/token" > "$d/agent.yaml"
  mkdir -m 0777 "$d/agent.yaml.d"
  # The control: the agent refuses the directory as the kubelet leaves it.
  if out=$("$bin" inspect --config "$d/agent.yaml" 2>&1); then
    echo "FAIL: the agent read a 0777 drop-in directory"; exit 1
  fi
  echo "$out" | grep -q "agent.yaml.d: mode 0777, owner uid $(id -u) is not accepted" ||
    { echo "FAIL: not the refusal of a 0777 directory: $out"; exit 1; }
  # The init container's environment; as root, without any capability
  # (its securityContext drops them all).
  local as=()
  [ "$(id -u)" != 0 ] || as=(setpriv --bounding-set=-all --inh-caps=-all --no-new-privs --)
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOST_IP="$ip" "${as[@]}" "${node_address[@]}" "$d/agent.yaml.d"
  # The daemon reads it: its start line names the drop-in, its status
  # advertises the address as the WireGuard endpoint.
  "$bin" run --config "$d/agent.yaml" > "$d/agent.log" 2>&1 &
  agent_pid=$!
  local port=
  for _ in $(seq 1 200); do
    if grep -q 'ready (generation' "$d/agent.log"; then
      port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$d/agent.log" | head -1)
      break
    fi
    kill -0 "$agent_pid" 2>/dev/null || break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "FAIL: the agent did not start:"; cat "$d/agent.log"; exit 1; }
  grep -qF "starting (config: $d/agent.yaml + $d/agent.yaml.d/10-node-address.yaml)" "$d/agent.log" ||
    { echo "FAIL: the start line does not name the drop-in:"; cat "$d/agent.log"; exit 1; }
  local got
  got=$("$bin" status --config "$d/agent.yaml" --url "http://127.0.0.1:$port" --json |
    node -e 'const s = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(s.mesh.endpoint);')
  kill "$agent_pid"
  wait "$agent_pid" || true
  agent_pid=
  [ "$got" = "$want" ] || { echo "FAIL: HOST_IP $ip: mesh.endpoint $got, expected $want"; exit 1; }
  # What the agent does not insist on: files others can read.
  local modes
  modes=$(stat -c %a "$d/agent.yaml.d" "$d/agent.yaml.d/10-node-address.yaml" | tr '\n' ' ')
  [ "$modes" = "755 644 " ] || { echo "FAIL: modes $modes, expected 755 644"; exit 1; }
  echo "HOST_IP $ip: mesh.endpoint $got"
}
node_address_case 192.0.2.7 192.0.2.7:51820
node_address_case 2001:db8::7 "[2001:db8::7]:51820"

echo "== without the init container (the component no-node-address)"
rm -rf "$work/no-node-address" && cp -r "$deploy" "$work/no-node-address" && rm -rf "$work/no-node-address/validate"
printf 'components:\n  - no-node-address\n' >> "$work/no-node-address/kustomization.yaml"
kubectl kustomize "$work/no-node-address" > "$work/no-node-address.yaml"
check "$work/no-node-address.yaml"
node -e '
  const YAML = require(process.argv[1] + "/node_modules/yaml");
  const docs = YAML.parseAllDocuments(require("fs").readFileSync(process.argv[2], "utf8")).map((d) => d.toJS());
  const ds = docs.find((d) => d && d.kind === "DaemonSet").spec.template.spec;
  const left = [
    ...(ds.initContainers || []).filter((c) => c.name === "node-address").map(() => "the init container node-address"),
    ...ds.volumes.filter((v) => v.name === "node-dropin").map(() => "the volume node-dropin"),
    ...ds.containers.flatMap((c) => c.volumeMounts || []).filter((m) => m.mountPath === "/etc/fabric-agent/agent.yaml.d")
      .map(() => "a mount at /etc/fabric-agent/agent.yaml.d"),
  ];
  if (left.length) { console.log("FAIL: the component left " + left.join(", ")); process.exit(1); }
  console.log("no init container, drop-in mount or emptyDir");' "$work" "$work/no-node-address.yaml"

echo "== without privileged (the component rdma-device-plugin)"
rm -rf "$work/rdma-device-plugin" && cp -r "$deploy" "$work/rdma-device-plugin" && rm -rf "$work/rdma-device-plugin/validate"
printf 'components:\n  - rdma-device-plugin\n' >> "$work/rdma-device-plugin/kustomization.yaml"
kubectl kustomize "$work/rdma-device-plugin" > "$work/rdma-device-plugin.yaml"
check "$work/rdma-device-plugin.yaml"
# The capabilities are the unit's CapabilityBoundingSet and IPC_LOCK (the
# unit's LimitMEMLOCK=infinity, which a pod cannot set); nothing else.
unit_caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$src/systemd/fabric-agent.service" | tr ' ' '\n' | sed 's/^CAP_//' | sort | paste -sd,)
node -e '
  const YAML = require(process.argv[1] + "/node_modules/yaml");
  const docs = YAML.parseAllDocuments(require("fs").readFileSync(process.argv[2], "utf8")).map((d) => d.toJS());
  const ds = docs.find((d) => d && d.kind === "DaemonSet").spec.template.spec;
  const c = ds.containers.find((c) => c.name === "fabric-agent");
  const sc = c.securityContext || {};
  const caps = (sc.capabilities || {});
  const want = (process.argv[3] + ",IPC_LOCK").split(",").sort().join(",");
  const bad = [];
  if (sc.privileged !== false) bad.push("privileged is " + sc.privileged);
  if (sc.allowPrivilegeEscalation !== false) bad.push("allowPrivilegeEscalation is " + sc.allowPrivilegeEscalation);
  if ((caps.drop || []).join(",") !== "ALL") bad.push("capabilities.drop is " + JSON.stringify(caps.drop));
  if ((caps.add || []).slice().sort().join(",") !== want) bad.push("capabilities.add is " + JSON.stringify(caps.add) + ", the unit has " + want);
  if (!sc.seccompProfile || sc.seccompProfile.type !== "RuntimeDefault") bad.push("seccompProfile is " + JSON.stringify(sc.seccompProfile));
  if (!c.resources || !c.resources.limits || c.resources.limits["rdma/rdma_shared_device_a"] !== "1") bad.push("no limit rdma/rdma_shared_device_a: 1");
  if (ds.volumes.some((v) => v.hostPath && v.hostPath.path === "/dev/infiniband")) bad.push("the hostPath /dev/infiniband is left");
  if ((c.volumeMounts || []).some((m) => m.mountPath === "/dev/infiniband")) bad.push("a mount at /dev/infiniband is left");
  if (bad.length) { console.log("FAIL: the component: " + bad.join("; ")); process.exit(1); }
  console.log("not privileged; capabilities " + want + "; RuntimeDefault seccomp; the devices from rdma/rdma_shared_device_a");' \
  "$work" "$work/rdma-device-plugin.yaml" "$unit_caps"

echo "== the control: a misspelt field and a string port are refused"
sed 's/livenessProbe:/livenesProbe:/' "$deploy/daemonset.yaml" > "$work/bad-field.yaml"
sed 's/containerPort: 7471/containerPort: "7471"/' "$deploy/daemonset.yaml" > "$work/bad-type.yaml"
for bad in bad-field bad-type; do
  if out=$(check "$deploy/configmap.yaml" "$work/$bad.yaml"); then
    echo "FAIL: $bad.yaml passed the check:"; echo "$out"; exit 1
  fi
  echo "$out" | head -1
done
echo "manifests: ok"
