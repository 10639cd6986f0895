# SPDX-License-Identifier: Apache-2.0
# pods-memlock: with CAP_SYS_RESOURCE (root in the VM has every capability),
# `fabric-agent oci-hook create-runtime` raises the container process's
# RLIMIT_MEMLOCK to unlimited/unlimited, from a low soft AND hard limit (the
# case that needs the capability; the build machine's sandbox lacks it, so
# tests/pods only sees the soft = hard fallback there). The "container" is a
# sleep started with `ulimit -l 64`; the hook gets a crafted OCI state and
# bundle and a device root without GPUs (whole machine trivially), and no
# daemon: it raises the limit, then fails at registration with the
# "not reachable" line, which this scenario expects.
. "$LAB/lib.sh"

step "capabilities of root in the VM"
capeff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
# CAP_SYS_RESOURCE is bit 24.
assert_eq "$(( (16#$capeff >> 24) & 1 ))" 1 "CAP_SYS_RESOURCE in CapEff ($capeff)"

step "a process with a low memlock limit (soft and hard 64 KiB)"
bash -c 'ulimit -l 64; exec sleep 600' &
pid=$!
retry 50 0.1 grep -qx sleep "/proc/$pid/comm"   # the ulimit is set once bash has exec'ed sleep
limit() { sed -n 's/^Max locked memory[[:space:]]*//p' "/proc/$pid/limits" | tr -s ' ' | sed 's/ $//'; }
assert_eq "$(limit)" "65536 65536 bytes" "/proc/$pid/limits before the hook"

step "fabric-agent oci-hook create-runtime on that pid"
w=/tmp/pod
mkdir -p "$w/bundle" "$w/dev/infiniband"
echo '{"ociVersion":"1.0.2","process":{"env":["PATH=/bin"]},"linux":{"devices":[]}}' > "$w/bundle/config.json"
echo "{\"ociVersion\":\"1.0.2\",\"id\":\"memlock-$pid\",\"status\":\"created\",\"pid\":$pid,\"bundle\":\"$w/bundle\"}" > "$w/state.json"
rc=0
fabric-agent oci-hook create-runtime --socket "$w/no-daemon.sock" --dev-root "$w/dev" \
  < "$w/state.json" > "$w/hook.out" 2> "$w/hook.err" || rc=$?
note "hook exit $rc, stderr: $(cat "$w/hook.err")"
assert_eq "$rc" 1 "hook exit status (no daemon to register with)"
assert_contains "$(cat "$w/hook.err")" "daemon is not reachable at $w/no-daemon.sock" "hook stderr"
assert_not_contains "$(cat "$w/hook.err")" "RLIMIT_MEMLOCK" "hook stderr (no memlock warning or error)"

step "the limit is unlimited now"
assert_eq "$(limit)" "unlimited unlimited bytes" "/proc/$pid/limits after the hook"
kill "$pid"
