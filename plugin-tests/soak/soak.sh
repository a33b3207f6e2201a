#!/bin/bash
# The lossy soak: two network namespaces joined by a veth pair, one rank of
# weft-soak-rank in each (weft over libfabric tcp, WEFT_OFI_PROTOCOL as set
# by the caller), with LOSS percent of the packets dropped in each
# direction (iptables' statistic match: netem is not in this kernel).
#   soak.sh <weft-soak-rank> [LOSS_PERCENT] [soak-rank options...]
# e.g. soak.sh build/plugin-tests/soak/weft-soak-rank 1.5 --messages 1000000
# Exit 0 passed, 1 failed, 77 skipped (no namespaces or iptables here).
set -u
RANK=${1:?usage: soak.sh <weft-soak-rank> [LOSS_PERCENT] [options...]}
LOSS=${2:-1}
shift 2 2>/dev/null || shift $#
TAG=$$
NS_A=weft-sa-$TAG
NS_B=weft-sb-$TAG
IF_A=wsa$TAG
IF_B=wsb$TAG
ADDR_A=10.233.0.1
ADDR_B=10.233.0.2
PORT=18517
pids=()

source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/netns.sh"
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  weft_netns_down "$NS_A" "$NS_B" "$IF_A"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

weft_netns_first "$NS_A" iptables
weft_netns_up "$NS_A" "$NS_B" "$IF_A" "$IF_B" "$ADDR_A" "$ADDR_B" || { echo "FAIL: veth setup failed"; exit 1; }
probability=$(awk -v p="$LOSS" 'BEGIN { printf "%.6f", p / 100 }')
if [ "$probability" != "0.000000" ]; then
  ip netns exec "$NS_A" iptables -A INPUT -i "$IF_A" -m statistic --mode random \
    --probability "$probability" -j DROP &&
    ip netns exec "$NS_A" iptables -A OUTPUT -o "$IF_A" -m statistic --mode random \
      --probability "$probability" -j DROP ||
    { echo "FAIL: iptables rules"; exit 1; }
fi
echo "soak: $NS_A ($ADDR_A) <-> $NS_B ($ADDR_B), ${LOSS}% of packets dropped each way," \
  "protocol ${WEFT_OFI_PROTOCOL:-auto}, options: $*"

common=(env WEFT_OFI_PROVIDER=tcp "WEFT_TEST_TIMEOUT=${WEFT_TEST_TIMEOUT:-3600}")
start=$(date +%s)
ip netns exec "$NS_A" "${common[@]}" WEFT_OFI_DOMAIN="$IF_A" WEFT_SOCKET_IFNAME="=$IF_A" \
  "$RANK" --server "$ADDR_A" $PORT "$@" &
pids+=($!)
ip netns exec "$NS_B" "${common[@]}" WEFT_OFI_DOMAIN="$IF_B" WEFT_SOCKET_IFNAME="=$IF_B" \
  "$RANK" --client "$ADDR_A" $PORT "$@" &
pids+=($!)
wait "${pids[0]}"; rc_a=$?
wait "${pids[1]}"; rc_b=$?
pids=()
dropped=$(ip netns exec "$NS_A" iptables -L -v -x -n 2>/dev/null | awk '/statistic/ { n += $1 } END { print n + 0 }')
echo "soak: server exit $rc_a, client exit $rc_b, $(( $(date +%s) - start )) s, $dropped packets dropped"
if [ $rc_a -eq 0 ] && [ $rc_b -eq 0 ]; then echo PASSED; exit 0; fi
echo FAILED
exit 1
