#!/usr/bin/env bash
# Stock NCCL through weft on ONE GPU: two processes on CUDA device 0, each
# with its own NCCL_HOSTID, so NCCL sees two hosts and every byte crosses
# the net plugin (weft over libfabric's tcp provider on loopback). Runs
# all_reduce and sendrecv (weft-nccl-e2e), checks the results, checks in
# NCCL's log that weft carried the traffic, and in "both" mode runs NCCL's
# built-in Socket transport the same way for comparison.
#
# usage: gpu-e2e.sh [--mode weft|socket|both] [--bundle DIR] [--logs DIR]
#                   [--max-bytes N] [--timeout S]
#   --bundle  folder made by scripts/gpu-bundle.sh (default: the folder of
#             this script when it holds lib/libnccl-net-weft.so, else out/gpu-bundle)
#   --logs    where the per-rank logs go (default: <bundle>/logs)
# NCCL and the CUDA runtime come from the machine: NCCL_LIB_DIR overrides
# the search (ldconfig, /usr/local/cuda/lib*, pip's nvidia/* packages).
set -euo pipefail
((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501)) || { echo "gpu-e2e.sh: needs bash >= 5.1" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mode=both
bundle=""
logs=""
max_bytes=256M
timeout_s=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mode) mode=$2; shift 2 ;;
    --bundle) bundle=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --max-bytes) max_bytes=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-e2e.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$mode" in weft|socket|both) ;; *) echo "gpu-e2e.sh: --mode weft|socket|both" >&2; exit 2 ;; esac

die() { echo "gpu-e2e.sh: $*" >&2; exit 1; }

if [[ -z $bundle ]]; then
  if [[ -f $here/lib/libnccl-net-weft.so ]]; then bundle=$here; else bundle=$here/../out/gpu-bundle; fi
fi
bundle=$(cd "$bundle" 2>/dev/null && pwd) || die "no bundle folder; make one with scripts/gpu-bundle.sh"
plugin=$bundle/lib/libnccl-net-weft.so
program=$bundle/bin/weft-nccl-e2e
[[ -f $plugin && -x $program ]] || die "$bundle lacks lib/libnccl-net-weft.so or bin/weft-nccl-e2e"
logs=${logs:-$bundle/logs}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)

# Where libnccl.so.2 and libcudart.so.* live on this machine.
find_lib_dir() {
  local lib=$1 dir
  for dir in ${NCCL_LIB_DIR:-} /usr/local/cuda/lib /usr/local/cuda/lib64; do
    [[ -n $dir && -e $dir/$lib ]] && { echo "$dir"; return 0; }
  done
  dir=$(ldconfig -p 2>/dev/null | awk -v lib="$lib" '$1 == lib { print $NF; exit }')
  [[ -n $dir ]] && { dirname "$dir"; return 0; }
  local site
  for site in $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
    dir=$(find "$site/nvidia" -name "$lib" -print -quit 2>/dev/null || true)
    [[ -n $dir ]] && { dirname "$dir"; return 0; }
  done
  return 1
}
lib_path=$bundle/lib
for lib in $(ldd "$program" | awk '/not found/ { print $1 }'); do
  dir=$(find_lib_dir "$lib") || die "$lib not found on this machine (set NCCL_LIB_DIR)"
  lib_path=$lib_path:$dir
done
export LD_LIBRARY_PATH=$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if LD_LIBRARY_PATH=$LD_LIBRARY_PATH ldd "$program" "$plugin" | grep -q 'not found'; then
  ldd "$program" "$plugin" | grep 'not found' >&2
  die "libraries missing (see above)"
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L || true
echo "==> LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# One run: two ranks in the background, each with its own log.
run_mode() {
  local net=$1 id_file=$logs/$1.id pids=() rank status=0
  rm -f "$id_file"
  echo "==> $net: 2 ranks on GPU 0, logs in $logs/$net.rank{0,1}.log"
  for rank in 0 1; do
    (
      export NCCL_HOSTID="weft-e2e-host$rank"  # two "hosts" on one machine
      export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
      export NCCL_SOCKET_IFNAME=lo              # bootstrap (and Socket) on loopback
      export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
      if [[ $net == weft ]]; then
        export NCCL_NET_PLUGIN=$plugin NCCL_NET=weft
        export WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo
      else
        export NCCL_NET_PLUGIN=none NCCL_NET=Socket
      fi
      exec timeout "$timeout_s" "$program" "$rank" 2 "$id_file" --max-bytes "$max_bytes"
    ) > "$logs/$net.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  # When one rank fails, stop the other instead of letting it wait for its peer.
  local running=("${pids[@]}") pid ok
  while (( ${#running[@]} > 0 )); do
    ok=1
    wait -n -p pid "${running[@]}" || ok=0
    running=($(printf '%s\n' "${running[@]}" | grep -vx "$pid" || true))
    if [[ $ok -eq 0 ]]; then
      rank=$([[ $pid == "${pids[0]}" ]] && echo 0 || echo 1)
      echo "    rank $rank FAILED; last lines of its log:" >&2
      tail -20 "$logs/$net.rank$rank.log" | sed 's/^/      /' >&2
      [[ ${#running[@]} -gt 0 ]] && kill "${running[@]}" 2>/dev/null || true
      status=1
    fi
  done
  return $status
}

# The NCCL log must show weft loaded, chosen and carrying the channels.
check_weft_log() {
  local log=$logs/weft.rank0.log ok=0
  echo "==> NCCL log lines showing weft (rank 0):"
  grep -E 'NET/Plugin: Loaded net plugin weft|Using network weft|NET/weft' "$log" | head -12 | sed 's/^/    /'
  grep -q 'Using network weft' "$log" || { echo "    'Using network weft' not found" >&2; ok=1; }
  grep -q 'via NET/weft' "$log" || { echo "    no channel 'via NET/weft' found" >&2; ok=1; }
  if grep -E 'via (NET/Socket|NET/IB|P2P|SHM)' "$log" | head -3 | grep -q .; then
    echo "    some channels did not go through weft:" >&2; ok=1
  fi
  return $ok
}

results() { grep -E '^(all_reduce|sendrecv) ' "$logs/$1.rank0.log" || true; }

failed=0
if [[ $mode == weft || $mode == both ]]; then
  run_mode weft || failed=1
  results weft
  check_weft_log || failed=1
fi
if [[ $mode == socket || $mode == both ]]; then
  run_mode Socket || failed=1
  results Socket
  grep -q 'via NET/Socket' "$logs/Socket.rank0.log" || { echo "    Socket run did not use NET/Socket" >&2; failed=1; }
fi
if [[ $mode == both && $failed -eq 0 ]]; then
  echo "==> busbw (GB/s), weft vs NCCL's Socket transport, same machine, same run"
  printf '%-10s %12s %10s %10s %8s\n' op bytes weft Socket ratio
  join -j1 <(results weft | awk '{print $1"/"$2, $6}' | sort) \
           <(results Socket | awk '{print $1"/"$2, $6}' | sort) |
    tr '/' ' ' | sort -k1,1 -k2,2n |
    awk '{ r = ($4 > 0) ? $3 / $4 : 0; printf "%-10s %12s %10s %10s %8.2f\n", $1, $2, $3, $4, r }'
fi
if [[ $failed -ne 0 ]]; then
  echo "==> FAILED (logs in $logs)" >&2
  exit 1
fi
echo "==> PASS: results verified$([[ $mode != socket ]] && echo "; NCCL used weft")"
