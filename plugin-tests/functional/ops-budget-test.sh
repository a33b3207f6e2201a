#!/bin/bash
# Fails when weft needs more device operations per message than a budget,
# as softverbs' NIC model counts them (scripts/ops-per-message.sh).
#   ops-budget-test.sh WEFT_PERF PLUGIN SIZE COUNTER MAX
# e.g. eager messages that fill their receives must not each cost a
# clear-to-send: send_wrs per 1 KiB message at most 1.5 (2 when every
# receive sent one).
set -eu
[ $# -eq 5 ] || { echo "usage: ops-budget-test.sh WEFT_PERF PLUGIN SIZE COUNTER MAX" >&2; exit 2; }
perf=$1 plugin=$2 size=$3 counter=$4 max=$5
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(WEFT_PERF=$perf OPS_ITERS=${OPS_ITERS:-500} "$here/../../scripts/ops-per-message.sh" "$size" \
  --plugin "$plugin")
echo "$out"
value=$(awk -v c="$counter" '$1 == c { print $2 }' <<<"$out")
[ -n "$value" ] || { echo "FAIL: no counter $counter in the output" >&2; exit 1; }
if awk -v v="$value" -v m="$max" 'BEGIN { exit !(v <= m) }'; then
  echo "PASS: $counter per $size-byte message: $value (budget $max)"
else
  echo "FAIL: $counter per $size-byte message: $value, over the budget of $max" >&2
  exit 1
fi
