#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A/B of fabric-agent binaries on kernel WireGuard in the lab VM (docs/lab.md),
# each paired round by round with `wg`: a 250-peer push onto an interface
# without peers (`mesh apply` against `wg setconf`), a no-op (an empty peer
# list against `wg setconf` of the key alone) and `--version` (against
# `wg --version`). Each binary runs as COPIES copies of its own: under TCG a
# binary's median moves by up to +-0.7 ms at 250 peers with where its pages
# land in the VM's memory, more than most changes it is meant to judge, so a
# change counts when every copy of the new binary beats every copy of the
# old one. ASLR is off in the VM unless ASLR=1 (docs/overlay.md, "Benchmark").
#
#   bench/mesh/lab-ab.sh OLD_BINARY NEW_BINARY [MORE...]    (root)
#   ROUNDS=61 (per command), COPIES=2, ASLR=1
#
# Prints, per binary copy and workload, the median of the per-round ratio
# binary/wg with a bootstrap 95 % interval, and the median difference in ms.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ $# -ge 2 ] || { sed -n '/^#   bench/p' "$0" | sed 's/^# *//' >&2; exit 2; }
ROUNDS=${ROUNDS:-61}
COPIES=${COPIES:-2}
DIR=$(mktemp -d /tmp/fa-bench-ab.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

names=()
i=0
mkdir -p "$DIR/bin" "$DIR/libexec/fabric-agent"
for b in "$@"; do
  [ -x "$b" ] || { echo "lab-ab: $b is not an executable" >&2; exit 2; }
  i=$((i + 1))
  for ((c = 1; c <= COPIES; c++)); do
    # Stripped, as the package installs it; each copy is a file of its own.
    strip -o "$DIR/bin/fa_${i}_$c" "$b"
    names+=("fa_${i}_$c")
  done
  # The whole agent a static front runs (docs/packaging.md, "Two
  # executables"): the last binary's that has one; the lab installs it as
  # /usr/libexec/fabric-agent/fabric-agent, which the copies, in /usr/bin
  # there, find.
  whole=$(dirname "$b")/../libexec/fabric-agent/fabric-agent
  [ ! -x "$whole" ] || strip -o "$DIR/libexec/fabric-agent/fabric-agent" "$whole"
done

# mesh_files: empty.json, m250.json
# shellcheck source=bench/mesh/peers.sh
. "$SRC/bench/mesh/peers.sh"
mesh_files "$DIR"

cat >"$DIR/ab.sh" <<EOF
. "\$LAB/lib.sh"
set +e
cd /tmp
cp "\$LAB_FILES"/* /tmp/
mv /tmp/fa_* /usr/bin/
chmod +x /usr/bin/fa_*
[ "${ASLR:-0}" = 1 ] || echo 0 >/proc/sys/kernel/randomize_va_space
NAMES="${names[*]}"
A="mesh apply --overlay-cidr 10.64.0.0/16 --file"
/usr/bin/fa_1_1 \$A /tmp/empty.json >/dev/null 2>&1 || echo "lab-ab: the first apply failed"
key=\$(wg showconf wgb | awk '/^PrivateKey/ {print \$3}')
printf '[Interface]\nPrivateKey = %s\nListenPort = 51820\n' "\$key" >w0.conf
{ cat w0.conf; jq -r '.peers[] | "\n[Peer]\nPublicKey = \(.public_key)\nEndpoint = \(.endpoint)\nAllowedIPs = \(.allowed_ips|join(","))"' /tmp/m250.json; } >w250.conf
t() {  # t LABEL CMD...: one timed run, its microseconds appended to /tmp/raw.LABEL
  local l=\$1 t0 t1
  shift
  t0=\$EPOCHREALTIME
  "\$@" >/dev/null 2>&1
  t1=\$EPOCHREALTIME
  echo \$((\${t1/./} - \${t0/./})) >>"/tmp/raw.\$l"
}
for r in \$(seq \$((${ROUNDS} + 3))); do  # the first 3 rounds warm up and are dropped
  for n in \$NAMES; do
    wg setconf wgb w0.conf; t "250.\$n" /usr/bin/\$n \$A /tmp/m250.json
  done
  wg setconf wgb w0.conf; t 250.wg wg setconf wgb w250.conf
  wg setconf wgb w0.conf
  for n in \$NAMES; do t "noop.\$n" /usr/bin/\$n \$A /tmp/empty.json; done
  t noop.wg wg setconf wgb w0.conf
  for n in \$NAMES; do t "version.\$n" /usr/bin/\$n --version; done
  t version.wg wg --version
done
cp /tmp/raw.* "\$LAB_OUT"/
true
EOF

files=()
for n in "${names[@]}"; do files+=(--file "$DIR/bin/$n"); done
"$SRC/tests/lab/run" --keep --binary "$DIR/bin/fa_1_1" "${files[@]}" --file "$DIR/empty.json" \
  --file "$DIR/m250.json" "$DIR/ab.sh" >"$DIR/lab.log" 2>&1 || true
OUT=$(sed -n 's/^lab: run folder kept: //p' "$DIR/lab.log" | tail -n 1)
if [ -z "$OUT" ] || ! ls "$OUT"/share/out/raw.* >/dev/null 2>&1; then
  echo "lab-ab: the lab run failed:" >&2
  tail -20 "$DIR/lab.log" >&2
  exit 1
fi

python3 - "$OUT/share/out" "$@" <<'PY'
import glob, os, random, statistics, sys
out, binaries = sys.argv[1], sys.argv[2:]
raw = {}
for f in glob.glob(f'{out}/raw.*'):
    work, name = os.path.basename(f)[4:].split('.', 1)
    raw.setdefault(work, {})[name] = [int(x) / 1000 for x in open(f)][3:]

def interval(r):
    rnd = random.Random(1)
    meds = sorted(statistics.median(rnd.choices(r, k=len(r))) for _ in range(2000))
    return meds[50], meds[1949]

for work, what in (('250', '250 new peers vs wg setconf'), ('noop', 'no-op apply vs no-op wg setconf'),
                   ('version', '--version vs wg --version')):
    rows = raw.get(work, {})
    wg = rows.get('wg')
    if not wg:
        continue
    print(f'{what} ({len(wg)} rounds):')
    for name in sorted(k for k in rows if k != 'wg'):
        _, i, c = name.split('_')
        r = [a / b for a, b in zip(rows[name], wg)]
        d = [a - b for a, b in zip(rows[name], wg)]
        lo, hi = interval(r)
        print(f'  {binaries[int(i) - 1]} (copy {c}): ratio {statistics.median(r):.4f} [{lo:.4f}-{hi:.4f}],'
              f' {statistics.median(d):+.3f} ms')
PY
rm -rf "$OUT"
