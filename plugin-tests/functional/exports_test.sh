#!/bin/bash
# The plugin's dynamic symbol table defines exactly ncclNetPlugin_v6..v12
# and the one-sided tables ncclGinPlugin_v11..v13, ncclRmaPlugin_v13..v17
# (ncclCollNetPlugin_* and the device-direct ncclGinPlugin_v14 are not
# exported by weft: docs/one-sided.md). Any other defined dynamic
# symbol fails the test, except the linker-generated _init/_fini.
#   exports_test.sh <libnccl-net-weft.so>
set -u
LIB=${1:?usage: exports_test.sh <plugin .so>}
[ -f "$LIB" ] || { echo "FAIL: $LIB does not exist"; exit 1; }
out=$(nm -D --defined-only "$LIB") || { echo "FAIL: nm -D failed on $LIB"; exit 1; }
echo "nm -D --defined-only $LIB:"
echo "$out"
defined=$(echo "$out" | awk 'NF>=3 {print $3} NF==2 {print $2}' | sed 's/@.*//' | sort -u)
expected=$({
  printf 'ncclNetPlugin_v%s\n' 6 7 8 9 10 11 12
  printf 'ncclGinPlugin_v%s\n' 11 12 13
  printf 'ncclRmaPlugin_v%s\n' 13 14 15 16 17
} | sort)
rc=0
for s in $expected; do
  if ! grep -qx "$s" <<<"$defined"; then echo "FAIL: missing $s"; rc=1; fi
done
for s in $defined; do
  grep -qx "$s" <<<"$expected" && continue
  case "$s" in
    _init|_fini) echo "note: linker symbol $s present" ;;
    *) echo "FAIL: unexpected exported symbol $s"; rc=1 ;;
  esac
done
# Each must be a data object (the function table), not a function.
for s in $expected; do
  t=$(echo "$out" | awk -v s="$s" '$3==s {print $2}')
  case "$t" in D|R|B|d|r|b) ;; "") ;; *) echo "FAIL: $s has type $t, expected a data object"; rc=1 ;; esac
done
[ $rc -eq 0 ] && echo "PASSED: exactly ncclNetPlugin_v6..v12, ncclGinPlugin_v11..v13, ncclRmaPlugin_v13..v17"
exit $rc
