#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fabric-agent is linked with packed relative relocations (-z
# pack-relative-relocs, top-level CMakeLists.txt): ld.so applies them from a
# bitmap (DT_RELR) instead of one 24-byte RELA entry per pointer. Fails if
# the RELATIVE entries are back in .rela.dyn, or if this machine's ld.so
# cannot start the binary.
#   packed_relocs.sh FABRIC_AGENT_BINARY
set -euo pipefail
bin=$1
dyn=$(readelf -d -W "$bin")
if ! grep -q '(RELR)' <<<"$dyn"; then
  echo "FAIL: $bin has no DT_RELR: linked without -z pack-relative-relocs" >&2
  exit 1
fi
relative=$(readelf -r -W "$bin" | grep -c 'R_X86_64_RELATIVE' || true)
if [ "$relative" -gt 64 ]; then
  echo "FAIL: $bin still has $relative R_X86_64_RELATIVE entries in .rela.dyn" >&2
  exit 1
fi
relrsz=$(awk '/\(RELRSZ\)/ {print $3}' <<<"$dyn")
out=$("$bin" --version)
[[ $out == "fabric-agent "* ]] || { echo "FAIL: $bin --version printed '$out'" >&2; exit 1; }
echo "ok: $bin: DT_RELR of $relrsz bytes, $relative RELATIVE entries left in .rela.dyn; it starts ($out)"
