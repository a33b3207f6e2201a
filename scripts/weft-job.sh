#!/bin/bash
# A job of N ranks on M "hosts" of this machine: M network namespaces, each
# with one interface named wjob0 (10.235.<t>.<h+1>/24) on a bridge in a
# namespace of its own, nothing else reachable. Rank r runs in host
# r * M / N (consecutive ranks share a host, as a launcher's block
# distribution places them), started as
#   ip netns exec <host> env WEFT_JOB_RANK=r WEFT_JOB_SIZE=N
#     WEFT_PERF_SERVER=<host 0's address> WEFT_SOCKET_IFNAME=wjob0 COMMAND...
# which weft-perf --job reads as its launcher (as it reads mpirun's or
# srun's variables on real hosts). Over libfabric's tcp give the plugin the
# interface too: WEFT_OFI_DOMAIN=wjob0.
#
#   weft-job.sh --ranks N --hosts M [--timeout S] [--logs DIR] -- COMMAND [ARGS...]
#
# Prints rank 0's output, then, for every rank that failed, its status and
# the end of its output. Exit: 0 when every rank exited 0, 1 otherwise, 2
# on bad usage, 77 (skipped) where namespaces cannot be made. Everything
# made is removed on exit, failure included.
set -u
usage() {
  echo "usage: weft-job.sh --ranks N --hosts M [--timeout S] [--logs DIR] -- COMMAND [ARGS...]" >&2
  exit 2
}
RANKS=0 HOSTS=0 TIMEOUT=600 LOGS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) RANKS=${2:-}; shift 2 ;;
    --hosts) HOSTS=${2:-}; shift 2 ;;
    --timeout) TIMEOUT=${2:-}; shift 2 ;;
    --logs) LOGS=${2:-}; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ $# -ge 1 ] || usage
case "$RANKS$HOSTS$TIMEOUT" in *[!0-9]*) usage ;; esac
[ "$RANKS" -ge 2 ] && [ "$HOSTS" -ge 1 ] && [ "$HOSTS" -le "$RANKS" ] && [ "$HOSTS" -le 200 ] ||
  { echo "weft-job.sh: need 2 <= ranks and 1 <= hosts <= min(ranks, 200)" >&2; exit 2; }

TAG=$(( $$ % 100000 ))
SUBNET=10.235.$(( $$ % 250 )).
SWITCH=weft-js-$TAG
host_ns() { echo "weft-jh-$TAG-$1"; }
KEEP_LOGS=1
if [ -z "$LOGS" ]; then
  LOGS=$(mktemp -d /tmp/weft-job.XXXXXX)
  KEEP_LOGS=0
fi
mkdir -p "$LOGS"
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  # Deleting a namespace deletes its end of each veth, and so the pair.
  for ((h = 0; h < HOSTS; h++)); do ip netns del "$(host_ns $h)" 2>/dev/null; done
  ip netns del "$SWITCH" 2>/dev/null
  [ "$KEEP_LOGS" = 1 ] || rm -rf "$LOGS"
  true
}

source "$(dirname "${BASH_SOURCE[0]}")/lib/netns.sh"
weft_netns_first "$SWITCH"
trap cleanup EXIT
trap 'exit 1' INT TERM

ip -n "$SWITCH" link add wjbr type bridge &&
  ip -n "$SWITCH" link set wjbr up &&
  ip -n "$SWITCH" link set lo up || { echo "FAIL: bridge setup failed"; exit 1; }
for ((h = 0; h < HOSTS; h++)); do
  ns=$(host_ns $h)
  outer=wj${TAG}s$h inner=wj${TAG}h$h
  ip netns add "$ns" &&
    ip link add "$inner" type veth peer name "$outer" &&
    ip link set "$outer" netns "$SWITCH" &&
    ip link set "$inner" netns "$ns" &&
    ip -n "$ns" link set "$inner" name wjob0 &&
    ip -n "$ns" addr add "$SUBNET$((h + 1))/24" dev wjob0 &&
    ip -n "$ns" link set lo up &&
    ip -n "$ns" link set wjob0 up &&
    ip -n "$SWITCH" link set "$outer" master wjbr &&
    ip -n "$SWITCH" link set "$outer" up || { echo "FAIL: host $h setup failed"; exit 1; }
done
echo "# weft-job: $RANKS ranks on $HOSTS hosts (namespaces $(host_ns 0).., ${SUBNET}1..$HOSTS on wjob0)"

for ((r = 0; r < RANKS; r++)); do
  h=$(( r * HOSTS / RANKS ))
  ip netns exec "$(host_ns $h)" env WEFT_JOB_RANK=$r WEFT_JOB_SIZE=$RANKS \
    WEFT_PERF_SERVER=${SUBNET}1 WEFT_SOCKET_IFNAME=wjob0 WEFT_JOB_HOST=$h "$@" \
    > "$LOGS/rank-$r.log" 2>&1 &
  PIDS+=($!)
done

# Every rank ends, or the job's time runs out and what is left is killed.
deadline=$(( SECONDS + TIMEOUT ))
status=()
for ((r = 0; r < RANKS; r++)); do status[r]=""; done
left=$RANKS
while [ "$left" -gt 0 ]; do
  for ((r = 0; r < RANKS; r++)); do
    [ -z "${status[r]}" ] || continue
    if ! kill -0 "${PIDS[r]}" 2>/dev/null; then
      wait "${PIDS[r]}"
      status[r]=$?
      left=$(( left - 1 ))
    fi
  done
  [ "$left" -gt 0 ] || break
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "weft-job: $left ranks still running after $TIMEOUT s: killed"
    for ((r = 0; r < RANKS; r++)); do
      [ -z "${status[r]}" ] || continue
      kill -KILL "${PIDS[r]}" 2>/dev/null
      wait "${PIDS[r]}" 2>/dev/null
      status[r]=timeout
    done
    break
  fi
  sleep 0.1
done

cat "$LOGS/rank-0.log"
rc=0
for ((r = 0; r < RANKS; r++)); do
  [ "${status[r]}" = 0 ] && continue
  rc=1
  echo "--- rank $r (host $(( r * HOSTS / RANKS ))): exit ${status[r]}; its last lines:"
  tail -n 5 "$LOGS/rank-$r.log"
done
exit $rc
