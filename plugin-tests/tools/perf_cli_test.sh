#!/bin/bash
# weft-perf end to end, short: every test through the plugin and through
# the raw provider in one run (--vs-raw), several comms and threads, raw RMA
# writes, each output format, and the clean errors (unloadable library,
# missing symbols, a peer that never connects, a peer that dies).
#   perf_cli_test.sh <weft-perf> <plugin .so> <provider> [domain]
# The plugin is selected with WEFT_OFI_PROVIDER/WEFT_OFI_DOMAIN from the
# same provider and domain.
set -u
PERF=${1:?usage: perf_cli_test.sh <weft-perf> <plugin> <provider> [domain]}
PLUGIN=${2:?plugin}
PROV=${3:?provider}
DOMAIN=${4:-}
export WEFT_OFI_PROVIDER=$PROV
raw_domain=()
if [ -n "$DOMAIN" ]; then
  export WEFT_OFI_DOMAIN=$DOMAIN
  raw_domain=(--domain "$DOMAIN")
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; jobs -p | xargs -r kill -9 2>/dev/null' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
short=(--min-bytes 0 --max-bytes 256K --step-factor 64 --iters 40 --warmup 2 --timeout 60 --quiet)

echo "== latency with 64 idle comm pairs open beside the one in use"
if "$PERF" --plugin "$PLUGIN" --test latency --idle-comms 64 "${short[@]}" \
    >"$tmp/idle.txt" 2>"$tmp/err.txt"; then
  grep -q "idle_comms: 64" "$tmp/idle.txt" || fail "the run does not say it had 64 idle comms"
  grep -q "received bytes verified: all" "$tmp/idle.txt" || fail "bytes not verified (idle comms)"
else
  cat "$tmp/err.txt"; fail "run with idle comms failed"
fi

echo "== every test, plugin vs raw, 2 comms on 2 threads"
if "$PERF" --plugin "$PLUGIN" --test all --comms 2 --threads 2 --vs-raw "$PROV" "${raw_domain[@]}" \
    "${short[@]}" >"$tmp/table.txt" 2>"$tmp/err.txt"; then
  cat "$tmp/table.txt"
  for t in latency bw bibw rate grouped; do
    grep -qE "^  $t +[0-9]+ " "$tmp/table.txt" || fail "no $t line in the comparison"
  done
  grep -q "^# weft-perf run 2: raw-ofi" "$tmp/table.txt" || fail "no raw run"
  grep -q "received bytes verified: all" "$tmp/table.txt" || fail "bytes not verified"
  # 0 B .. 256 KiB by 64: 0, 1, 64, 4096, 256K -> 5 latency rows per run
  n=$(grep -cE "^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$tmp/table.txt")
  [ "$n" -eq 10 ] || fail "expected 10 latency rows (5 sizes x 2 runs), got $n"
else
  cat "$tmp/err.txt"; fail "plugin vs raw run failed"
fi

echo "== one-sided: put, get, signal through ncclRmaPlugin_v14, plugin vs raw"
if "$PERF" --plugin "$PLUGIN" --test one-sided --vs-raw "$PROV" "${raw_domain[@]}" \
    "${short[@]}" >"$tmp/rma.txt" 2>"$tmp/err.txt"; then
  cat "$tmp/rma.txt"
  grep -q "one_sided: ncclRmaPlugin_v14" "$tmp/rma.txt" || fail "the run does not name the RMA table"
  grep -q "operation: fi_write/fi_read/fi_writedata" "$tmp/rma.txt" || fail "no raw RMA run"
  for t in put put-lat get get-lat signal; do
    n=$(grep -cE "^  $t +[0-9]+ " "$tmp/rma.txt")
    [ "$n" -eq 5 ] || fail "expected 5 $t lines in the comparison (0 B .. 256 KiB), got $n"
  done
  grep -q "received bytes verified: all" "$tmp/rma.txt" || fail "one-sided bytes not verified"
else
  cat "$tmp/err.txt"; fail "one-sided plugin vs raw run failed"
fi
# GIN v11 (NCCL 2.28/2.29's table: no contexts, no get), CSV.
if "$PERF" --plugin "$PLUGIN" --rma-table gin11 --test put,signal --csv "${short[@]}" \
    >"$tmp/gin.csv" 2>"$tmp/err.txt"; then
  grep -q "one_sided=ncclGinPlugin_v11" "$tmp/gin.csv" || fail "the CSV does not name the GIN table"
  n=$(grep -cE "^libnccl-net-weft[^,]*,(put|signal),[0-9]+," "$tmp/gin.csv")
  [ "$n" -eq 10 ] || fail "expected 10 put/signal CSV rows over gin11, got $n"
else
  cat "$tmp/err.txt"; fail "one-sided run over gin11 failed"
fi

echo "== --samples: every timed iteration, in order, for both runs"
if "$PERF" --plugin "$PLUGIN" --test latency --vs-raw "$PROV" "${raw_domain[@]}" --min-bytes 8 \
    --max-bytes 64 --step-factor 8 --iters 37 --warmup 2 --timeout 60 --quiet --csv \
    --samples "$tmp/samples.csv" >"$tmp/samples-run.csv" 2>"$tmp/err.txt"; then
  /usr/bin/python3 - "$tmp/samples.csv" "$tmp/samples-run.csv" <<'PY' || fail "--samples file wrong"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert set(rows[0]) == {"run", "size", "iteration", "half_rtt_us"}, rows[0].keys()
for run in ("plugin", "raw"):
    for size in ("8", "64"):
        mine = [r for r in rows if r["run"] == run and r["size"] == size]
        assert [int(r["iteration"]) for r in mine] == list(range(37)), (run, size)
assert len(rows) == 4 * 37, len(rows)
# The report's median and p99 are these samples' (weft-perf's rounding).
report = [l.split(",") for l in open(sys.argv[2]) if l.startswith(("weft", "raw-ofi"))]
for line in report:
    run = "plugin" if line[0].startswith("weft") else "raw"
    v = sorted(float(r["half_rtt_us"]) for r in rows if r["run"] == run and r["size"] == line[2])
    at = lambda q: v[min(int(q * (len(v) - 1) + 0.5), len(v) - 1)]
    assert abs(at(0.5) - float(line[9])) < 0.0015, (line, at(0.5))
    assert abs(at(0.99) - float(line[11])) < 0.0015, (line, at(0.99))
assert len(report) == 4, report
PY
else
  cat "$tmp/err.txt"; fail "run with --samples failed"
fi
if "$PERF" --plugin "$PLUGIN" --test latency --max-bytes 8 --iters 5 --timeout 60 --quiet \
    --samples "$tmp/no/such/dir/s.csv" >"$tmp/out.txt" 2>"$tmp/err.txt"; then
  fail "--samples into a missing directory succeeded"
else
  grep -q -- "--samples $tmp/no/such/dir/s.csv: No such file or directory" "$tmp/err.txt" ||
    { cat "$tmp/err.txt"; fail "--samples error does not name the file and the reason"; }
  # Refused before anything is measured or reported.
  if grep -q "latency" "$tmp/out.txt"; then fail "--samples error came after a measurement"; fi
fi

echo "== JSON and CSV"
if "$PERF" --plugin "$PLUGIN" --test latency,bw --vs-raw "$PROV" "${raw_domain[@]}" "${short[@]}" \
    --json >"$tmp/out.json" 2>"$tmp/err.txt"; then
  /usr/bin/python3 - "$tmp/out.json" <<'PY' || fail "JSON output invalid"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "weft-perf" and d["format"] == 2, d.keys()
assert len(d["runs"]) == 2, len(d["runs"])
assert d["runs"][0]["transport"] == "plugin" and d["runs"][1]["transport"] == "raw-ofi"
for run in d["runs"]:
    tests = {r["test"] for r in run["results"]}
    assert tests == {"latency", "bw"}, tests
    for r in run["results"]:
        assert r["count"] > 0
        if r["test"] == "latency": assert r["median_us"] > 0
        else: assert r["mmsgs"] > 0 and r["bw_gbps"] >= 0
assert {c["test"] for c in d["comparison"]} == {"latency", "bw"}
assert all(c["ratio"] > 0 for c in d["comparison"] if c["size"] > 0)
print("JSON ok:", len(d["comparison"]), "comparisons")
PY
else
  cat "$tmp/err.txt"; fail "--json run failed"
fi
if "$PERF" --plugin "$PLUGIN" --test rate,grouped --group 2 "${short[@]}" --csv >"$tmp/out.csv" \
    2>"$tmp/err.txt"; then
  head -n 2 "$tmp/out.csv" | grep -qx \
    "label,test,size,group,count,time_us,bw_gbps,mmsgs,min_us,median_us,avg_us,p99_us,pattern,regs_per_s" ||
    fail "CSV header missing"
  grep -qE "^[^#].*,grouped,[0-9]+,2," "$tmp/out.csv" || fail "no grouped n=2 CSV row"
  grep -qE "^[^#].*,rate,[0-9]+,," "$tmp/out.csv" || fail "no rate CSV row"
else
  cat "$tmp/err.txt"; fail "--csv run failed"
fi

echo "== raw RMA writes (fi_writedata)"
if ! "$PERF" --raw-ofi "$PROV" "${raw_domain[@]}" --raw-op write --test latency,bw,bibw \
    "${short[@]}" >"$tmp/write.txt" 2>&1; then
  cat "$tmp/write.txt"; fail "raw write run failed"
fi

echo "== errors"
expect_error() {  # expect_error <what> <regex> <command...>
  local what=$1 regex=$2; shift 2
  "$@" >"$tmp/e.out" 2>&1
  local rc=$?
  if [ $rc -ne 1 ]; then fail "$what: exit status $rc, expected 1"; cat "$tmp/e.out"; return; fi
  grep -qE "$regex" "$tmp/e.out" || { fail "$what: no '$regex' in:"; cat "$tmp/e.out"; return; }
  echo "ok: $what: $(grep -E "$regex" "$tmp/e.out" | head -n 1)"
}
expect_error "unloadable library" "cannot load /nonexistent/libnccl-net-x.so" \
  "$PERF" --plugin /nonexistent/libnccl-net-x.so --max-bytes 8 --quiet
not_a_plugin=$(ldd "$PERF" | awk '/libc.so/ {print $3}')
expect_error "missing symbols" "exports none of ncclNetPlugin_v12 .. _v6" \
  "$PERF" --plugin "$not_a_plugin" --max-bytes 8 --quiet
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/quiet-port.sh"
port=$(weft_quiet_port "$RANDOM")
expect_error "peer never connects" "could not connect to 127.0.0.1 \(127.0.0.1:$port\) within 2 s" \
  "$PERF" --client 127.0.0.1 --port "$port" --timeout 2
expect_error "server waits in vain" "no peer connected to .*:$port within 2 s" \
  "$PERF" --server --port "$port" --timeout 2

# A peer that dies mid-run: the survivor stops with an error, no hang.
# Not on shm: libfabric 1.17's shm keeps a spin lock inside the shared
# region, and a peer killed while holding it leaves the survivor spinning in
# fi_tsenddata forever (docs/known-issues.md).
if [ "$PROV" = shm ]; then
  echo "skip: peer dies (shm: a killed peer can leave its region lock held; known issue)"
else
  port=$((port + 1))
  "$PERF" --plugin "$PLUGIN" --server --port "$port" --test bw --min-bytes 64K --max-bytes 64K \
    --iters 100000000 --iter-bytes 0 --timeout 20 >"$tmp/srv.out" 2>&1 &
  srv=$!
  sleep 0.5
  "$PERF" --plugin "$PLUGIN" --client 127.0.0.1 --port "$port" --timeout 20 >/dev/null 2>&1 &
  cli=$!
  for _ in $(seq 50); do grep -q "bw: unidirectional" "$tmp/srv.out" && break; sleep 0.2; done
  sleep 1
  kill -9 $cli
  for _ in $(seq 120); do kill -0 $srv 2>/dev/null || break; sleep 0.5; done
  if kill -0 $srv 2>/dev/null; then
    fail "peer dies: the server still runs 60 s after its peer was killed; its stacks:"
    gdb -p $srv -batch -ex "thread apply all bt 20" 2>&1 | grep -E "^#|^Thread"
    kill -9 $srv
    cat "$tmp/srv.out"
  else
    wait $srv
    rc=$?
    if [ $rc -eq 1 ] && grep -qE "peer .* closed the bootstrap connection|peer may have died|no progress" "$tmp/srv.out"; then
      echo "ok: peer dies: $(grep -E 'peer|progress' "$tmp/srv.out" | tail -n 1)"
    else
      fail "peer dies: server exit $rc"; cat "$tmp/srv.out"
    fi
  fi
fi

if [ $fails -ne 0 ]; then echo "FAILED: $fails check(s)"; exit 1; fi
echo "PASSED"
