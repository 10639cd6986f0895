#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The fabric-agent binary skips std::ios_base::Init (agent/main.cpp): no
# standard stream object (std::cout, std::cerr, ... and their wide twins) may
# be linked into it, or it would be used unconstructed. Also checks that the
# skip is in place: ios_base::Init's constructor is the empty function.
#   no_iostream.sh FABRIC_AGENT_BINARY (unstripped)
set -euo pipefail
bin=$1
syms=$(nm "$bin")
streams=$(grep -E ' _ZSt[0-9]+w?(cin|cout|cerr|clog)$' <<<"$syms" || true)
if [ -n "$streams" ]; then
  echo "FAIL: $bin links standard stream objects (never constructed in this binary):" >&2
  nm -C "$bin" | grep -E ' std::w?(cin|cout|cerr|clog)$' >&2 || true
  echo "use stdio or spdlog instead, or drop the --defsym of ios_base::Init in agent/CMakeLists.txt" >&2
  exit 1
fi
init=$(awk '$3 == "_ZNSt8ios_base4InitC1Ev" {print $1}' <<<"$syms")
skip=$(awk '$3 == "fa_ios_base_init_skipped" {print $1}' <<<"$syms")
if [ -z "$skip" ] || { [ -n "$init" ] && [ "$init" != "$skip" ]; }; then
  echo "FAIL: std::ios_base::Init::Init() in $bin is ${init:-absent}, not fa_ios_base_init_skipped (${skip:-absent})" >&2
  exit 1
fi
echo "ok: no standard stream in $bin; ios_base::Init is skipped"
