#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `fabric-agent check` as a node health check runs it: exit 0/1/2, one line
# per failing condition naming the device, --json, and a bad threshold
# refused naming the field.
set -u
AGENT=$1
FX=$2
fail() { echo "check_cli: FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/empty.yaml"

out=$("$AGENT" check --config "$tmp/empty.yaml" --sysfs-root "$FX/a-ib-8gpu"); rc=$?
[ $rc -eq 1 ] || fail "a port down: exit $rc, expected 1"
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "one condition, one line; got: $out"
[[ $out == "mlx5_3:1: port_down: state DOWN, phys Polling (since "*")" ]] || fail "the line: $out"

out=$("$AGENT" check --config "$tmp/empty.yaml" --sysfs-root "$FX/f-rxe"); rc=$?
[ $rc -eq 0 ] || fail "healthy rxe: exit $rc: $out"
[ -z "$out" ] || fail "healthy prints nothing; got: $out"

"$AGENT" check --config "$tmp/empty.yaml" --sysfs-root "$FX/a-ib-8gpu" --json > "$tmp/h.json"
python3 - "$tmp/h.json" <<'PY' || fail "--json"
import json, sys
h = json.load(open(sys.argv[1]))
assert h["healthy"] is False, h
assert [(c["code"], c["subject"]) for c in h["conditions"]] == [("port_down", "mlx5_3:1")], h
PY

printf 'health:\n  flap_count: 0\n' > "$tmp/bad.yaml"
err=$("$AGENT" check --config "$tmp/bad.yaml" --sysfs-root "$FX/f-rxe" 2>&1); rc=$?
[ $rc -eq 2 ] || fail "a bad threshold: exit $rc, expected 2"
[[ $err == *health.flap_count* && $err == *0* ]] || fail "the error names the field and value: $err"

err=$("$AGENT" check --bogus 2>&1); rc=$?
[ $rc -eq 2 ] || fail "an unknown option: exit $rc, expected 2 ($err)"
echo "check_cli: ok"
