#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# systemd-analyze verify on the shipped unit, with ExecStart pointed at the
# build. Any output is a failure too: verify exits 0 on unknown keys and
# only warns.
set -euo pipefail
unit="$1"
binary="$2"
dir=$(mktemp -d /tmp/fa-unit-XXXXXX)
trap 'rm -rf "$dir"' EXIT
sed "s#/usr/bin/fabric-agent#${binary}#" "$unit" > "$dir/fabric-agent.service"
grep -q "ExecStart=${binary} run" "$dir/fabric-agent.service"
out=$(systemd-analyze verify "$dir/fabric-agent.service" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then echo "$out"; exit 1; fi
# The properties the daemon relies on, as systemd parsed them.
for want in "Type=notify" "WatchdogSec=30s" "Restart=on-failure" "KillMode=process" \
            "CapabilityBoundingSet=CAP_NET_ADMIN CAP_SYS_ADMIN CAP_SYS_PTRACE" "NoNewPrivileges=yes" "ProtectSystem=strict" \
            "LimitCORE=0" "RuntimeDirectory=fabric-agent cdi wireguard"; do
  grep -qx "$want" "$dir/fabric-agent.service" || { echo "unit lacks '$want'"; exit 1; }
done
echo "systemd-analyze verify: clean"
