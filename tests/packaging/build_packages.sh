#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fixture of the packaging tests: builds the .deb and the .rpm from this build
# tree twice, release 1 into OUT/r1 and release 2 (a higher version of the
# same build, for the upgrade tests) into OUT/r2, with the same cpack
# command `make package` runs. Prints sizes and durations.
#   build_packages.sh BUILD_DIR OUT_DIR
set -euo pipefail
FA_TEST_NAME=packaging:build
source "$(dirname "$0")/lib.sh"

build=$1
out=$2
rm -rf "$out"
mkdir -p "$out"
for rel in 1 2; do
  start=$(date +%s.%N)
  if ! cpack --config "$build/CPackConfig.cmake" -B "$out/r$rel" \
    -D CPACK_DEBIAN_PACKAGE_RELEASE="$rel" -D CPACK_RPM_PACKAGE_RELEASE="$rel" >"$out/cpack-r$rel.log" 2>&1; then
    cat "$out/cpack-r$rel.log" >&2
    die "cpack (release $rel) failed"
  fi
  end=$(date +%s.%N)
  log "release $rel built in $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
  rm -rf "$out/r$rel/_CPack_Packages"
done
fa_packages "$out"
for f in "$DEB1" "$RPM1"; do
  log "$(basename "$f"): $(stat -c %s "$f") bytes"
done
log "unstripped build binary: $(stat -c %s "$build/agent/fabric-agent") bytes"
