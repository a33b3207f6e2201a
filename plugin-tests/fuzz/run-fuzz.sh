#!/bin/bash
# Runs one libFuzzer target for a bounded time from its seed corpus:
#   run-fuzz.sh TARGET FOUND_DIR SEED_DIR SECONDS
# New inputs are written to FOUND_DIR; a crash or a failed property stops
# the run, prints the input and fails. The last line reports executions.
set -eu
target=$1 found=$2 seeds=$3 seconds=$4
mkdir -p "$found"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"$target" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$found/" \
  "$found" "$seeds" >"$log" 2>&1 || status=$?
grep -E "stat::number_of_executed_units|stat::new_units_added|Done [0-9]+ runs" "$log" || true
if [ "$status" -ne 0 ]; then
  tail -60 "$log"
  echo "FAIL: $(basename "$target") stopped with status $status (input saved in $found)"
  exit 1
fi
echo "PASS: $(basename "$target") ran ${seconds}s without a crash or failed property"
