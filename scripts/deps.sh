#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what fabric-agent needs, from Debian 12 packages. Idempotent: a
# second run installs nothing and takes about a second.
#   scripts/deps.sh            build and run (`make run`): compilers, -dev libraries, what the daemon runs
#   scripts/deps.sh --package  also what `make package` runs on this host (debootstrap and zstd for
#                              its Debian 11 build root; docs/packaging.md)
#   scripts/deps.sh --build-root  only what that root gets (run in Debian 11 by scripts/package.sh):
#                              compilers, -dev libraries, and cpack's tools (dpkg-shlibdeps, rpmbuild, file)
#   scripts/deps.sh --test     also the tools the unit, netns, packaging and fuzz tests drive
#   scripts/deps.sh --fuzz     also what the libFuzzer harnesses need (`make fuzz`; --test includes it)
#   scripts/deps.sh --lab      also what tests/lab needs (qemu, kernel, perftest)
#   scripts/deps.sh --bench    also what bench/ needs (wrk, node_exporter)
set -euo pipefail

build_pkgs=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libboost-system-dev
  libibverbs-dev libibumad-dev
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev
  libyaml-cpp-dev libspdlog-dev nlohmann-json3-dev libssl-dev libsystemd-dev
  catch2               # the tests are configured with the build
)
# What the running daemon uses besides its libraries: the package's Recommends.
run_pkgs=(
  ibverbs-providers    # the verbs drivers (mlx5, rxe, ...), plugins libibverbs loads
  wireguard-go         # the WireGuard backend where the kernel has no module
)
# CPack's DEB (dpkg-shlibdeps; file finds the ELF files) and RPM (rpmbuild) generators.
cpack_pkgs=(
  dpkg-dev rpm binutils file
)
# scripts/package.sh: the Debian 11 root the release packages are built in.
package_pkgs=(
  debootstrap zstd
)
test_pkgs=(
  iproute2 iputils-ping procps curl wireguard-tools
  openssl              # throwaway TLS certificates (tests/agent server test, the provider lab)
  python3              # tests/agent/e2e_netns.sh and the benches read JSON answers with it
  ibverbs-utils rdma-core
  prometheus systemd
  crun busybox-static  # tests/pods: crun runs busybox containers through the OCI hook
  podman               # tests/pods: the same CDI spec consumed by Podman (--device fabric-agent.io/rdma=all)
  openssh-server openssh-client  # tests/pods: the group's SSH between two containers (real sshd, ssh, ssh-keygen)
  docker.io            # tests/pods: Docker 20.10 (no CDI) with fabric-agent-runtime as its default runtime
  # tests/packaging: the release build, lintian, rpm's queries, Debian 11, 12
  # and 13 roots made with debootstrap.
  "${package_pkgs[@]}" "${cpack_pkgs[@]}" rpm2cpio cpio lintian
  # tests/probes: OpenSM on ibsim's simulated InfiniBand fabrics (libumad2sim
  # attaches libibumad to them), sminfo/saquery as the reference; lldpd in
  # network namespaces for the LLDP neighbour.
  ibsim-utils libumad2sim0 opensm infiniband-diags lldpd
  # tests/agent: Debian's Slurm 22.05 (slurmctld, slurmd, scontrol, sbatch)
  # with munge loads what `fabric-agent slurm` writes, in network namespaces.
  slurmctld slurmd slurm-client munge
)
# fuzz/: clang, its sanitizer runtimes and libFuzzer (not pulled in by clang
# without its Recommends).
fuzz_pkgs=(
  clang libclang-rt-14-dev libfuzzer-14-dev
)
test_pkgs+=("${fuzz_pkgs[@]}")

# Packages above that ship a service the tests only run by hand, confined to
# their namespaces: never left running on the host (lldpd would send LLDP
# frames on every host interface, OpenSM would try to manage a real fabric,
# sshd would listen on the host's port 22: the tests run it in containers;
# slurmctld, slurmd and munged would serve the host: the Slurm test starts
# its own in its namespaces).
no_service=(lldpd opensm ssh slurmctld slurmd munge)
lab_pkgs=(
  qemu-system-x86 busybox-static perftest rdmacm-utils cpio kmod zstd xz-utils
  ibverbs-providers jq binutils
)
# bench/status compares against node_exporter with wrk.
bench_pkgs=(
  wrk prometheus-node-exporter
)

want=("${build_pkgs[@]}" "${run_pkgs[@]}")
for a in "$@"; do
  case "$a" in
    --package) want+=("${package_pkgs[@]}") ;;
    --build-root) want=("${build_pkgs[@]}" "${cpack_pkgs[@]}") ;;
    --test) want+=("${test_pkgs[@]}") ;;
    --fuzz) want+=("${fuzz_pkgs[@]}") ;;
    --lab) want+=("${lab_pkgs[@]}") ;;
    --bench) want+=("${bench_pkgs[@]}") ;;
    *) echo "deps.sh: unknown option '$a' (accepted: --package, --build-root, --test, --fuzz, --lab, --bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
# deploy/kubernetes is checked with npm packages (tests/deploy) and the
# node labels with kubectl's label validation (tests/agent nfd_test). Where
# a node or kubectl is already installed (another vendor's package) it is
# used as it is: Debian's packages would conflict with it.
for a in "$@"; do
  if [ "$a" = --test ]; then
    command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
    command -v kubectl >/dev/null || missing+=(kubernetes-client)
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Masked before the install, so that installing cannot start them either.
if command -v systemctl >/dev/null; then
  for svc in "${no_service[@]}"; do $SUDO systemctl mask "$svc.service" >/dev/null 2>&1 || true; done
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
