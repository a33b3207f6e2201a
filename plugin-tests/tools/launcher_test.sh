#!/usr/bin/env bash
# scripts/weft-nccl-tests: the mpirun and srun lines it writes (--dry-run),
# a real health check under Open MPI's mpirun with weft-perf over tcp (this
# machine standing in for both nodes), a slow pair named, and bad usage.
# usage: launcher_test.sh LAUNCHER WEFT_PERF_DIR
set -uo pipefail
launcher=$1
export PATH=$2:$PATH
failures=0
root_flag=$([[ $(id -u) -eq 0 ]] && echo " --allow-run-as-root")

check() {  # NAME WANT GOT
  if [[ $2 == "$3" ]]; then
    echo "ok   $1"
  else
    printf 'FAIL %s:\n  want: %s\n  got:  %s\n' "$1" "$2" "$3"
    failures=$((failures + 1))
  fi
}

# Nothing of the caller's environment in the lines below.
clean=(env -i PATH="$PATH" HOME="${HOME:-/root}")

got=$("${clean[@]}" "$launcher" --hosts n1,n2 --gpus-per-node 8 --provider efa --dry-run -- -b 1M -e 1G)
check "mpirun line" "env NCCL_NET_PLUGIN=weft NCCL_NET=weft WEFT_OFI_PROVIDER=efa FI_EFA_USE_DEVICE_RDMA=1 FI_EFA_FORK_SAFE=1 mpirun -np 16 -H n1:8,n2:8 --map-by ppr:8:node --bind-to none --mca pml ob1 --mca btl tcp,self$root_flag -x NCCL_NET_PLUGIN -x NCCL_NET -x WEFT_OFI_PROVIDER -x FI_EFA_USE_DEVICE_RDMA -x FI_EFA_FORK_SAFE all_reduce_perf -b 1M -e 1G" "$got"

got=$("${clean[@]}" SLURM_JOB_ID=7 WEFT_IB_QPS_PER_CONNECTION=4 "$launcher" --hosts n1,n2 --gpus-per-node 4 --transport verbs --debug --test all_gather_perf --tests-dir /opt/nccl-tests --dry-run)
check "srun line" "env NCCL_NET_PLUGIN=weft NCCL_NET=weft WEFT_TRANSPORT=verbs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET WEFT_IB_QPS_PER_CONNECTION=4 srun --nodes=2 --ntasks-per-node=4 --export=ALL --gpus-per-node=4 -w n1,n2 /opt/nccl-tests/all_gather_perf -b 8 -e 8G -f 2 -g 1" "$got"

got=$("${clean[@]}" "$launcher" --hosts a,b,c --health ring --bench weft-perf --expect-gbps 10 --dry-run 2>/dev/null | sed 's/.* mpirun -np 2 -H \([^ ]*\) .* weft-perf \(.*\)/\1 \2/' | paste -sd';')
check "ring pairs" "a:1,b:1 --health --health-min-gbps 10;b:1,c:1 --health --health-min-gbps 10;c:1,a:1 --health --health-min-gbps 10" "$got"

got=$("${clean[@]}" "$launcher" --hosts a,b,c --health pairs --bench weft-perf --dry-run 2>/dev/null | sed 's/.* -H \([^ ]*\) .*/\1/' | paste -sd';')
check "all pairs" "a:1,b:1;a:1,c:1;b:1,c:1" "$got"

for bad in "--launcher pbs" "--health star --hosts a,b" "--bench iperf" "--expect-busbw fast" "--bogus"; do
  # shellcheck disable=SC2086
  "${clean[@]}" "$launcher" $bad --dry-run >/dev/null 2>&1
  check "usage: $bad" 2 "$?"
done
"${clean[@]}" "$launcher" --dry-run >/dev/null 2>&1
check "mpirun without --hosts" 2 "$?"

# A real run: mpirun starts weft-perf on "two nodes" (this machine twice),
# weft over tcp on loopback.
if ! command -v mpirun >/dev/null; then
  echo "FAIL mpirun not found (openmpi-bin: scripts/lib/install-deps.sh installs it)"
  exit 1
fi
export WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo
quick=(-- --max-bytes 64K --iters 50 --warmup 2 --quiet)
out=$("$launcher" --hosts localhost,localhost --bench weft-perf --health pairs --expect-gbps 0.0001 "${quick[@]}" 2>&1)
status=$?
check "health pass: status" 0 "$status"
check "health pass: summary" "# health: every pair passed" "$(tail -1 <<<"$out")"
grep -qE '^localhost,localhost +[0-9.]+ GB/s  pass$' <<<"$out"
check "health pass: pair line" 0 "$?"

out=$("$launcher" --hosts localhost,localhost --bench weft-perf --health pairs --expect-gbps 1000 "${quick[@]}" 2>&1)
status=$?
check "slow pair: status" 1 "$status"
check "slow pair: named" "# health: slow or failed pairs; suspect node(s): localhost" "$(tail -1 <<<"$out")"

# Two nodes for real: network namespaces joined by a veth pair, mpirun in
# the first, its daemon started in the second by an rsh agent that enters
# that namespace (what ssh does on a cluster), weft over tcp on the veth.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ns_a=wl-a-$$ ns_b=wl-b-$$ if_a=wla$$ if_b=wlb$$ subnet=10.201.$(($$ % 250))
if [[ $(id -u) -ne 0 ]] || ! ip netns add "$ns_a" 2>/dev/null; then
  echo "skip two namespaces: needs root and network namespaces"
else
  # shellcheck source=scripts/lib/netns.sh
  source "$here/../../scripts/lib/netns.sh"
  trap 'weft_netns_down "$ns_a" "$ns_b" "$if_a"' EXIT
  if weft_netns_up "$ns_a" "$ns_b" "$if_a" "$if_b" "$subnet.1" "$subnet.2"; then
    rsh_log=$(mktemp)
    out=$(WEFT_NETNS_HOSTS="$subnet.1=$ns_a,$subnet.2=$ns_b" WEFT_NETNS_RSH_LOG=$rsh_log WEFT_OFI_DOMAIN=^lo \
      ip netns exec "$ns_a" "$launcher" --hosts "$subnet.1,$subnet.2" --bench weft-perf --health pairs \
      --expect-gbps 0.0001 --mpirun-args "--mca plm_rsh_agent $here/netns-rsh.sh --mca oob_tcp_if_include $subnet.0/24" \
      "${quick[@]}" 2>&1)
    status=$?
    check "two namespaces: status" 0 "$status"
    check "two namespaces: summary" "# health: every pair passed" "$(tail -1 <<<"$out")"
    grep -qE "^$subnet.1,$subnet.2 +[0-9.]+ GB/s  pass\$" <<<"$out"
    check "two namespaces: pair line" 0 "$?"
    check "two namespaces: rank 1 started in the second" "$subnet.2 $ns_b" "$(cat "$rsh_log")"
    rm -f "$rsh_log"
  else
    check "two namespaces: veth pair up" 0 1
  fi
fi

[[ $failures -eq 0 ]] && echo "launchers: all cases passed"
[[ $failures -eq 0 ]] || { echo "$out" | tail -20; exit 1; }
