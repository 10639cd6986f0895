#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writes agent/text-order.ld: a linker script fragment (INSERT, so the
# linker's default script still lays out everything else) that puts the code
# sections a `mesh apply` runs first in fabric-agent's text (docs/overlay.md,
# "Startup locality"). Each 64 KiB of text a process touches for the first
# time costs a page fault; spread over the 2.9 MB binary the path touched ~36
# such windows, packed ~15.
#
# The list comes from the program itself: the build's link of fabric-agent
# is run again without the ordering (callgrind names no function in a code
# section other than .text) and with a map of its own; callgrind runs that
# binary inside the lab VM (docs/lab.md) on kernel WireGuard for a 250-peer
# push onto an interface without peers, the no-op re-apply of the same file
# and `--version`; every function they execute is looked up in the map for
# the input section that holds it.
# Run it again when the apply path changes much: a function missing from the
# list is only placed after the listed ones (correct, a little slower).
#
#   scripts/text-order.sh [BUILD_DIR]        (root; a Ninja build; needs valgrind, the lab)
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
BIN=$BUILD/agent/fabric-agent
OUT=$SRC/agent/text-order.ld
VG_LIB=${VALGRIND_LIB:-/usr/libexec/valgrind}
for f in "$BIN" "$BUILD/build.ninja" /usr/bin/valgrind.bin "$VG_LIB/callgrind-amd64-linux" \
  "$VG_LIB/vgpreload_core-amd64-linux.so"; do
  [ -e "$f" ] || {
    echo "text-order: $f is missing (build first; apt-get install valgrind)" >&2
    exit 1
  }
done
DIR=$(mktemp -d /tmp/fa-text-order.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

# mesh_files: empty.json, m250.json
# shellcheck source=bench/mesh/peers.sh
. "$SRC/bench/mesh/peers.sh"
mesh_files "$DIR"
# The build's own link command (the last one ninja runs for the binary),
# without the ordering script, writing $DIR/fa and $DIR/fa.map (unstripped:
# callgrind names the functions).
LINK=$(ninja -C "$BUILD" -t commands agent/fabric-agent | tail -n 1)
case $LINK in *" -o agent/fabric-agent "*) ;; *)
  echo "text-order: cannot find the link of agent/fabric-agent in $BUILD/build.ninja" >&2
  exit 1
  ;;
esac
LINK=${LINK//-Wl,-T,$OUT/}
LINK=${LINK// -o agent\/fabric-agent / -o $DIR\/fa }
# shellcheck disable=SC2001  # a pattern, not a fixed string
LINK=$(sed "s|-Wl,-Map=[^ ]*|-Wl,-Map=$DIR/fa.map|" <<<"$LINK")
(cd "$BUILD" && eval "$LINK")
MAP=$DIR/fa.map

cat >"$DIR/profile.sh" <<'EOF'
. "$LAB/lib.sh"
set +e
cd /tmp
mkdir -p /tmp/vg
cp "$LAB_FILES"/* /tmp/
mv /tmp/callgrind-amd64-linux /tmp/vgpreload_core-amd64-linux.so /tmp/vg/
chmod +x /tmp/fa /tmp/valgrind.bin /tmp/vg/callgrind-amd64-linux
A="mesh apply --overlay-cidr 10.64.0.0/16 --file"
cg() {  # cg NAME ARGS...: one run under callgrind, its profile in $LAB_OUT
  local name=$1
  shift
  VALGRIND_LIB=/tmp/vg /tmp/valgrind.bin --tool=callgrind --demangle=no \
    --callgrind-out-file="$LAB_OUT/cg.$name" "$@" >>"$LAB_OUT/log" 2>&1
}
# The installed front creates wgb: a new key's public key comes from a child
# of the whole agent beside it (docs/packaging.md, "Two executables"),
# which /tmp/fa has not; the profiled runs take the kernel's.
/usr/bin/fabric-agent $A /tmp/empty.json >>"$LAB_OUT/log" 2>&1 || echo "text-order: creating wgb failed" >>"$LAB_OUT/log"
cg push /tmp/fa $A /tmp/m250.json
cg noop /tmp/fa $A /tmp/m250.json
cg version /tmp/fa --version
true
EOF

"$SRC/tests/lab/run" --keep --binary "$BIN" --file "$DIR/fa" --file "$DIR/empty.json" --file "$DIR/m250.json" \
  --file /usr/bin/valgrind.bin --file "$VG_LIB/callgrind-amd64-linux" \
  --file "$VG_LIB/vgpreload_core-amd64-linux.so" "$DIR/profile.sh" >"$DIR/lab.log" 2>&1 || true
LABOUT=$(sed -n 's/^lab: run folder kept: //p' "$DIR/lab.log" | tail -n 1)
if [ -z "$LABOUT" ] || [ ! -s "$LABOUT/share/out/cg.push" ]; then
  echo "text-order: the lab run failed:" >&2
  tail -20 "$DIR/lab.log" >&2
  if [ -n "$LABOUT" ]; then
    cat "$LABOUT/share/out/log" >&2 2>/dev/null || true
    rm -rf "$LABOUT"
  fi
  exit 1
fi

python3 - "$MAP" "$DIR/fa" "$OUT" "$LABOUT"/share/out/cg.* <<'PY'
import bisect, re, subprocess, sys

mapf, binf, outf, profiles = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]

# Functions with a cost in the fabric-agent object, from the callgrind
# profiles (names compressed as "(id) name" on first use).
hot = set()
for f in profiles:
    names, obs, ob = {}, {}, None
    for line in open(f, errors='replace'):
        m = re.match(r'(ob|fn|cob|cfn)=\((\d+)\)(?: (.*))?$', line.rstrip('\n'))
        if not m:
            continue
        kind, ident, name = m.groups()
        table = obs if kind in ('ob', 'cob') else names
        if name:
            table[ident] = name
        if kind == 'ob':
            ob = obs[ident]
        elif kind == 'fn' and ob and ob.endswith('/fa'):
            hot.add(names[ident])

# Input sections of the link, from the linker's map (after its list of
# discarded sections): a section name on a line of its own (or with its
# address when short), then address, size and object.
sections, pending, placed = [], None, False
for line in open(mapf, errors='replace'):
    line = line.rstrip('\n')
    if not placed:
        placed = line.startswith('Linker script and memory map')
        continue
    m = re.match(r'^ (\.text\S*)(?:\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S+))?$', line)
    if m:
        if m.group(2):
            sections.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1), m.group(4)))
        else:
            pending = m.group(1)
        continue
    if pending:
        m = re.match(r'^\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S+)', line)
        if m:
            sections.append((int(m.group(1), 16), int(m.group(2), 16), pending, m.group(3)))
        pending = None
sections = sorted(s for s in sections if s[1] > 0)
starts = [s[0] for s in sections]

order, seen, unplaced = [], set(), 0
for line in subprocess.run(['nm', binf], capture_output=True, text=True, check=True).stdout.splitlines():
    p = line.split()
    # 'i': an IFUNC symbol, whose value is its resolver's address (glibc's
    # string functions): callgrind names the resolver by it, and every
    # resolver runs before main (the IRELATIVE relocations).
    if len(p) != 3 or p[1] not in 'tTwWi' or p[2] not in hot:
        continue
    addr = int(p[0], 16)
    i = bisect.bisect_right(starts, addr) - 1
    if i < 0 or addr >= sections[i][0] + sections[i][1]:
        continue
    name, obj = sections[i][2], sections[i][3]
    if name == '.text':
        # An object without function sections (a member of glibc's, libnl's
        # or yaml-cpp's archive): its whole code goes, named by archive and
        # member (glibc has about one function per member; libnl a source
        # file's worth).
        m = re.match(r'^.*/([^/(]+\.a)\(([^)]+)\)$', obj)
        if not m:
            unplaced += 1
            continue
        name = f'*{m.group(1)}:{m.group(2)}(.text)'
    else:
        name = f'*({name})'
    if name not in seen:
        seen.add(name)
        order.append(name)
with open(outf, 'w') as out:
    out.write('/* Generated by scripts/text-order.sh: the code a mesh apply runs, first in the\n'
              '   text (docs/overlay.md, "Startup locality"). */\n')
    out.write('SECTIONS\n{\n  .text.ordered :\n  {\n')
    out.write(''.join(f'    {name}\n' for name in sorted(order)))
    out.write('  }\n}\nINSERT BEFORE .text;\n')
print(f'text-order: {len(hot)} functions run, {len(order)} sections listed, '
      f'{unplaced} functions in objects named by neither; wrote {outf}')
PY
rm -rf "$LABOUT"
