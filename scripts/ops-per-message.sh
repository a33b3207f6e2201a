#!/bin/bash
# Device operations per message, as a software device counts them
# (softverbs' NIC model under softverbs or softefa: SOFTVERBS_COUNTERS_FILE).
# Runs weft-perf's bw test at one message size twice, with N and 2N
# iterations, and divides the difference of each counter by the N extra
# messages: connection setup, warm-up and teardown cancel out. Both ranks'
# counters are summed (the sender's writes and the receiver's
# clear-to-sends alike).
#   scripts/ops-per-message.sh SIZE [weft-perf options...]
#   e.g. (weft on softefa, as conformance.efa-auto runs it)
#     LD_LIBRARY_PATH=$SOFTEFA:$LIBFABRIC/lib FI_EFA_ENABLE_SHM_TRANSFER=0 \
#       WEFT_OFI_PROVIDER=efa scripts/ops-per-message.sh 65536
#   and the raw provider beside it:
#     ... scripts/ops-per-message.sh 65536 --raw-ofi efa --fabric efa-direct --raw-op write
# Environment: WEFT_PERF (default build/src/tools/perf/weft-perf),
# OPS_ITERS (N, default 2000), SOFTVERBS_DIR (default: a fresh folder).
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -ge 1 ] || { echo "usage: ops-per-message.sh SIZE [weft-perf options...]" >&2; exit 2; }
size=$1
shift
PERF=${WEFT_PERF:-build/src/tools/perf/weft-perf}
[ -x "$PERF" ] || { echo "error: $PERF not built (set WEFT_PERF)" >&2; exit 1; }
iters=${OPS_ITERS:-2000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SOFTVERBS_DIR=${SOFTVERBS_DIR:-$work/registry}

# Two processes (--server, --client), not --local: a forked rank ends with
# _exit and would skip the device's exit hook that writes its counters.
source "$(dirname "${BASH_SOURCE[0]}")/lib/quiet-port.sh"
port=$(weft_quiet_port $$)
run_with() {
  local n=$1 out=$2
  shift 2
  local common=(--test bw --min-bytes "$size" --max-bytes "$size" --iters "$n" --warmup 10
    --port "$port" "$@")
  SOFTVERBS_COUNTERS_FILE=$out "$PERF" --server "${common[@]}" >"$out.server.log" 2>&1 &
  local server=$!
  SOFTVERBS_COUNTERS_FILE=$out "$PERF" --client 127.0.0.1 "${common[@]}" >"$out.log" 2>&1 ||
    { echo "error: weft-perf failed:" >&2; cat "$out.log" "$out.server.log" >&2; exit 1; }
  wait "$server" || { echo "error: weft-perf server failed:" >&2; cat "$out.server.log" >&2; exit 1; }
  [ "$(grep -c . "$out" 2>/dev/null)" = 2 ] ||
    { echo "error: expected counters of two processes in $out: is a software device loaded?" >&2; exit 1; }
}
run_with "$iters" "$work/short" "$@"
run_with $((2 * iters)) "$work/long" "$@"
/usr/bin/python3 - "$work/short" "$work/long" "$iters" "$size" "weft-perf $*" <<'EOF'
import json, sys
short, long_, n, size, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def total(path):
    sums = {}
    for line in open(path):
        for k, v in json.loads(line).items():
            if k != "pid":
                sums[k] = sums.get(k, 0) + v
    return sums
a, b = total(short), total(long_)
per = {k: (b[k] - a.get(k, 0)) / n for k in b}
shown = ["send_wrs", "send_wrs_send", "send_wrs_send_imm", "send_wrs_write", "send_wrs_write_imm",
         "send_wrs_read", "inline_wrs", "recv_wrs", "doorbells", "completions", "packets_sent",
         "rnr_naks_sent"]
print(f"# {label}: {size}-byte messages, per message over {n} extra ones, both ranks")
for k in shown:
    print(f"{k:20s} {per.get(k, 0):8.3f}")
EOF
