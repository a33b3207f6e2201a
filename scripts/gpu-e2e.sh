#!/usr/bin/env bash
# Stock NCCL through weft on ONE GPU: two processes on CUDA device 0, each
# with its own NCCL_HOSTID, so NCCL sees two hosts and every byte crosses
# the net plugin. Runs all_reduce, all_gather, reduce_scatter, broadcast,
# alltoall and sendrecv (weft-nccl-e2e), which checks every result on the
# host; checks in NCCL's log that weft carried the traffic and whether NCCL
# used GPU Direct RDMA through it; compares busbw with NCCL's built-in Socket
# transport run the same way.
#
# usage: gpu-e2e.sh [--mode MODE] [--bundle DIR] [--logs DIR] [--max-bytes N]
#                   [--iter-bytes N] [--ops LIST] [--timeout S] [--budget S]
#   --mode     both (default: weft,Socket), all (weft,weft26-tcp,weft26-shm,Socket),
#              weft, socket, or a comma-separated list of these runs:
#                weft        weft + Debian's libfabric 1.17, tcp on loopback (lib/);
#                            no FI_HMEM there, so NCCL stages GPU data through host memory
#                weft26-tcp  weft + libfabric 2.6 with CUDA, tcp on loopback (lib26/);
#                            2.6's tcp has no FI_HMEM either: host memory again
#                weft26-shm  weft + libfabric 2.6 with CUDA, shm (lib26/): weft
#                            registers GPU memory itself (FI_HMEM_CUDA) when the probe works
#                Socket      NCCL's Socket transport on loopback, for comparison
#   --bundle   folder made by scripts/gpu-bundle.sh (default: the folder of
#              this script when it holds lib/libnccl-net-weft.so, else out/gpu-bundle)
#   --logs     where the per-rank logs, results.csv and weft-info output go
#              (default: <bundle>/logs)
#   --max-bytes, --iter-bytes, --ops: passed to weft-nccl-e2e (defaults 256M, 1G, all)
#   --timeout  seconds per run, both ranks killed after it (default 300)
#   --budget   seconds for all runs together: a run gets at most what is left,
#              and is skipped with under 30 s left (default 0: no limit)
# Exit status: 0 every run passed (GPU Direct RDMA not being used fails nothing),
# 1 a run failed or was skipped, 2 bad usage.
# NCCL and the CUDA runtime come from the machine: NCCL_LIB_DIR overrides
# the search (ldconfig, /usr/local/cuda/lib*, pip's nvidia/* packages).
# NCCL_NET_GDR_LEVEL is SYS for weft runs (weft's loopback and shm devices
# have no PCI path, and NCCL's default PXB would rule GDR out on distance
# alone); WEFT_E2E_GDR_LEVEL overrides it, empty leaves NCCL's default.
set -euo pipefail
((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501)) || { echo "gpu-e2e.sh: needs bash >= 5.1" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mode=both
bundle=""
logs=""
max_bytes=256M
iter_bytes=1G
ops=all
timeout_s=300
budget_s=0
usage() { echo "gpu-e2e.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  [[ $1 == -h || $1 == --help ]] && { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0; }
  [[ $# -ge 2 ]] || usage "$1 needs a value"
  case "$1" in
    --mode) mode=$2 ;;
    --bundle) bundle=$2 ;;
    --logs) logs=$2 ;;
    --max-bytes) max_bytes=$2 ;;
    --iter-bytes) iter_bytes=$2 ;;
    --ops) ops=$2 ;;
    --timeout) timeout_s=$2 ;;
    --budget) budget_s=$2 ;;
    *) usage "unknown argument '$1'" ;;
  esac
  shift 2
done
[[ $timeout_s =~ ^[0-9]+$ && $budget_s =~ ^[0-9]+$ ]] || usage "--timeout and --budget take seconds"
case "$mode" in
  both) runs=(weft Socket) ;;
  all) runs=(weft weft26-tcp weft26-shm Socket) ;;
  socket) runs=(Socket) ;;
  *) IFS=, read -r -a runs <<< "$mode" ;;
esac
for run in "${runs[@]}"; do
  case "$run" in weft|weft26-tcp|weft26-shm|Socket) ;; *) usage "unknown run '$run' in --mode" ;; esac
done

die() { echo "gpu-e2e.sh: $*" >&2; exit 1; }

if [[ -z $bundle ]]; then
  if [[ -f $here/lib/libnccl-net-weft.so ]]; then bundle=$here; else bundle=$here/../out/gpu-bundle; fi
fi
bundle=$(cd "$bundle" 2>/dev/null && pwd) || die "no bundle folder; make one with scripts/gpu-bundle.sh"
program=$bundle/bin/weft-nccl-e2e
[[ -x $program ]] || die "$bundle lacks bin/weft-nccl-e2e (make the bundle with scripts/gpu-bundle.sh)"
logs=${logs:-$bundle/logs}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
rm -f "$logs"/results.csv

# Where a library lives on this machine (libnccl.so.2, libcudart.so.*).
find_lib_dir() {
  local lib=$1 dir site
  for dir in ${NCCL_LIB_DIR:-} /usr/local/cuda/lib /usr/local/cuda/lib64; do
    [[ -n $dir && -e $dir/$lib ]] && { echo "$dir"; return 0; }
  done
  dir=$(ldconfig -p 2>/dev/null | awk -v lib="$lib" '$1 == lib { print $NF; exit }')
  [[ -n $dir ]] && { dirname "$dir"; return 0; }
  # pip's nvidia-* wheels: python3's own paths, then the usual places of others.
  for site in $(timeout 20 python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null) \
              /usr/local/lib/python3*/*-packages /usr/lib/python3*/*-packages \
              /opt/*/lib/python3*/site-packages /opt/*/*/lib/python3*/site-packages \
              "${HOME:-/root}"/.local/lib/python3*/site-packages; do
    [[ -d $site/nvidia ]] || continue
    dir=$(find "$site/nvidia" -name "$lib" -print -quit 2>/dev/null || true)
    [[ -n $dir ]] && { dirname "$dir"; return 0; }
  done
  return 1
}

# The machine's side first: where libnccl.so.2 and libcudart.so.<N> live.
# A machine without a CUDA runtime of the version the program was built
# with gets the one bundled for libfabric 2.6 (lib26/), through a folder of
# its own so that nothing else of lib26/ comes along.
base_path=""
for lib in $(ldd "$program" | awk '$2 == "=>" && /not found/ { print $1 }'); do
  if libdir=$(find_lib_dir "$lib"); then
    base_path+=:$libdir
  elif [[ $lib == libcudart.so.* && -e $bundle/lib26/$lib ]]; then
    mkdir -p "$logs/cudart"
    ln -sfn "$bundle/lib26/$lib" "$logs/cudart/$lib"
    base_path+=:$logs/cudart
    echo "==> $lib not found on this machine: using the bundle's (lib26/)"
  else
    die "$lib not found on this machine (set NCCL_LIB_DIR)"
  fi
done
base_path=${base_path#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
base_path=${base_path#:}  # an empty entry would mean the current directory
if missing=$(LD_LIBRARY_PATH=$base_path ldd "$program" | grep -E 'not found'); then
  echo "$missing" >&2
  die "weft-nccl-e2e cannot run here: libraries missing (see above)"
fi
echo "==> NCCL and CUDA runtime: $(LD_LIBRARY_PATH=$base_path ldd "$program" | awk '/libnccl|libcudart/ { print $3 }' | tr '\n' ' ')"

# The library path of one plugin build (lib or lib26) in lib_path[variant],
# or why it cannot work here in lib_error[variant].
declare -A lib_path lib_error
setup_variant() {
  local variant=$1 dir=$bundle/$1 path missing cudart
  if [[ ! -f $dir/libnccl-net-weft.so ]]; then
    lib_error[$variant]="the bundle has no $variant/ (gpu-bundle.sh found no build for it)"
    return 1
  fi
  path=$dir
  if [[ $variant == lib26 && ! -e $dir/libcudart.so ]]; then
    # The symlink libfabric dlopens did not survive the copy: make it here.
    cudart=$(compgen -G "$dir/libcudart.so.[0-9]*" | head -1) || true
    if [[ -n $cudart ]]; then
      mkdir -p "$logs/cudart26"
      ln -sfn "$cudart" "$logs/cudart26/libcudart.so"
      path+=:$logs/cudart26
    fi
  fi
  path+=${base_path:+:$base_path}
  missing=$(LD_LIBRARY_PATH=$path ldd "$program" "$dir/libnccl-net-weft.so" "$dir/libfabric.so.1" 2>&1 |
    grep -E 'not found|No such file' | sed 's/^\s*//' | sort -u || true)
  if [[ -n $missing ]]; then
    lib_error[$variant]="libraries missing or too old here: $(echo "$missing" | tr '\n' ';')"
    return 1
  fi
  lib_path[$variant]=$path
}
for variant in lib lib26; do
  if setup_variant "$variant"; then
    echo "==> $variant/: LD_LIBRARY_PATH=${lib_path[$variant]}"
  else
    echo "==> $variant/ cannot run here: ${lib_error[$variant]}" >&2
  fi
done

# Without a GPU, say so and stop before any NCCL run.
if command -v nvidia-smi >/dev/null; then
  timeout 30 nvidia-smi -L || echo "    (nvidia-smi -L failed)"
fi
echo "==> weft-nccl-e2e --probe"
LD_LIBRARY_PATH=$base_path timeout 60 "$program" --probe > "$logs/probe.txt" 2>&1 || true
sed 's/^/    /' "$logs/probe.txt"
grep -q '^probe: OK' "$logs/probe.txt" || die "no usable GPU here (weft-nccl-e2e --probe failed, see above): nothing run"

variant_of() {
  case "$1" in weft) echo lib ;; weft26-*) echo lib26 ;; *) echo none ;; esac
}

# The environment of one rank of one run.
run_env() {
  local run=$1 rank=$2
  echo "NCCL_HOSTID=weft-e2e-host$rank"  # two "hosts" on one machine
  echo "NCCL_DEBUG=INFO"
  echo "NCCL_DEBUG_SUBSYS=INIT,NET"
  echo "NCCL_SOCKET_IFNAME=lo"           # bootstrap (and Socket) on loopback
  echo "NCCL_P2P_DISABLE=1"
  echo "NCCL_SHM_DISABLE=1"
  case "$run" in
    Socket)
      echo "NCCL_NET_PLUGIN=none"
      echo "NCCL_NET=Socket"
      ;;
    *)
      echo "NCCL_NET_PLUGIN=$bundle/$(variant_of "$run")/libnccl-net-weft.so"
      echo "NCCL_NET=weft"
      [[ -z ${WEFT_E2E_GDR_LEVEL-SYS} ]] || echo "NCCL_NET_GDR_LEVEL=${WEFT_E2E_GDR_LEVEL-SYS}"
      echo "FI_LOG_LEVEL=warn"
      case "$run" in
        *-shm) echo "WEFT_OFI_PROVIDER=shm" ;;
        *) echo "WEFT_OFI_PROVIDER=tcp"; echo "WEFT_OFI_DOMAIN=lo" ;;
      esac
      ;;
  esac
}

# shm regions of processes that no longer exist (a rank killed on timeout).
clean_shm() {
  local f pid
  for f in /dev/shm/weft-*; do
    [[ -e $f ]] || continue
    pid=${f#/dev/shm/weft-}
    pid=${pid%%-*}
    [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null && rm -f "$f"
  done
  return 0
}

# One run: two ranks in the background, each with its own log. Sets
# run_note to what went wrong, if anything.
run_note=""
run_ranks() {
  local run=$1 limit=$2 id_file=$logs/$1.id rank pid ok status=0 env_lines
  local -A rank_of
  local pids=()
  rm -f "$id_file"
  run_note=""
  for rank in 0 1; do
    mapfile -t env_lines < <(run_env "$run" "$rank")
    printf '%s\n' "${env_lines[@]}" "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" > "$logs/$run.rank$rank.env"
    env "${env_lines[@]}" timeout -k 10 "$limit" "$program" "$rank" 2 "$id_file" \
      --max-bytes "$max_bytes" --iter-bytes "$iter_bytes" --ops "$ops" \
      > "$logs/$run.rank$rank.log" 2>&1 &
    pids+=($!)
    rank_of[$!]=$rank
  done
  # When one rank fails, stop the other instead of letting it wait for its peer.
  local running=("${pids[@]}")
  while (( ${#running[@]} > 0 )); do
    ok=0
    wait -n -p pid "${running[@]}" || ok=$?
    mapfile -t running < <(printf '%s\n' "${running[@]}" | grep -vx "$pid" || true)
    [[ ${#running[@]} -eq 1 && -z ${running[0]} ]] && running=()
    if [[ $ok -ne 0 ]]; then
      rank=${rank_of[$pid]}
      if [[ $ok -eq 124 || $ok -eq 137 ]]; then
        run_note+="rank $rank timed out after ${limit}s; "
      elif [[ $status -eq 0 ]]; then
        run_note+="rank $rank exited $ok; "
      fi
      if [[ $status -eq 0 ]]; then
        echo "    rank $rank FAILED (exit $ok); last lines of its log:" >&2
        tail -15 "$logs/$run.rank$rank.log" | sed 's/^/      /' >&2
      fi
      ((${#running[@]} == 0)) || kill "${running[@]}" 2>/dev/null || true
      status=1
    fi
  done
  rm -f "$id_file"
  [[ $run == *-shm ]] && clean_shm
  return $status
}

results() { grep -E '^(all_reduce|all_gather|reduce_scatter|broadcast|alltoall|sendrecv) ' "$logs/$1.rank0.log" 2>/dev/null || true; }

# The NCCL log must show weft loaded, chosen and carrying every channel.
check_weft_log() {
  local run=$1 log rank ok=0
  for rank in 0 1; do
    log=$logs/$run.rank$rank.log
    grep -q 'Using network weft' "$log" || { run_note+="rank $rank: 'Using network weft' not in NCCL's log; "; ok=1; }
    grep -q 'via NET/weft' "$log" || { run_note+="rank $rank: no channel 'via NET/weft'; "; ok=1; }
    if grep -qE 'via (NET/Socket|NET/IB|P2P|SHM)' "$log"; then
      run_note+="rank $rank: some channels did not go through weft; "; ok=1
    fi
  done
  return $ok
}

# Whether NCCL used GPU Direct RDMA through weft: never a failure, reported.
gdr_report() {
  local run=$1 log=$logs/$1.rank0.log channels gdr
  channels=$(grep -c 'via NET/weft/' "$log" || true)
  gdr=$(grep -c 'via NET/weft/.*GDRDMA' "$log" || true)
  # What weft found (CUDA driver, devices, GPU memory or why not) and what
  # NCCL made of it. awk, not head: a reader that stops early would fail
  # the pipeline (pipefail).
  echo "    weft and GPU memory in NCCL's log (rank 0):"
  awk '/loaded external network plugin|Using network weft|GPU Direct RDMA (Enabled|Disabled) for (HCA|GPU)/ ||
       /NET\/weft .*(CUDA driver|GPU memory|host memory only|device [0-9]+: |NIC [0-9]+: )/ {
         line = $0; sub(/^.*NCCL (INFO|WARN) /, "", line)
         if (!seen[line]++ && n++ < 12) print "      " line }' "$log" 2>/dev/null || true
  if [[ $gdr -gt 0 ]]; then
    gdr_note="GDR used ($gdr of $channels channel connections via NET/weft/<dev>/GDRDMA)"
  else
    gdr_note="GDR not used (0 of $channels channel connections GDRDMA)"
  fi
  echo "    $gdr_note"
}

# Rows of weft-nccl-e2e's table into results.csv.
to_csv() {
  results "$1" | awk -v run="$1" '{ printf "%s,%s,%s,%s,%s,%s,%s,%s\n", run, $1, $2, $3, $4, $5, $6, $7 }' >> "$logs/results.csv"
}

declare -A verdict
failed=0
skipped=0
for run in "${runs[@]}"; do
  variant=$(variant_of "$run")
  case "$run" in
    weft) what="weft over Debian's libfabric 1.17, tcp on lo" ;;
    weft26-tcp) what="weft over libfabric 2.6 (CUDA), tcp on lo" ;;
    weft26-shm) what="weft over libfabric 2.6 (CUDA), shm" ;;
    Socket) what="NCCL's Socket transport on lo" ;;
  esac
  limit=$timeout_s
  if ((budget_s > 0)); then
    left=$((budget_s - SECONDS))
    if ((left < 30)); then
      verdict[$run]="SKIP  $run: ${left}s of the ${budget_s}s budget left"
      echo "==> $run: skipped, budget spent" >&2
      skipped=1
      continue
    fi
    ((left < limit)) && limit=$left
  fi
  if [[ $variant == none ]]; then
    export LD_LIBRARY_PATH=$base_path
  elif [[ -n ${lib_path[$variant]:-} ]]; then
    export LD_LIBRARY_PATH=${lib_path[$variant]}
  else
    verdict[$run]="FAIL  $run: $variant/ cannot run here: ${lib_error[$variant]}"
    failed=1
    continue
  fi
  echo "==> $run: $what; 2 ranks on GPU 0, logs in $logs/$run.rank{0,1}.log (timeout ${limit}s)"
  start=$SECONDS
  ok=1
  run_ranks "$run" "$limit" || ok=0
  elapsed=$((SECONDS - start))
  to_csv "$run"
  rows=$(results "$run" | wc -l)
  wrong=$(results "$run" | awk '$7 != "ok"' | wc -l)
  ((wrong == 0)) || { run_note+="$wrong rows WRONG; "; ok=0; }
  ((rows > 0)) || { run_note+="no results; "; ok=0; }
  # Every row when this is the only run or it failed (up to where it
  # stopped); otherwise the table at the end and results.csv have them.
  if ((${#runs[@]} == 1 || ok == 0)); then
    results "$run" | sed 's/^/    /'
  else
    echo "    $rows result rows, in the table at the end and in $logs/results.csv"
  fi
  gdr_note=""
  if [[ $run != Socket ]]; then
    check_weft_log "$run" || ok=0
    gdr_report "$run"
    if [[ -x $bundle/bin/weft-info ]]; then
      mapfile -t env_lines < <(run_env "$run" 0)
      env "${env_lines[@]}" "$bundle/bin/weft-info" --params > "$logs/$run.weft-info.txt" 2>&1 || true
    fi
  elif ! grep -q 'via NET/Socket' "$logs/Socket.rank0.log"; then
    run_note+="Socket run did not use NET/Socket; "
    ok=0
  fi
  detail="$rows rows verified, ${elapsed}s"
  [[ $run == Socket ]] || detail+="; NCCL used weft; $gdr_note"
  if ((ok)); then
    verdict[$run]="PASS  $run ($what): $detail"
  else
    verdict[$run]="FAIL  $run ($what): ${run_note%; } ($rows rows, ${elapsed}s${gdr_note:+; $gdr_note})"
    failed=1
  fi
  echo "    ${verdict[$run]}"
done

# busbw side by side, per op and size; a trailing ! marks a WRONG row.
present=()
for run in "${runs[@]}"; do [[ -n $(results "$run") ]] && present+=("$run"); done
if ((${#present[@]} > 1)); then
  echo
  echo "==> busbw (GB/s) per op and size, same GPU, same script run$([[ " ${present[*]} " == *" Socket "* ]] && echo "; x/Socket: ratio to NCCL's Socket transport")"
  for run in "${present[@]}"; do results "$run" | awk -v run="$run" '{ print run, $1, $2, $6, $7 }'; done |
    awk -v runs="${present[*]}" '
      BEGIN {
        n = split(runs, run, " ")
        nops = split("all_reduce all_gather reduce_scatter broadcast alltoall sendrecv", opname, " ")
        for (i = 1; i <= nops; i++) oporder[opname[i]] = i
        for (i = 1; i <= n; i++) if (run[i] == "Socket") sock = i
      }
      {
        key = $2 SUBSEP $3
        bw[$1, key] = $4 ($5 == "ok" ? "" : "!")
        if (!(key in seen)) { seen[key] = 1; keys[++nkeys] = key }
      }
      END {
        printf "%-14s %12s", "op", "bytes"
        for (i = 1; i <= n; i++) printf " %11s", run[i]
        for (i = 1; i <= n; i++) if (sock && i != sock) { h = run[i]; sub(/^weft26-/, "26", h); printf " %11s", h "/Sock" }
        printf "\n"
        # order: op as in weft-nccl-e2e, then size
        for (a = 1; a <= nkeys; a++) for (b = a + 1; b <= nkeys; b++) {
          split(keys[a], ka, SUBSEP); split(keys[b], kb, SUBSEP)
          if (oporder[kb[1]] < oporder[ka[1]] || (kb[1] == ka[1] && kb[2] + 0 < ka[2] + 0)) {
            t = keys[a]; keys[a] = keys[b]; keys[b] = t
          }
        }
        for (a = 1; a <= nkeys; a++) {
          split(keys[a], k, SUBSEP)
          printf "%-14s %12s", k[1], k[2]
          for (i = 1; i <= n; i++) printf " %11s", ((run[i], keys[a]) in bw) ? bw[run[i], keys[a]] : "-"
          if (sock) for (i = 1; i <= n; i++) if (i != sock) {
            s = bw[run[sock], keys[a]] + 0; v = bw[run[i], keys[a]] + 0
            if (((run[i], keys[a]) in bw) && ((run[sock], keys[a]) in bw) && s > 0) printf " %11.2f", v / s
            else printf " %11s", "-"
          }
          printf "\n"
        }
      }'
fi

echo
echo "==> verdicts"
for run in "${runs[@]}"; do echo "    ${verdict[$run]:-SKIP  $run: not run}"; done
if [[ $failed -ne 0 ]]; then
  echo "==> FAILED (logs in $logs)" >&2
  exit 1
fi
if [[ $skipped -ne 0 ]]; then
  echo "==> INCOMPLETE: runs skipped for lack of time; the others passed (logs in $logs)" >&2
  exit 1
fi
echo "==> PASS: every run's results verified$([[ " ${runs[*]} " != " Socket " ]] && echo "; NCCL used weft in every weft run")"
