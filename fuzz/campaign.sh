#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make fuzz`: every harness in turn, each until FUZZ_SECONDS or FUZZ_RUNS
# executions (whichever comes first), then one table of what each did.
#   fuzz/campaign.sh BUILD_DIR [harness...]
# Environment: FUZZ_SECONDS (600; 0: no limit), FUZZ_RUNS (-1: no limit),
# FUZZ_JOBS (1; more runs libFuzzer's -fork=N), FUZZ_FRESH=1 (start from
# the seeds alone, not from the corpus earlier campaigns grew).
# Each harness's corpus, log and any crash are in BUILD_DIR/fuzz/campaign/<name>;
# the table also goes to BUILD_DIR/fuzz/campaign/summary.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
shift
seconds=${FUZZ_SECONDS:-600}
runs=${FUZZ_RUNS:--1}
jobs=${FUZZ_JOBS:-1}
out="$build/fuzz/campaign"
mkdir -p "$out"

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for d in "$here"/corpus/*/; do names+=("$(basename "$d")"); done
fi

summary="$out/summary.md"
{
  echo "| harness | executions | exec/s | cov | ft | corpus | crashes | seconds |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
} >"$summary"
failed=0
for n in "${names[@]}"; do
  bin="$build/fuzz/fuzz_$n"
  [ -x "$bin" ] || { echo "campaign: no harness $bin (make fuzz builds them)" >&2; exit 2; }
  work="$out/$n"
  fresh=()
  [ "${FUZZ_FRESH:-0}" = 1 ] && fresh=(--fresh)
  opts=(-max_total_time="$seconds" -runs="$runs")
  [ "$jobs" -gt 1 ] && opts+=(-fork="$jobs" -ignore_crashes=1)
  echo "campaign: $n (${seconds}s, runs $runs, jobs $jobs)" >&2
  start=$(date +%s)
  rc=0
  "$here/run.sh" "${fresh[@]}" "$bin" "$here" "$work" "${opts[@]}" 2>/dev/null || rc=$?
  took=$(( $(date +%s) - start ))
  log="$work/log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\)[: \t].*/\1/p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$work/corpus" -type f | wc -l)
  crashes=$(find "$work" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'leak-*' -o -maxdepth 1 -name 'timeout-*' -o -maxdepth 1 -name 'oom-*' | wc -l)
  [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ] && failed=1
  rate=$(sed -n 's/^stat::average_exec_per_sec: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  echo "| $n | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | $corpus | $crashes | $took |" >>"$summary"
done
cat "$summary"
if [ "$failed" -ne 0 ]; then
  echo "campaign: crashes found; the inputs are in $out/<harness>/ (crash-*, leak-*, timeout-*, oom-*)" >&2
  exit 1
fi
