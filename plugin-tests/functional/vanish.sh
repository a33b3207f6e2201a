#!/bin/bash
# A peer host that vanishes: two network namespaces joined by a veth pair,
# one rank in each (weft over libfabric tcp, WEFT_OFI_PROTOCOL as set by the
# caller). After one message each way is checked, every packet between the
# namespaces is dropped (iptables DROP: no FIN, no RST, as when a host
# loses power or a switch port dies). Both ranks' next requests must fail
# with ncclRemoteError, through the liveness link's keepalive
# (WEFT_PEER_TIMEOUT_MS, 3 s here), within the rank's 60 s bound.
#   vanish.sh <path to weft-netns-rank>
# Exit 0 passed, 1 failed, 77 skipped (no namespaces or iptables here).
set -u
RANK=${1:?usage: vanish.sh <weft-netns-rank>}
TAG=$$
NS_A=weft-va-$TAG
NS_B=weft-vb-$TAG
IF_A=wva$TAG
IF_B=wvb$TAG
ADDR_A=10.232.0.1
ADDR_B=10.232.0.2
PORT=18516
DIR=$(mktemp -d)
pids=()

source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/netns.sh"
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  weft_netns_down "$NS_A" "$NS_B" "$IF_A"
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

weft_netns_first "$NS_A" iptables
weft_netns_up "$NS_A" "$NS_B" "$IF_A" "$IF_B" "$ADDR_A" "$ADDR_B" || { echo "FAIL: veth setup failed"; exit 1; }
echo "namespaces $NS_A ($IF_A $ADDR_A) <-> $NS_B ($IF_B $ADDR_B), protocol ${WEFT_OFI_PROTOCOL:-auto}"

common=(env WEFT_OFI_PROVIDER=tcp WEFT_PEER_TIMEOUT_MS=3000 WEFT_CLOSE_TIMEOUT_MS=500)
ip netns exec "$NS_A" "${common[@]}" WEFT_OFI_DOMAIN="$IF_A" WEFT_SOCKET_IFNAME="=$IF_A" \
  "$RANK" --server "$ADDR_A" $PORT --vanish "$DIR" &
pids+=($!)
ip netns exec "$NS_B" "${common[@]}" WEFT_OFI_DOMAIN="$IF_B" WEFT_SOCKET_IFNAME="=$IF_B" \
  "$RANK" --client "$ADDR_A" $PORT --vanish "$DIR" &
pids+=($!)
for _ in $(seq 600); do
  [ -e "$DIR/ready-server" ] && [ -e "$DIR/ready-client" ] && break
  kill -0 "${pids[0]}" 2>/dev/null && kill -0 "${pids[1]}" 2>/dev/null || break
  sleep 0.1
done
if [ -e "$DIR/ready-server" ] && [ -e "$DIR/ready-client" ]; then
  ip netns exec "$NS_A" iptables -A INPUT -i "$IF_A" -j DROP &&
    ip netns exec "$NS_A" iptables -A OUTPUT -o "$IF_A" -j DROP ||
    { echo "FAIL: iptables rules"; exit 1; }
  echo "every packet between the namespaces is dropped from now on"
  touch "$DIR/cut"
fi
wait "${pids[0]}"; rc_a=$?
wait "${pids[1]}"; rc_b=$?
pids=()
echo "server exit $rc_a, client exit $rc_b"
if [ $rc_a -eq 0 ] && [ $rc_b -eq 0 ]; then echo PASSED; exit 0; fi
echo FAILED; exit 1
