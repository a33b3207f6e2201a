#!/bin/bash
# Two "hosts": two network namespaces joined by a veth pair, one rank in each,
# weft over libfabric tcp on the veth (WEFT_OFI_DOMAIN=<veth>). Sizes up to
# 64 MiB, every byte checked, every ABI version. Everything this script
# creates is removed on exit, failure included.
#   netns.sh <path to weft-netns-rank>
# Exit 0 passed, 1 failed, 77 skipped (namespaces cannot be created here).
set -u
RANK=${1:?usage: netns.sh <weft-netns-rank>}
TAG=$$
NS_A=weft-fa-$TAG
NS_B=weft-fb-$TAG
IF_A=wfa$TAG   # interface names: at most 15 characters
IF_B=wfb$TAG
ADDR_A=10.231.0.1
ADDR_B=10.231.0.2
PORT=18515
pids=()

source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/netns.sh"
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  weft_netns_down "$NS_A" "$NS_B" "$IF_A"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

weft_netns_first "$NS_A"
weft_netns_up "$NS_A" "$NS_B" "$IF_A" "$IF_B" "$ADDR_A" "$ADDR_B" || { echo "FAIL: veth setup failed"; exit 1; }
echo "namespaces $NS_A ($IF_A $ADDR_A) <-> $NS_B ($IF_B $ADDR_B)"
if command -v ping >/dev/null; then
  ip netns exec "$NS_A" ping -c 1 -W 5 "$ADDR_B" >/dev/null || { echo "FAIL: no IP connectivity across the veth pair"; exit 1; }
fi

ip netns exec "$NS_A" env WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN="$IF_A" "$RANK" --server "$ADDR_A" $PORT &
pids+=($!)
ip netns exec "$NS_B" env WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN="$IF_B" "$RANK" --client "$ADDR_A" $PORT &
pids+=($!)
wait "${pids[0]}"; rc_a=$?
wait "${pids[1]}"; rc_b=$?
pids=()
echo "server exit $rc_a, client exit $rc_b"
if [ $rc_a -eq 0 ] && [ $rc_b -eq 0 ]; then echo PASSED; exit 0; fi
echo FAILED; exit 1
