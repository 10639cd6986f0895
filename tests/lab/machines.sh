# SPDX-License-Identifier: Apache-2.0
# The provider lab (docs/lab.md, "The provider lab"): QEMU machines booting
# Debian 12 with systemd from a disk, as a provider's hosts run. Sourced by
# tests/lab/run for a scenario whose first lines say `# lab: machines=N`;
# such a scenario runs on the host and drives the machines with the helpers
# below (and the assertions of guest/lib.sh).
#
# Each machine: the cached disk image (machine-root.sh) opened with
# snapshot=on, so every machine writes to its own temporary copy-on-write
# layer, which survives the machine's reboots (same QEMU process) and goes
# with the run; the lab kernel with a small initramfs (guest/root-init) that
# mounts the disk and switch_roots to systemd; NICs:
#   fabric  virtio-net on a segment only the machines share (a QEMU stream netdev
#           over a unix socket, point to point), 192.168.77.(N+1)/24, rxe0
#   uplink  QEMU user networking with restrict=on (nothing leaves it), 10.0.2.15
#           with the default route, rxe_up; a port forward 127.0.0.1:PORT ->
#           the API (M_API_PORT[N])
# and the host's channels: the guest agent (RUN/nodeN/qga.sock, tests/lab/qga.py),
# a root shell on hvc0 (RUN/nodeN/console.sock), the serial console in
# RUN/nodeN/console.log, the 9p share RUN/nodeN/share at /lab.

M_IMG= M_INITRD= M_DEB=
declare -a M_PID=() M_API_PORT=() M_T0=()
M_N=0

# ---------------------------------------------------------------- caches
m_deb_resolve() {
  local d=$1 f
  if [ -z "$d" ]; then
    for d in "$SRC_DIR/build/tests/packaging/packages/r1" "$SRC_DIR/build/packages"; do
      f=$(ls -t "$d"/fabric-agent_*_amd64.deb 2>/dev/null | head -n 1 || true)
      [ -z "$f" ] || break
    done
  elif [ -d "$d" ]; then
    f=$(ls -t "$d"/fabric-agent_*_amd64.deb 2>/dev/null | head -n 1 || true)
  else
    f=$d
  fi
  [ -n "$f" ] && [ -f "$f" ] ||
    die "no fabric-agent .deb (${d:-build/tests/packaging/packages/r1, build/packages}): run 'make package' or pass --deb PATH"
  M_DEB=$(readlink -f "$f")
}

# The machine disk, keyed by its recipe, the kernel and the package's
# dependencies; built under the cache lock (several worktrees share it).
m_image() {
  local deps key
  deps=$(dpkg-deb -f "$M_DEB" Depends Recommends | sed -n 's/^[A-Za-z]*: //p' | paste -sd, | sed 's/, */, /g')
  key=$( { echo "$KPKG $KDEBVER $deps"
           cat "$LAB_DIR/machine-root.sh" "$LAB_DIR"/guest/machine/* "$SRC_DIR/tests/packaging/lib.sh" | sha256sum; } |
         sha256sum | cut -c1-16)
  M_IMG=$CACHE/machine/root-$KVER-$key.img
  if [ ! -f "$M_IMG" ]; then
    mkdir -p "$CACHE/machine"
    with_lock machine m_build_image "$deps"
  fi
  touch "$M_IMG"
  find "$CACHE/machine" -maxdepth 1 \( -name 'root-*.img' -o -name 'initrd-*.cpio' \) -mtime +3 -delete 2>/dev/null || true
}
m_build_image() {
  [ -f "$M_IMG" ] && return 0
  "$LAB_DIR/machine-root.sh" "$M_IMG" "$KDIR" "$KVER" "$1" || die "building the machine disk failed"
}

# The machines' initramfs: busybox, the virtio/ext4/9p modules, guest/root-init.
M_MODULES=(virtio_pci virtio_blk virtio_net virtio_console 9pnet_virtio 9p ext4 crc32c_generic)
m_initrd() {
  local key
  key=$( { echo "$KPKG $KDEBVER ${M_MODULES[*]}"; cat "$LAB_DIR/guest/root-init" "$(command -v busybox)" | sha256sum; } |
         sha256sum | cut -c1-16)
  M_INITRD=$CACHE/machine/initrd-$KVER-$key.cpio
  [ -f "$M_INITRD" ] || with_lock machine m_build_initrd
  touch "$M_INITRD"
}
m_build_initrd() {
  [ -f "$M_INITRD" ] && return 0
  local tmp r m bb
  tmp=$(mktemp -d "$CACHE/machine/initrd.tmp.XXXXXX")
  r=$tmp/root
  make_fs_skeleton "$r"
  bb=$(command -v busybox)
  cp "$bb" "$r/usr/bin/busybox"
  for m in $("$bb" --list); do [ "$m" = busybox ] || ln -sf busybox "$r/usr/bin/$m"; done
  mkdir -p "$r/lib/modules/$KVER"
  : > "$r/lib/modules/lab.order"
  local rel src
  while read -r m; do
    case "$m" in MISSING*) rm -rf "$tmp"; die "kernel $KVER has no module ${m#MISSING }" ;; esac
    # busybox insmod takes plain .ko files.
    rel=${m%.xz}; rel=${rel%.zst}; src=$KDIR/root/lib/modules/$KVER/$m
    mkdir -p "$(dirname "$r/lib/modules/$KVER/$rel")"
    case "$m" in
      *.xz) xz -dc "$src" > "$r/lib/modules/$KVER/$rel" ;;
      *.zst) zstd -qdc "$src" > "$r/lib/modules/$KVER/$rel" ;;
      *) cp "$src" "$r/lib/modules/$KVER/$rel" ;;
    esac
    echo "$KVER/$rel" >> "$r/lib/modules/lab.order"
  done < <(MODULES=("${M_MODULES[@]}"); module_order)
  install -m 0755 "$LAB_DIR/guest/root-init" "$r/init"
  (cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) > "$tmp/initrd.cpio"
  mv "$tmp/initrd.cpio" "$M_INITRD"
  rm -rf "$tmp"
}

# ---------------------------------------------------------------- machines
m_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# m_boot N: starts machine N (0-based) in the background.
m_boot() {
  local n=$1 d=$RUN_DIR/node$1 kernel=$KDIR/root/boot/vmlinuz-$KVER
  mkdir -p "$d/share"
  [ ! -f "$KDIR/vmlinux" ] || kernel=$KDIR/vmlinux
  # The fabric: a unix stream socket node0 listens on and node1 connects to.
  # A stream carries every frame or makes the sender wait, as a switch with
  # flow control would; over datagrams the host dropped frames when a machine
  # fell behind, and soft-RoCE's go-back-N recovery then failed the RDMA
  # probe now and then (remote invalid request, timeout).
  local fabric="stream,id=fab,addr.type=unix,addr.path=$RUN_DIR/fabric.sock,server=off"
  if [ "$n" -eq 0 ]; then
    fabric="stream,id=fab,addr.type=unix,addr.path=$RUN_DIR/fabric.sock,server=on"
  else
    # QEMU 7.2 does not reconnect: node0's QEMU must listen first.
    retry 100 0.1 test -S "$RUN_DIR/fabric.sock" || fail "node$n: node0's fabric socket $RUN_DIR/fabric.sock did not appear"
  fi
  [ -n "${M_API_PORT[$n]:-}" ] || M_API_PORT[$n]=$(m_free_port)
  # norandmaps: under TCG a process with address randomisation translates all
  # its code anew, one without reuses the previous translations (docs/lab.md,
  # "Timing a process under TCG"): the boot takes 26 s of userspace instead of 36.
  # no_timer_check: on a busy host the vCPU can be descheduled while the
  # kernel checks the IO-APIC timer, which then panics ("IO-APIC + timer
  # doesn't work!"); the emulated timer is fine.
  local append="console=ttyS0 loglevel=${FA_LAB_LOGLEVEL:-4} norandmaps no_timer_check lab.node=$n systemd.hostname=node$n"
  append+=" systemd.machine_id=$(printf 'fa1ab%027x' "$((n + 1))") systemd.show_status=error"
  [ -z "${FA_LAB_APPEND:-}" ] || append+=" $FA_LAB_APPEND"
  # SeaBIOS (QEMU's default firmware), not the qboot of the one-VM
  # scenarios: after a guest reboot qboot boots the PVH kernel as a
  # multiboot one, over an image it has zeroed, and the machine spins in
  # zeros. SeaBIOS boots it again, and the machines boot as fast with it.
  "$QEMU" "${QEMU_ACCEL[@]}" -M pc -smp "$M_SMP" -m "$MEM" -nodefaults -no-user-config \
    -display none -kernel "$kernel" -initrd "$M_INITRD" -append "$append" \
    -drive "file=$M_IMG,format=raw,if=none,id=disk,snapshot=on,cache=unsafe" \
    -device virtio-blk-pci,drive=disk \
    -netdev "$fabric" \
    -device "virtio-net-pci,netdev=fab,mac=52:54:00:fa:00:0$n" \
    -netdev "user,id=up,restrict=on,net=10.0.2.0/24,host=10.0.2.2,hostfwd=tcp:127.0.0.1:${M_API_PORT[$n]}-10.0.2.15:7471" \
    -device "virtio-net-pci,netdev=up,mac=52:54:00:0e:00:0$n" \
    -device virtio-serial-pci \
    -chardev "socket,id=qga,path=$d/qga.sock,server=on,wait=off" \
    -device virtserialport,chardev=qga,name=org.qemu.guest_agent.0 \
    -chardev "socket,id=con,path=$d/console.sock,server=on,wait=off" \
    -device virtconsole,chardev=con \
    -fsdev "local,id=lab,path=$d/share,security_model=none" \
    -device virtio-9p-pci,fsdev=lab,mount_tag=lab \
    -serial "file:$d/console.log" -pidfile "$d/qemu.pid" 2>"$d/qemu.err" &
  M_PID[$n]=$!
  M_T0[$n]=$(now)
  [ "$n" -lt "$M_N" ] || M_N=$((n + 1))
}

# vm N CMD...: runs `sh -c "CMD..."` as root in machine N; its output and status.
vm() {
  local n=$1; shift
  python3 "$LAB_DIR/qga.py" exec "$RUN_DIR/node$n/qga.sock" --timeout "${VM_TIMEOUT:-180}" -- "$*"
}
# vm_start N CMD...: starts it, prints the guest pid; vm_collect N PID: waits for it, as vm.
vm_start() {
  local n=$1; shift
  python3 "$LAB_DIR/qga.py" start "$RUN_DIR/node$n/qga.sock" -- "$*"
}
vm_collect() {
  python3 "$LAB_DIR/qga.py" collect "$RUN_DIR/node$1/qga.sock" "$2" --timeout "${VM_TIMEOUT:-180}"
}
# vm_put N FILE: copies a host file to /lab/files/ of machine N (its share).
vm_put() {
  mkdir -p "$RUN_DIR/node$1/share/files"
  cp "$2" "$RUN_DIR/node$1/share/files/"
}

m_console_tail() {
  local n=$1
  echo "---- node$n: last 40 lines of the serial console ($RUN_DIR/node$n/console.log) ----" >&2
  tail -n 40 "$RUN_DIR/node$n/console.log" 2>/dev/null | tr -d '\r' >&2 || true
  [ ! -s "$RUN_DIR/node$n/qemu.err" ] || { echo "---- node$n: QEMU stderr ----" >&2; cat "$RUN_DIR/node$n/qemu.err" >&2; }
}

# m_wait N: until machine N's systemd reached its default target (running or
# degraded: the failed units are printed, and degraded fails the run).
# Sets M_BOOT_S[N] (host seconds from QEMU start).
declare -a M_BOOT_S=()
m_wait() {
  local n=$1 limit=${2:-$BOOT_TIMEOUT} state
  kill -0 "${M_PID[$n]}" 2>/dev/null || { m_console_tail "$n"; fail "node$n: QEMU exited"; }
  if ! python3 "$LAB_DIR/qga.py" ping "$RUN_DIR/node$n/qga.sock" --timeout "$limit"; then
    m_console_tail "$n"; fail "node$n: no guest agent within ${limit}s of boot"
  fi
  state=$(vm "$n" 'systemctl is-system-running --wait' || true)
  M_BOOT_S[$n]=$(awk -v a="${M_T0[$n]}" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  if [ "$state" != running ]; then
    vm "$n" 'systemctl --failed --no-pager; journalctl -b --no-pager -p warning | tail -n 40' >&2 || true
    fail "node$n: systemd is '$state' after boot"
  fi
}

# m_hold STATUS (--shell): the machines stay up after the scenario, for a
# shell on each; Enter (or, without a terminal, removing RUN/hold) stops them.
m_hold() {
  local n
  {
    echo
    echo "lab: scenario exited $1; the machines stay up. A root shell on each (Ctrl-] leaves it):"
    # The API, with the header file (mode 0600) a scenario wrote as
    # RUN/authN: never the token itself, which would land in the terminal and
    # in CTest's log.
    for ((n = 0; n < M_N; n++)); do
      echo "  node$n:"
      echo "    python3 $LAB_DIR/qga.py console $RUN_DIR/node$n/console.sock"
      echo "    python3 $LAB_DIR/qga.py exec $RUN_DIR/node$n/qga.sock -- 'systemctl status fabric-agent'"
      [ -z "${M_API_PORT[$n]:-}" ] || [ ! -f "$RUN_DIR/auth$n" ] ||
        echo "    curl --cacert $RUN_DIR/tls/ca.crt -H @$RUN_DIR/auth$n https://127.0.0.1:${M_API_PORT[$n]}/v1/status"
    done
  } >&2
  if [ -t 0 ]; then
    read -r -p "lab: press Enter to stop the machines " _ || true
  else
    touch "$RUN_DIR/hold"
    echo "lab: rm $RUN_DIR/hold stops them" >&2
    while [ -e "$RUN_DIR/hold" ]; do sleep 1; done
  fi
}

m_stop_all() {
  local n
  for ((n = 0; n < M_N; n++)); do
    [ -z "${M_PID[$n]:-}" ] || kill "${M_PID[$n]}" 2>/dev/null || true
  done
  for ((n = 0; n < M_N; n++)); do
    [ -z "${M_PID[$n]:-}" ] || wait "${M_PID[$n]}" 2>/dev/null || true
  done
}

# ---------------------------------------------------------------- the run
# machines_main SCENARIO_FILE: prepares the caches, runs the scenario on the
# host (machines are booted by it), stops the machines, reports.
machines_main() {
  local file=$1 name rc=0 t_prep
  name=$(basename "$file" .sh)
  M_SMP=${FA_LAB_SMP:-2}
  # The host's side of a machines scenario: the control plane's client and
  # TLS, the metrics check, the guest agent's client, the disk's recipe.
  local t missing=()
  for t in curl openssl promtool python3 dpkg-deb mke2fs unshare; do command -v "$t" >/dev/null 2>&1 || missing+=("$t"); done
  [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]} on the host (scripts/deps.sh --test --lab installs them)"
  m_deb_resolve "$DEB"
  m_image
  m_initrd
  t_prep=$(since "$T_START")
  RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/fa-lab-$name.XXXXXX")
  mkdir -p "$RUN_DIR/out"
  log "scenario $name: machines from $(basename "$M_IMG"), kernel $KVER, ${QEMU_ACCEL[*]}, -smp $M_SMP -m $MEM, package $(basename "$M_DEB"); run folder $RUN_DIR"
  export RUN_DIR M_DEB
  [ -n "$TIMEOUT_GIVEN" ] || TIMEOUT=1800
  (
    LAB_OUT=$RUN_DIR/out
    # shellcheck source=guest/lib.sh
    source "$LAB_DIR/guest/lib.sh"
    trap 'rc=$?; [ "$MODE" != shell ] || m_hold "$rc"; m_stop_all; _lab_on_exit' EXIT
    trap 'exit 124' TERM
    # shellcheck disable=SC1090
    source "$file"
  ) &
  local spid=$! wpid= pf i
  # The scenario's time limit (not in --shell, where the machines wait for you).
  if [ "$MODE" != shell ]; then
    (
      for ((i = 0; i < TIMEOUT; i++)); do sleep 1; kill -0 "$spid" 2>/dev/null || exit 0; done
      touch "$RUN_DIR/timed-out"
      # The machines first: a command waiting in one then ends at once.
      for pf in "$RUN_DIR"/node*/qemu.pid; do [ ! -f "$pf" ] || kill "$(cat "$pf")" 2>/dev/null || true; done
      kill -TERM "$spid" 2>/dev/null
    ) &
    wpid=$!
  fi
  wait "$spid" || rc=$?
  [ -z "${wpid:-}" ] || { kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null || true; }
  local pf
  for pf in "$RUN_DIR"/node*/qemu.pid; do
    # A scenario stopped mid-command leaves its machines: QEMU wrote their pids.
    [ ! -f "$pf" ] || kill "$(cat "$pf")" 2>/dev/null || true
  done
  if [ -e "$RUN_DIR/timed-out" ]; then
    for pf in "$RUN_DIR"/node*/console.log; do m_console_tail "$(basename "$(dirname "$pf")" | tr -dc 0-9)"; done
    die "scenario $name: stopped after ${TIMEOUT}s (--timeout); run folder kept: $RUN_DIR"
  fi
  local timing="prepare ${t_prep}s, total $(since "$T_START")s"
  if [ "$rc" -ne 0 ]; then
    # Only FA_LAB=off skips: a scenario's own 77 is a failure, not a skip.
    [ "$rc" -ne "$SKIP_RC" ] || { log "scenario $name exited $SKIP_RC: a scenario cannot skip"; rc=1; }
    log "scenario $name FAILED with status $rc ($timing); run folder kept: $RUN_DIR"
    exit "$rc"
  fi
  log "scenario $name passed ($timing)"
  if [ "$KEEP" = 1 ]; then log "run folder kept: $RUN_DIR"; else rm -rf "$RUN_DIR"; fi
  exit 0
}
