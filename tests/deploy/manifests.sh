#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/kubernetes checked offline against the Kubernetes API's schema and
# types (deploy/kubernetes/validate/check.js: kubernetes-models' JSON Schema
# validator and its TypeScript types under tsc), as files and as `kubectl
# kustomize` renders them; the ConfigMap's agent.yaml through the agent's own
# config loader. A misspelt field must be refused, or the check proves nothing.
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
