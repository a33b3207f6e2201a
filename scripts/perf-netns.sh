#!/bin/bash
# weft-perf between two network namespaces joined by a veth pair: two
# "hosts" on one machine, traffic through a real network device and the
# kernel's TCP stack rather than loopback. Rank 0 (server) runs in one
# namespace, rank 1 (client) in the other; weft and the raw provider use
# libfabric tcp on the veth (WEFT_OFI_DOMAIN / --domain = the interface).
# Everything created is removed on exit. Needs root and iproute2.
#   scripts/perf-netns.sh [weft-perf options...]
#   e.g. scripts/perf-netns.sh --vs-raw tcp --test latency,bw --max-bytes 64M
# A "--vs-raw PROV" gets "--domain <veth>" added on each side.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PERF=${WEFT_PERF:-build/src/tools/perf/weft-perf}
[ -x "$PERF" ] || { echo "error: $PERF not built (set WEFT_PERF)" >&2; exit 1; }
# Exit status 77 (a skip for ctest) where namespaces cannot be made.
[ "$(id -u)" = 0 ] || { echo "error: network namespaces need root" >&2; exit 77; }
command -v ip >/dev/null || { echo "error: iproute2 (ip) is not installed" >&2; exit 77; }
TAG=$$
NS_A=weft-pa-$TAG
NS_B=weft-pb-$TAG
IF_A=wpa$TAG
IF_B=wpb$TAG
ADDR_A=10.232.0.1
ADDR_B=10.232.0.2
PORT=18515
pids=()
source scripts/lib/netns.sh
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  weft_netns_down "$NS_A" "$NS_B" "$IF_A"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ip netns add "$NS_A" || exit 77
weft_netns_up "$NS_A" "$NS_B" "$IF_A" "$IF_B" "$ADDR_A" "$ADDR_B" || exit 1

with_domain() {  # adds --domain IF after a --vs-raw/--raw-ofi argument
  local ifname=$1; shift
  local out=() add=0
  for a in "$@"; do
    out+=("$a")
    if [ $add = 1 ]; then out+=(--domain "$ifname"); add=0; fi
    case "$a" in --vs-raw|--raw-ofi) add=1 ;; esac
  done
  printf '%s\0' "${out[@]}"
}
mapfile -d '' args_a < <(with_domain "$IF_A" "$@")
mapfile -d '' args_b < <(with_domain "$IF_B" "$@")

echo "# namespaces $NS_A ($IF_A $ADDR_A) <-> $NS_B ($IF_B $ADDR_B)" >&2
ip netns exec "$NS_A" env WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN="$IF_A" \
  "$PERF" --server --port $PORT "${args_a[@]}" &
pids+=($!)
ip netns exec "$NS_B" env WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN="$IF_B" \
  "$PERF" --client "$ADDR_A" --port $PORT "${args_b[@]}" >/dev/null &
pids+=($!)
wait "${pids[0]}"; rc_a=$?
wait "${pids[1]}"; rc_b=$?
pids=()
[ $rc_a -eq 0 ] && [ $rc_b -eq 0 ]
