#!/bin/bash
# Regenerates the README's figure: weft vs the raw libfabric provider, tcp
# (loopback) and shm, latency and bandwidth from 8 B to 64 MiB, all bytes
# checked. Results go to docs/perf/*.json, the figure to docs/perf/loopback.png.
#   scripts/perf-readme-plot.sh [extra weft-perf options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PERF=${WEFT_PERF:-build/src/tools/perf/weft-perf}
out=docs/perf
mkdir -p "$out"
common=(--test latency,bw --min-bytes 8 --max-bytes 64M --step-factor 4 --iters 1000
        --iter-bytes 2G "$@")
WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo "$PERF" --vs-raw tcp --domain lo "${common[@]}" \
  --json >"$out/loopback-tcp.json"
WEFT_OFI_PROVIDER=shm "$PERF" --vs-raw shm "${common[@]}" --json >"$out/loopback-shm.json"
scripts/plot-perf.py --title "weft vs raw libfabric on one host (tcp;ofi_rxm over lo, shm)" \
  "$out/loopback-tcp.json" "$out/loopback-shm.json" -o "$out/loopback.png"
