#!/usr/bin/env bash
# The whole GPU check in one go, for a lent GPU machine with a time limit:
# what the machine is (GPU, driver, NCCL, glibc, kernel modules), then
# gpu-e2e.sh --mode all (weft over libfabric 1.17 tcp, weft over libfabric
# 2.6 tcp and shm with GPU buffers, NCCL's Socket transport; every result
# verified; busbw compared), then weft-perf with GPU memory through the 2.6
# plugin over shm, where time is left. Writes three files into OUTDIR:
#   summary.txt   everything printed here: machine, tables, PASS/FAIL lines
#   results.csv   every result row of every run (run,op,bytes,iters,time_us,algbw,busbw,check)
#   logs.tar.gz   every log: per rank, NCCL's INIT/NET output, nvidia-smi -q, weft-info, ...
#
# usage: bash scripts/gpu-device-check.sh [BUNDLE] [OUTDIR] [--budget S] [--max-bytes N]
#   BUNDLE       folder made by scripts/gpu-bundle.sh (default: this script's
#                folder when it holds lib/, else out/gpu-bundle)
#   OUTDIR       where the three files go (default: $OUT, else ./gpu-check-out)
#   --budget     seconds for everything (default 330); the e2e runs get what is
#                left after the machine survey, less 45 s for weft-perf and packing
#   --max-bytes  largest size of the sweeps (default 128M)
# Exit status: 0 every run passed, 1 something failed (see summary.txt).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bundle=""
outdir=""
budget=330
max_bytes=128M
positional=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --budget) budget=$2; shift 2 ;;
    --max-bytes) max_bytes=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "gpu-device-check.sh: unknown option '$1'" >&2; exit 2 ;;
    *) positional+=("$1"); shift ;;
  esac
done
bundle=${positional[0]:-}
outdir=${positional[1]:-${OUT:-$PWD/gpu-check-out}}
if [[ -z $bundle ]]; then
  if [[ -f $here/lib/libnccl-net-weft.so ]]; then bundle=$here; else bundle=$here/../out/gpu-bundle; fi
fi
bundle=$(cd "$bundle" 2>/dev/null && pwd) || { echo "gpu-device-check.sh: no bundle folder '${positional[0]:-}'" >&2; exit 2; }
mkdir -p "$outdir" && outdir=$(cd "$outdir" && pwd) || exit 2
e2e=$here/gpu-e2e.sh
[[ -f $e2e ]] || e2e=$bundle/gpu-e2e.sh

work=$(mktemp -d "${TMPDIR:-/tmp}/weft-gpu-check.XXXXXX")
logs=$work/logs
mkdir -p "$logs"
summary=$outdir/summary.txt
: > "$summary"
# Everything printed from here on goes to the summary too.
exec > >(tee -a "$summary") 2>&1
tee_pid=$!

# shellcheck disable=SC2317  # reached through the EXIT trap
finish() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -f $logs/results.csv ]] && cp "$logs/results.csv" "$outdir/results.csv"
  tar -czf "$outdir/logs.tar.gz" -C "$work" logs 2>/dev/null || echo "packing the logs failed"
  echo "==> files: $(find "$outdir" -maxdepth 1 -type f -printf '%f ')($(du -sh "$outdir" | cut -f1)); ${SECONDS}s in all"
  rm -rf "$work"
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null
  exit "$rc"
}
trap finish EXIT
trap 'echo "==> interrupted after ${SECONDS}s"; exit 130' INT TERM

section() { echo; echo "==> $*"; }
# A command's output into the logs, its first lines into the summary.
survey() {
  local name=$1 lines=$2
  shift 2
  timeout 30 "$@" > "$logs/$name.txt" 2>&1
  local rc=$?
  head -n "$lines" "$logs/$name.txt" | sed 's/^/    /'
  [[ -s $logs/$name.txt ]] || echo "    (nothing)"
  (($(wc -l < "$logs/$name.txt") <= lines)) || echo "    ... ($(wc -l < "$logs/$name.txt") lines in logs/$name.txt)"
  ((rc == 0)) || echo "    ($* exited $rc)"
}

echo "weft GPU device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget}s"
echo "bundle: $bundle"
head -3 "$bundle/MANIFEST.txt" 2>/dev/null | sed 's/^# /    /'

section "machine"
echo "    host $(hostname), kernel $(uname -r), $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null)"
echo "    $(ldd --version 2>&1 | head -1), bash $BASH_VERSION, $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "    /dev/shm: $(df -h /dev/shm 2>/dev/null | awk 'NR == 2 { print $2 " size, " $4 " free" }'); locked-memory limit: $(ulimit -l)"
echo "    kernel modules: $(awk '$1 ~ /^(nvidia|nv_peer_mem|ib_core|ib_uverbs|rdma|efa|mlx5)/ { printf "%s ", $1 }' /proc/modules 2>/dev/null)"
echo "    the bundle $(sed -n 's/^# \(needs glibc.*\)/\1/p' "$bundle/MANIFEST.txt" 2>/dev/null)"
cp "$bundle/MANIFEST.txt" "$logs/" 2>/dev/null
# Execute bits may not survive every way of copying the bundle over.
chmod u+x "$bundle"/bin/* "$bundle"/bin26/* 2>/dev/null

section "GPU"
if command -v nvidia-smi >/dev/null; then
  survey nvidia-smi 30 nvidia-smi
  timeout 30 nvidia-smi -q > "$logs/nvidia-smi-q.txt" 2>&1
  timeout 30 nvidia-smi topo -m > "$logs/nvidia-smi-topo.txt" 2>&1
else
  echo "    nvidia-smi not found"
fi

section "Python packages (NCCL, CUDA runtime, PyTorch)"
survey python-packages 30 python3 -c '
import importlib.metadata as m
for d in sorted(m.distributions(), key=lambda d: d.metadata["Name"].lower()):
    n = d.metadata["Name"]
    if n.lower().startswith("nvidia") or n.lower() in ("torch", "cupy", "nccl4py"):
        print(n, d.version)'

section "gpu-e2e.sh --mode all"
e2e_budget=$((budget - SECONDS - 45))
((e2e_budget >= 60)) || e2e_budget=60
bash "$e2e" --mode all --bundle "$bundle" --logs "$logs" --max-bytes "$max_bytes" \
  --iter-bytes 512M --timeout 90 --budget "$e2e_budget"
e2e_rc=$?

section "weft-perf --mem cuda over libfabric 2.6 shm: weft must refuse GPU memory there"
# 2.6's shm copies GPU data with cudaMemcpy (and cudaDeviceSynchronize) on
# NCCL's proxy thread, which hung NCCL on an H200: weft asks every provider
# for FI_OPT_CUDA_API_PERMITTED=false and keeps GPU memory off where it is
# refused. Expected: weft-perf's clear refusal, naming the option in the log.
perf_rc=0
perf=$bundle/bin26/weft-perf
if [[ ! -x $perf || ! -f $bundle/lib26/libnccl-net-weft.so ]]; then
  echo "    skipped: the bundle has no bin26/weft-perf or lib26/"
elif (( budget - SECONDS < 20 )); then
  echo "    skipped: $((budget - SECONDS))s of the budget left"
else
  perf_path=$(sed -n 's/^LD_LIBRARY_PATH=//p' "$logs/weft26-shm.rank0.env" 2>/dev/null)
  perf_path=${perf_path:-$bundle/lib26}
  LD_LIBRARY_PATH=$perf_path WEFT_OFI_PROVIDER=shm NCCL_DEBUG=INFO WEFT_DEBUG=INFO \
    timeout -k 5 35 "$perf" --local --plugin "$bundle/lib26/libnccl-net-weft.so" --mem cuda \
    --test latency --max-bytes 64K --iters 20 --timeout 20 > "$logs/weft-perf-cuda-shm.txt" 2>&1
  rc=$?
  grep -E 'CUDA_API_PERMITTED|does not take GPU memory' "$logs/weft-perf-cuda-shm.txt" | head -4 |
    sed 's/^/    /'
  if ((rc == 1)) && grep -q 'does not take GPU memory' "$logs/weft-perf-cuda-shm.txt"; then
    echo "    PASS  shm refused: weft keeps GPU memory off there"
  else
    perf_rc=1
    echo "    FAIL  weft-perf --mem cuda over shm: exit $rc, expected the refusal"
  fi
fi

section "overall"
if ((e2e_rc == 0 && perf_rc == 0)); then
  echo "    PASS (gpu-e2e.sh and weft-perf)"
  exit 0
fi
echo "    FAIL: gpu-e2e.sh exit $e2e_rc, weft-perf exit $perf_rc"
exit 1
