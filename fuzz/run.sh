#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs one harness over its seed corpus without writing into the tree.
#   fuzz/run.sh [--fresh] HARNESS FUZZ_DIR WORK_DIR [libFuzzer options...]
# HARNESS is <build>/fuzz/fuzz_<name>; the seeds are FUZZ_DIR/corpus/<name>
# and its dictionary FUZZ_DIR/dict/<name>.dict when there is one. Seeds are
# text: a binary one is NAME.hex ('#' comment lines, then hex digits; spaces
# and newlines ignored), given to the harness as its bytes. New inputs go to
# WORK_DIR/corpus (kept from run to run unless --fresh), a crash to
# WORK_DIR/crash-<sha1>, libFuzzer's output to WORK_DIR/log and stderr.
set -euo pipefail
fresh=0
if [ "${1:-}" = "--fresh" ]; then fresh=1; shift; fi
bin=$1 dir=$2 work=$3
shift 3
name=$(basename "$bin")
name=${name#fuzz_}
seeds="$dir/corpus/$name"
[ -d "$seeds" ] || { echo "run.sh: no seed corpus $seeds" >&2; exit 2; }
[ "$fresh" -eq 1 ] && rm -rf "$work"
mkdir -p "$work/corpus"
rm -rf "$work/seeds"
mkdir "$work/seeds"
for f in "$seeds"/*; do
  case "$f" in
    *.hex) perl -ne 'next if /^\s*#/; s/\s+//g; print pack("H*", $_)' "$f" >"$work/seeds/$(basename "$f" .hex)" ;;
    *) cp "$f" "$work/seeds/" ;;
  esac
done
opts=(-artifact_prefix="$work/" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
[ -f "$dir/dict/$name.dict" ] && opts+=(-dict="$dir/dict/$name.dict")
# Leaks are errors too (LeakSanitizer runs at the end); UBSan stops at the first report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
set +e
"$bin" "${opts[@]}" "$@" "$work/corpus" "$work/seeds" 2>&1 | tee "$work/log" >&2
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  echo "run.sh: $name failed (exit $rc); inputs that crashed it:" >&2
  ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null >&2 || true
fi
exit "$rc"
