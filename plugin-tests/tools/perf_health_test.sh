#!/usr/bin/env bash
# weft-perf --health over tcp on loopback: the verdict on stderr and in the
# exit status for each threshold, stdout still one JSON document with
# --json, and the threshold options refused without --health.
# usage: perf_health_test.sh WEFT_PERF PLUGIN
set -uo pipefail
perf=$1
plugin=$2
export WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo
failures=0
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# expect NAME STATUS STDERR-PATTERN ARGS...
expect() {
  local name=$1 want=$2 pattern=$3
  shift 3
  "$perf" --local --plugin "$plugin" --quiet "$@" >"$out" 2>"$err"
  local got=$?
  if [[ $got -ne $want ]] || ! grep -qE "$pattern" "$err"; then
    echo "FAIL $name: exit $got (want $want), stderr should match '$pattern':"
    cat "$err"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

quick=(--max-bytes 64K --iters 50 --warmup 2)
expect "pass" 0 '^health: PASS 0:lo$' --health --health-min-gbps 0.0001 "${quick[@]}"
# lo reports 100000 Mb/s: ten times that is out of reach.
expect "bandwidth below the device's speed" 3 \
  '^health: bandwidth .* < 125\.00 GB/s \(1000% of the device.s 12\.50 GB/s \(100000 Mb/s\)\)$' \
  --health --health-min-fraction 10 "${quick[@]}"
expect "bandwidth verdict" 3 '^health: FAIL \(bandwidth\) 0:lo$' --health --health-min-fraction 10 \
  "${quick[@]}"
expect "latency above the limit" 3 '^health: FAIL \(latency\) 0:lo$' --health \
  --health-min-gbps 0.0001 --health-max-latency-us 0.001 "${quick[@]}"
expect "threshold without --health" 2 'apply to --health' --health-min-gbps 1
expect "no judged test" 2 'judges the latency and bw tests' --health --test bibw

# --json: stdout stays one JSON document; the verdict goes to stderr.
expect "json" 0 '^health: PASS' --health --health-min-gbps 0.0001 --json "${quick[@]}"
if ! /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out"; then
  echo "FAIL json: stdout is not one JSON document"
  failures=$((failures + 1))
fi

[[ $failures -eq 0 ]] && echo "perf health: all cases passed"
exit $((failures > 0))
