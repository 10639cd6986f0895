#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Our own objects are built with the compiler hardening of Debian's package
# flags and more (top-level CMakeLists.txt): -fstack-protector-strong,
# -fstack-clash-protection, -D_FORTIFY_SOURCE=2. A linked binary shows only
# that some object has them, so this looks at the archives of our objects:
# - every compile unit's DW_AT_producer (the options GCC records with -g)
#   names both stack options; without debug information, every archive must
#   at least reference __stack_chk_fail;
# - no object calls a printf-family function directly: at
#   _FORTIFY_SOURCE=2 glibc's headers send each of them to its __*_chk
#   variant (they check %n and the buffer size), and at least one such
#   variant is called, so the check is not vacuous.
#   hardening.sh ARCHIVE...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: hardening.sh ARCHIVE..." >&2; exit 2; }
fail=0
chk_total=0
for a in "$@"; do
  objs=$(ar t "$a" | wc -l)
  producers=$(readelf --debug-dump=info --dwarf-depth=1 "$a" 2>/dev/null | grep 'DW_AT_producer' || true)
  if [ -n "$producers" ]; then
    cus=$(grep -c . <<<"$producers")
    for opt in -fstack-protector-strong -fstack-clash-protection; do
      without=$(grep -c -v -e " $opt\( \|$\)" <<<"$producers" || true)
      if [ "$without" -ne 0 ]; then
        echo "FAIL: $a: $without of $cus compile units built without $opt" >&2
        fail=1
      fi
    done
  else
    cus="no debug information"
    if ! nm --undefined-only "$a" 2>/dev/null | grep -q ' __stack_chk_fail$'; then
      echo "FAIL: $a: no object references __stack_chk_fail (built without a stack protector)" >&2
      fail=1
    fi
  fi
  undef=$(nm -A --undefined-only "$a" 2>/dev/null)
  plain=$(awk '{print $NF}' <<<"$undef" |
    grep -E '^(printf|fprintf|dprintf|sprintf|snprintf|vprintf|vfprintf|vdprintf|vsprintf|vsnprintf|syslog|vsyslog)$' |
    sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}' || true)
  if [ -n "$plain" ]; then
    echo "FAIL: $a: calls $plain directly: built without _FORTIFY_SOURCE=2" >&2
    fail=1
  fi
  chk=$(grep -c -E ' __[a-z]+printf_chk$' <<<"$undef" || true)
  chk_total=$((chk_total + chk))
  echo "$a: $objs objects ($cus compile units), $chk calls into __*printf_chk"
done
if [ "$chk_total" -eq 0 ]; then
  echo "FAIL: no object calls a __*printf_chk function: nothing shows _FORTIFY_SOURCE" >&2
  fail=1
fi
[ "$fail" -eq 0 ] || exit 1
echo "ok: stack protector, stack-clash protection and _FORTIFY_SOURCE=2 in all $# archives"
