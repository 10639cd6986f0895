#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fixture of the packaging tests: the release .deb and .rpm, built as `make
# package` builds them (scripts/package.sh: in the Debian 11 root, the build
# tree BUILD_DIR/release/build), twice: release 1 into OUT_DIR/r1 and
# release 2 (a higher version of the same build, for the upgrade tests)
# into OUT_DIR/r2. The files of the release 1 .deb are unpacked into
# OUT_DIR/r1/root: its usr/bin/fabric-agent is the daemon the lab boots and
# packaging:server-limits runs. Prints sizes and durations.
#   build_packages.sh BUILD_DIR OUT_DIR
set -euo pipefail
FA_TEST_NAME=packaging:build
source "$(dirname "$0")/lib.sh"

build=$1
out=$2
rm -rf "$out"
"$(dirname "$0")/../../scripts/package.sh" "$build" "$out" 1 2
fa_packages "$out"
for f in "$DEB1" "$RPM1"; do
  log "$(basename "$f"): $(stat -c %s "$f") bytes"
done
log "unstripped build binary: $(stat -c %s "$build/release/build/agent/fabric-agent") bytes"
dpkg-deb -x "$DEB1" "$out/r1/root" || die "dpkg-deb -x $DEB1 failed"
[ -x "$out/r1/root/usr/bin/fabric-agent" ] || die "$DEB1 has no usr/bin/fabric-agent"
log "unpacked $(basename "$DEB1") into $out/r1/root"
