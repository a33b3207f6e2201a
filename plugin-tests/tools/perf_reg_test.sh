#!/bin/bash
# weft-perf --test reg end to end over libfabric tcp on loopback: small sizes
# and few iterations; every size has a "fresh" and a "reuse" row with
# positive rates and times in the JSON, the table and the CSV. No timing
# assertions (fresh vs reuse depends on the provider and WEFT_MR_CACHE).
#   perf_reg_test.sh <weft-perf> <plugin .so>
set -u
PERF=${1:?usage: perf_reg_test.sh <weft-perf> <plugin>}
PLUGIN=${2:?plugin}
export WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
small=(--plugin "$PLUGIN" --min-bytes 4K --max-bytes 1M --step-factor 4 --iters 20 --timeout 60 --quiet)

check_json() {  # check_json <file> <expected sizes, comma separated> [extra test]
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
path, sizes = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]
extra = sys.argv[3] if len(sys.argv) > 3 else None
d = json.load(open(path))
assert d["tool"] == "weft-perf" and d["format"] == 2, d.keys()
assert len(d["runs"]) == 1, len(d["runs"])
rows = [r for r in d["runs"][0]["results"] if r["test"] == "reg"]
got = sorted((r["size"], r["pattern"]) for r in rows)
want = sorted((s, p) for s in sizes for p in ("fresh", "reuse"))
assert got == want, (got, want)
for r in rows:
    assert 10 <= r["count"] <= 20, r
    assert r["regs_per_s"] > 0, r
    for k in ("min_us", "median_us", "avg_us", "p99_us", "time_us"):
        assert r[k] > 0, (k, r)
    assert r["min_us"] <= r["median_us"] <= r["p99_us"], r
if extra:
    assert any(r["test"] == extra for r in d["runs"][0]["results"]), extra
print("JSON ok:", len(rows), "reg rows")
PY
}

echo "== reg: 4K .. 1M by 4, JSON"
if "$PERF" --local --test reg "${small[@]}" --json >"$tmp/reg.json" 2>"$tmp/err.txt"; then
  check_json "$tmp/reg.json" 4096,16384,65536,262144,1048576 || fail "reg JSON"
else
  cat "$tmp/err.txt"; fail "--test reg --json failed"
fi

echo "== reg with a transfer test, table"
if "$PERF" --local --test latency,reg "${small[@]}" --max-bytes 64K >"$tmp/reg.txt" \
    2>"$tmp/err.txt"; then
  cat "$tmp/reg.txt"
  grep -q "^# reg: regMr+deregMr pairs on rank 0's send comm, host memory" "$tmp/reg.txt" ||
    fail "no reg section"
  for s in 4096 16384 65536; do
    for p in fresh reuse; do
      grep -qE "^ +$s $p +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$tmp/reg.txt" ||
        fail "no table row for $s $p"
    done
  done
  grep -q "received bytes verified: all" "$tmp/reg.txt" || fail "latency bytes not verified"
else
  cat "$tmp/err.txt"; fail "--test latency,reg failed"
fi

echo "== reg, CSV"
if "$PERF" --local --test reg "${small[@]}" --max-bytes 16K --csv >"$tmp/reg.csv" \
    2>"$tmp/err.txt"; then
  cat "$tmp/reg.csv"
  grep -qx "label,test,size,group,count,time_us,bw_gbps,mmsgs,min_us,median_us,avg_us,p99_us,pattern,regs_per_s" \
    "$tmp/reg.csv" || fail "CSV header"
  n=$(grep -cE "^[^#].*,reg,(4096|16384),,[0-9]+,[0-9.]+,[0-9.]+,,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,(fresh|reuse),[0-9.]+$" \
    "$tmp/reg.csv")
  [ "$n" -eq 4 ] || fail "expected 4 reg CSV rows, got $n"
else
  cat "$tmp/err.txt"; fail "--test reg --csv failed"
fi

echo "== reg without the registration cache (WEFT_MR_CACHE=0)"
if WEFT_MR_CACHE=0 "$PERF" --local --test reg "${small[@]}" --max-bytes 64K --json \
    >"$tmp/nocache.json" 2>"$tmp/err.txt"; then
  check_json "$tmp/nocache.json" 4096,16384,65536 || fail "reg JSON without the cache"
else
  cat "$tmp/err.txt"; fail "WEFT_MR_CACHE=0 --test reg failed"
fi

echo "== usage errors"
for args in "--raw-ofi tcp --test reg" "--test reg --max-bytes 0" "--dmabuf --test reg"; do
  # shellcheck disable=SC2086
  "$PERF" $args >"$tmp/e.out" 2>&1
  rc=$?
  [ $rc -eq 2 ] || { fail "'$args': exit status $rc, expected 2"; cat "$tmp/e.out"; }
done

if [ $fails -ne 0 ]; then echo "FAILED: $fails check(s)"; exit 1; fi
echo "PASSED"
