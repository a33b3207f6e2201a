#!/bin/bash
# scripts/plot-perf.py turns the checked-in weft-perf results (fixtures/)
# into PNGs, alone and several files together, with the same bytes on a
# rerun; a malformed file exits 1 naming the file, a bad option exits 2.
#   plot_perf_test.sh <plot-perf.py> <fixtures dir>
# Fails (does not skip) without python3-matplotlib: CI must install it.
set -u
SCRIPT=${1:?usage: plot_perf_test.sh <plot-perf.py> <fixtures dir>}
FIXTURES=${2:?usage: plot_perf_test.sh <plot-perf.py> <fixtures dir>}
MIN_PNG_BYTES=10240

if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "FAIL: python3-matplotlib is not installed for /usr/bin/python3"
  echo "      apt-get install python3-matplotlib (scripts/lib/install-deps.sh lists it)"
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
fail() { echo "FAIL: $*"; rc=1; }

# Runs the script; stdout+stderr land in $tmp/out, the exit status in $status.
plot() {
  "$SCRIPT" "$@" >"$tmp/out" 2>&1
  status=$?
}

# A PNG: magic bytes, a sane IHDR width and height, and more than a blank canvas.
check_png() {
  local png=$1 magic width height bytes
  [ -f "$png" ] || { fail "$png was not written"; return; }
  magic=$(od -An -tx1 -N8 "$png" | tr -d ' \n')
  [ "$magic" = 89504e470d0a1a0a ] || fail "$png: not a PNG (starts with $magic)"
  width=$(od -An -tu1 -j16 -N4 "$png" | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
  height=$(od -An -tu1 -j20 -N4 "$png" | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
  { [ "$width" -ge 400 ] && [ "$width" -le 4000 ] && [ "$height" -ge 300 ] && [ "$height" -le 3000 ]; } ||
    fail "$png: size ${width}x${height} is not a sane figure"
  bytes=$(stat -c %s "$png")
  [ "$bytes" -gt "$MIN_PNG_BYTES" ] || fail "$png: only $bytes bytes"
  echo "ok: $png ${width}x${height}, $bytes bytes"
}

# Writes OUT: exit 0 and the path on stdout.
expect_written() {
  local out=$1
  shift
  plot "$@" -o "$out"
  if [ "$status" -ne 0 ]; then
    fail "plot-perf.py $* exited $status"
    cat "$tmp/out"
    return
  fi
  grep -qxF "$out" "$tmp/out" || fail "plot-perf.py $* did not print $out"
  check_png "$out"
}

# Exits with STATUS and says WORD (a file name) on stderr, writing nothing.
expect_error() {
  local want=$1 word=$2
  shift 2
  rm -f "$tmp/err.png"
  plot "$@" -o "$tmp/err.png"
  [ "$status" -eq "$want" ] || fail "plot-perf.py $* exited $status, expected $want"
  grep -qF -e "$word" "$tmp/out" || fail "plot-perf.py $*: message does not name $word"
  grep -q 'Traceback' "$tmp/out" && fail "plot-perf.py $*: Python traceback"
  [ -e "$tmp/err.png" ] && fail "plot-perf.py $*: wrote a PNG anyway"
  echo "ok: exit $status: $(grep -m1 error "$tmp/out")"
}

# One JSON file with a weft and a raw-ofi run; each CSV file alone.
expect_written "$tmp/json.png" "$FIXTURES/perf-weft-raw.json"
expect_written "$tmp/weft-csv.png" "$FIXTURES/perf-weft.csv"
# No latency rows: the latency panel is dropped, or drawn empty when asked for.
expect_written "$tmp/raw-csv.png" --tests bw,rate --bw-scale log "$FIXTURES/perf-raw.csv"
expect_written "$tmp/raw-both.png" --panels both "$FIXTURES/perf-raw.csv"

# Several files, the same label in two of them, every bandwidth test.
expect_written "$tmp/all.png" --tests bw,bibw,rate,grouped --title "weft vs raw-ofi" \
  --label perf-raw.csv="raw (csv)" \
  "$FIXTURES/perf-weft-raw.json" "$FIXTURES/perf-weft.csv" "$FIXTURES/perf-raw.csv"

# Same input, same bytes.
expect_written "$tmp/json-again.png" "$FIXTURES/perf-weft-raw.json"
cmp -s "$tmp/json.png" "$tmp/json-again.png" || fail "two runs on the same input differ"

# Malformed input: exit 1 naming the file (and the line for JSON and CSV).
head -c 400 "$FIXTURES/perf-weft-raw.json" >"$tmp/truncated.json"
expect_error 1 "truncated.json:" "$tmp/truncated.json"
sed '4s/^\([^,]*,[^,]*\),[0-9]*,/\1,sixteen,/' "$FIXTURES/perf-raw.csv" >"$tmp/bad-size.csv"
expect_error 1 "bad-size.csv:4" "$FIXTURES/perf-weft.csv" "$tmp/bad-size.csv"
printf 'a,b\n1,2\n' >"$tmp/not-perf.csv"
expect_error 1 "not-perf.csv" "$tmp/not-perf.csv"
expect_error 1 "missing.json" "$tmp/missing.json"

# Bad usage: exit 2.
expect_error 2 "--bogus" --bogus "$FIXTURES/perf-weft.csv"
expect_error 2 "--tests" --tests bw,nonsense "$FIXTURES/perf-weft.csv"
plot "$FIXTURES/perf-weft.csv"
[ "$status" -eq 2 ] || fail "no -o: exited $status, expected 2"

[ $rc -eq 0 ] && echo "PASSED: plot-perf.py"
exit $rc
