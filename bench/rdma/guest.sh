# SPDX-License-Identifier: Apache-2.0
# Runs inside the lab VM (see bench/rdma/run): alternating rounds of
# ib_write_bw and `fabric-agent probe rdma run` between rxe0 and rxe1.
. "$LAB/lib.sh"
# shellcheck disable=SC1090
. "$LAB_FILES/$(ls "$LAB_FILES" | head -n 1)"

rxe_pair
note "$RXE_A gid[$GID_A] -> $RXE_B gid[$GID_B], ${SIZE}-byte writes, ${DURATION} s, window 128, $ROUNDS rounds"
KEYF=$LAB_OUT/probe.key
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$KEYF"
bg_start server fabric-agent probe rdma serve --key-file "$KEYF" --hca "$RXE_B:1" --gid-index "$GID_B"
retry 60 0.25 grep -q serving "$LAB_OUT/server.log"

perf=() ours=() skipped=0
run_perf() {
  step "round $r: ib_write_bw"
  # Same window as the probe (-t 128), duration mode, Gb/s.
  local opts=(-F -s "$SIZE" -D "$DURATION" -t 128 --report_gbits) line
  bg_start perf_server ib_write_bw -d "$RXE_B" -i 1 -x "$GID_B" "${opts[@]}"
  retry 20 0.5 ib_write_bw -d "$RXE_A" -i 1 -x "$GID_A" "${opts[@]}" "$IP_B" > "$LAB_OUT/perf$r.log" 2>&1
  bg_wait perf_server || true
  line=$(awk '/#bytes/ { getline; print; exit }' "$LAB_OUT/perf$r.log")
  read -r _ _ _ avg _ <<< "$line"
  note "ib_write_bw $avg Gb/s"
}
run_probe() {
  step "round $r: fabric-agent probe rdma"
  fabric-agent probe rdma run --peer "$IP_B" --key-file "$KEYF" --hca "$RXE_A:1" --gid-index "$GID_A" --size "$SIZE" \
    --duration "$DURATION" --window 128 --latency-iters 100 --json > "$LAB_OUT/probe$r.json"
  g=$(jq -r '.gbps * 1000 | round / 1000' "$LAB_OUT/probe$r.json")
  note "probe $g Gb/s"
}
for r in $(seq 1 "$ROUNDS"); do
  # Alternate which tool goes first, so a drift in the host's load does not
  # favour one of them.
  if [ $((r % 2)) -eq 1 ]; then run_perf; run_probe; else run_probe; run_perf; fi
  # Under TCG perftest's cycle-counter timing sometimes reports 0: such a
  # round measured nothing and is left out (and said so), with its partner.
  if ! awk -v a="${avg:-0}" 'BEGIN { exit !(a > 0) }'; then
    note "round $r skipped: ib_write_bw reported no bandwidth"
    skipped=$((skipped + 1))
    continue
  fi
  perf+=("$avg")
  ours+=("$g")
done

[ ${#perf[@]} -gt 0 ] || fail "no round produced an ib_write_bw figure"
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mp=$(median "${perf[@]}")
mo=$(median "${ours[@]}")
ratio=$(awk -v a="$mo" -v b="$mp" 'BEGIN { printf "%.3f", a / b }')
echo "RESULT ib_write_bw ${mp} Gb/s (rounds: ${perf[*]})"
echo "RESULT probe       ${mo} Gb/s (rounds: ${ours[*]})"
echo "RESULT ratio probe/ib_write_bw = $ratio (target >= 0.95; size $SIZE, ${DURATION} s, window 128; ${#perf[@]} rounds, $skipped skipped)"
