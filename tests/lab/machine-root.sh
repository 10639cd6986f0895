#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the provider lab's machine disk: an ext4 image of a Debian 12 root
# with systemd as init, made from the packaging tests' debootstrap root
# (tests/packaging/lib.sh) plus what a provider's RDMA machine runs, and the
# lab kernel's modules. tests/lab/machines.sh calls it under its cache lock
# and keys the result by this script, the guest files, the kernel and the
# package's dependencies (docs/lab.md, "The provider lab").
#
#   machine-root.sh OUT.img KDIR KVER DEPENDS
#
# DEPENDS: the .deb's Depends and Recommends, installed with `apt-get
# satisfy` so that `apt install ./fabric-agent_*.deb` inside the machine,
# which has no route to an archive, finds every dependency already there.
set -euo pipefail
FA_TEST_NAME=lab-root
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../packaging/lib.sh
source "$LAB_DIR/../packaging/lib.sh"

out=$1 kdir=$2 kver=$3 depends=$4
# The machine: systemd as PID 1 (systemd-sysv) with D-Bus (crun and Podman
# drive systemd through it: the systemd cgroup manager), the host's command
# channel (qemu-guest-agent), the fabric tools, Podman + crun as the
# container engine, with catatonit (Podman's Recommends, which `apt install
# podman` brings on a provider's node): the init of a pod's infra container,
# from which `podman kube play` builds its pause image without a registry.
# (rdma-core brings udev, which is masked below.)
MACHINE_PKGS=(systemd-sysv dbus qemu-guest-agent iproute2 iputils-ping wireguard-tools rdma-core
  ibverbs-utils ibverbs-providers perftest podman crun catatonit kmod procps)
# The renter's image (a Debian 12 userland with the RDMA tools and OpenSSH,
# as an NCCL job's image would have: mpirun and the renter reach the other
# nodes over ssh), run with `podman run --rootfs`: no registry.
RENTER_PKGS=(iproute2 iputils-ping wireguard-tools ibverbs-providers ibverbs-utils perftest procps
  openssh-server openssh-client)

t0=$(date +%s)
tmp=$(mktemp -d "$(dirname "$out")/root.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
archives=$(dirname "$out")/archives
mkdir -p "$archives/partial"

# chroot_apt DIR ARGS...: apt-get in DIR with the lab's own archive cache
# (not the packaging tests', which their apt runs lock while they run).
chroot_apt() {
  local dir=$1; shift
  unshare --mount --propagation private -- /bin/sh -c '
    set -e
    root=$1; cache=$2; shift 2
    mount -t proc proc "$root/proc"
    mount --bind "$cache" "$root/var/cache/apt/archives"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive apt-get -q -o Dpkg::Use-Pty=0 "$@"' sh "$dir" "$archives" "$@"
}

log "machine root: unpacking the Debian 12 root, installing ${MACHINE_PKGS[*]}"
fa_unpack_root "$root"
chroot_apt "$root" update >"$tmp/apt.log" 2>&1 || { tail -n 20 "$tmp/apt.log" >&2; die "apt-get update failed"; }
chroot_apt "$root" install -y --no-install-recommends "${MACHINE_PKGS[@]}" >>"$tmp/apt.log" 2>&1 ||
  { tail -n 30 "$tmp/apt.log" >&2; die "apt-get install of the machine packages failed"; }
if [ -n "$depends" ]; then
  log "machine root: the package's dependencies: $depends"
  chroot_apt "$root" satisfy -y --no-install-recommends "$depends" >>"$tmp/apt.log" 2>&1 ||
    { tail -n 30 "$tmp/apt.log" >&2; die "apt-get satisfy '$depends' failed"; }
fi

log "machine root: the renter image (${RENTER_PKGS[*]})"
renter=$root/var/lib/lab-renter
fa_unpack_root "$renter"
chroot_apt "$renter" update >>"$tmp/apt.log" 2>&1 || { tail -n 20 "$tmp/apt.log" >&2; die "apt-get update (renter) failed"; }
chroot_apt "$renter" install -y --no-install-recommends "${RENTER_PKGS[@]}" >>"$tmp/apt.log" 2>&1 ||
  { tail -n 30 "$tmp/apt.log" >&2; die "apt-get install of the renter packages failed"; }

for r in "$root" "$renter"; do
  # No archive is reachable from a lab machine: no package lists, no DNS.
  rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin
  : > "$r/etc/resolv.conf"
done

# The lab kernel's modules (Debian's package, unpacked by tests/lab/run).
mkdir -p "$root/usr/lib/modules"
cp -a "$kdir/root/lib/modules/$kver" "$root/usr/lib/modules/"

g=$LAB_DIR/guest/machine
install -m 0755 "$g/lab-node" "$root/usr/local/sbin/lab-node"
install -m 0644 "$g/lab-node.service" "$g/lab-qga.service" "$g/lab-console.service" "$root/etc/systemd/system/"
install -m 0644 "$g/fstab" "$root/etc/fstab"
install -m 0644 "$g/modules-load.conf" "$root/etc/modules-load.d/fabric-lab.conf"
mkdir -p "$root/lab"
systemctl --root="$root" --quiet enable lab-node.service lab-qga.service lab-console.service
# Masked: udev (rdma-core pulls it in; under emulation its coldplug costs
# ~25 s of every boot and nothing here needs it: devtmpfs makes the device
# nodes, modules-load.conf loads what its rdma rules would, the units in
# guest/machine/ replace the two that wait for udev devices), the getty
# units that wait for udev's tty devices (90 s each), qemu-guest-agent.service
# (lab-qga.service instead), the modprobe@ units of filesystems and drivers
# no test uses, Podman's boot-time units (auto-update, restart policies: no
# container here has either) and maintenance timers.
systemctl --root="$root" --quiet mask \
  systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
  systemd-udev-trigger.service systemd-udev-settle.service \
  serial-getty@.service getty@.service getty-static.service qemu-guest-agent.service \
  modprobe@dm_mod.service modprobe@fuse.service modprobe@loop.service modprobe@configfs.service \
  modprobe@efi_pstore.service modprobe@drm.service \
  podman-auto-update.timer podman-auto-update.service podman-restart.service \
  apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer e2scrub_reap.service \
  fstrim.timer systemd-firstboot.service

mb=$(du -sm "$root" | cut -f1)
# Room for the package, containers' storage and the journal.
size=$((mb + 1536))
mke2fs -q -t ext4 -L lab-root -E root_owner=0:0 -d "$root" "$tmp/root.img" "${size}M" ||
  die "mke2fs -d $root failed"
mv "$tmp/root.img" "$out"
log "machine root: $(basename "$out") (${mb} MiB of files, ${size} MiB image) built in $(( $(date +%s) - t0 ))s"
