#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs everything fabric-agent needs to build, run and test, from Debian 12
# packages. Idempotent: a second run installs nothing and takes about a second.
#   scripts/deps.sh            build + unit/netns test dependencies
#   scripts/deps.sh --lab      also what tests/lab needs (qemu, kernel, perftest)
#   scripts/deps.sh --bench    also what bench/ needs (wrk, node_exporter)
set -euo pipefail

build_pkgs=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libboost-system-dev
  libibverbs-dev librdmacm-dev libibumad-dev
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev
  libyaml-cpp-dev libspdlog-dev nlohmann-json3-dev libssl-dev libsystemd-dev
  catch2
)
test_pkgs=(
  iproute2 iputils-ping procps curl wireguard-tools wireguard-go
  python3              # tests/agent/e2e_netns.sh and the benches read JSON answers with it
  ibverbs-utils rdma-core
  prometheus systemd
  crun busybox-static  # tests/pods: crun runs busybox containers through the OCI hook
  podman               # tests/pods: the same CDI spec consumed by Podman (--device fabric-agent.io/rdma=all)
  # tests/packaging: CPack's DEB (dpkg-shlibdeps) and RPM (rpmbuild)
  # generators, lintian, and a Debian 12 root made with debootstrap.
  dpkg-dev rpm rpm2cpio cpio lintian debootstrap zstd binutils
)
# bench/status compares against node_exporter with wrk; bench/mesh/lab-phases.sh
# traces processes in the lab VM with perf.
bench_pkgs=(
  wrk prometheus-node-exporter linux-perf
)
lab_pkgs=(
  qemu-system-x86 busybox-static perftest rdmacm-utils cpio kmod zstd xz-utils
  ibverbs-providers jq binutils
)

want=("${build_pkgs[@]}" "${test_pkgs[@]}")
for a in "$@"; do
  case "$a" in
    --lab) want+=("${lab_pkgs[@]}") ;;
    --bench) want+=("${bench_pkgs[@]}") ;;
    *) echo "deps.sh: unknown option '$a' (accepted: --lab, --bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
