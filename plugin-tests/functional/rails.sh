#!/bin/bash
# Multi-rail over software rails: two network namespaces joined by two veth
# pairs (one rail each), one rank in each, weft over libfabric tcp on both
# veths with the rdma protocol. Runs (rails_rank.cpp):
#   grouped  WEFT_RAIL_GROUPING=all: device 0 spans both rails; afterwards
#            the second pair's counters must show it carried about half;
#            again with the tagged protocol, which must use one pair only
#   vdevice  WEFT_RAIL_GROUPING=off: the ranks merge the two with makeVDevice
#            (completions shuffled too: WEFT_OFI_TEST_REORDER=16)
#   fail     one veth pair is cut mid-run (iptables answers its TCP with
#            resets): the sender's striped message must fail, nothing may
#            hang. Run twice, cutting each pair (the ranks' own bootstrap
#            connection then runs over the other): one carries weft's rail 0
#            (control and eager messages too), the other only data writes.
#            A cut rail 0 may lose the receiver's clear-to-send with its
#            connection: the sender's probe of rail 0 then fails the send
#            (within WEFT_PEER_TIMEOUT_MS, 3 s here).
# Everything this script creates is removed on exit, failure included.
#   rails.sh <path to weft-rails-rank>
# Exit 0 passed, 1 failed, 77 skipped (namespaces cannot be created here).
set -u
RANK=${1:?usage: rails.sh <weft-rails-rank>}
TAG=$$
NS_A=weft-ra-$TAG
NS_B=weft-rb-$TAG
A0=wra0$TAG B0=wrb0$TAG A1=wra1$TAG B1=wrb1$TAG  # at most 15 characters
ADDR_A0=10.232.1.1 ADDR_B0=10.232.1.2 ADDR_A1=10.232.2.1 ADDR_B1=10.232.2.2
PORT=18517
FLAGS=$(mktemp -d /tmp/weft-rails.XXXXXX)
pids=()

source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/netns.sh"
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  weft_netns_down "$NS_A" "$NS_B" "$A0"
  ip link del "$A1" 2>/dev/null
  rm -rf "$FLAGS"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

weft_netns_first "$NS_A" iptables
weft_netns_up "$NS_A" "$NS_B" "$A0" "$B0" "$ADDR_A0" "$ADDR_B0" &&
  ip link add "$A1" type veth peer name "$B1" &&
  ip link set "$A1" netns "$NS_A" && ip link set "$B1" netns "$NS_B" &&
  ip -n "$NS_A" addr add "$ADDR_A1/24" dev "$A1" && ip -n "$NS_B" addr add "$ADDR_B1/24" dev "$B1" &&
  ip -n "$NS_A" link set "$A1" up && ip -n "$NS_B" link set "$B1" up ||
  { echo "FAIL: veth setup failed"; exit 1; }
echo "namespaces $NS_A ($A0 $ADDR_A0, $A1 $ADDR_A1) <-> $NS_B ($B0 $ADDR_B0, $B1 $ADDR_B1)"

rx_bytes() { ip netns exec "$NS_B" cat "/sys/class/net/$1/statistics/tx_bytes"; }

# run MODE GROUPING [IF_TO_CUT BOOTSTRAP_ADDR]: one server and one client;
# returns non-zero on failure.
run() {
  local mode=$1 grouping=$2 cut=${3:-} bootstrap=${4:-$ADDR_A0}
  rm -f "$FLAGS/break" "$FLAGS/broken" "$FLAGS/cut"
  local common=(WEFT_OFI_PROVIDER=tcp WEFT_OFI_PROTOCOL=${protocol:-rdma} WEFT_RAIL_GROUPING=$grouping
                WEFT_OFI_TEST_REORDER=${reorder:-0}
                WEFT_MIN_STRIPE_SIZE=65536 WEFT_CLOSE_TIMEOUT_MS=2000 WEFT_PEER_TIMEOUT_MS=3000)
  ip netns exec "$NS_A" env "${common[@]}" WEFT_OFI_DOMAIN="$A0,$A1" \
    "$RANK" --server "$bootstrap" $PORT "$mode" "$FLAGS" &
  pids=($!)
  ip netns exec "$NS_B" env "${common[@]}" WEFT_OFI_DOMAIN="$B0,$B1" \
    "$RANK" --client "$bootstrap" $PORT "$mode" "$FLAGS" &
  pids+=($!)
  if [ "$mode" = fail ]; then
    for _ in $(seq 600); do [ -e "$FLAGS/break" ] && break; sleep 0.1; done
    # Resets for every TCP segment arriving on the pair: its connection dies
    # at once instead of retrying for minutes.
    ip netns exec "$NS_A" iptables -A INPUT -i "$cut" -p tcp \
      -j REJECT --reject-with tcp-reset || { echo "FAIL: iptables rule"; return 1; }
    echo "veth $cut cut"
    echo "$cut" >"$FLAGS/cut"
    touch "$FLAGS/broken"
  fi
  wait "${pids[0]}"; local rc_a=$?
  wait "${pids[1]}"; local rc_b=$?
  pids=()
  [ -n "$cut" ] && ip netns exec "$NS_A" iptables -F INPUT
  echo "$mode: server exit $rc_a, client exit $rc_b"
  [ $rc_a -eq 0 ] && [ $rc_b -eq 0 ]
}

failed=0
before=$(rx_bytes "$B1")
run grouped all || failed=1
carried=$(( $(rx_bytes "$B1") - before ))
echo "grouped: $B1 sent $carried bytes"
# 64 MiB + 16 MiB + 32 x 1 MiB went out; striping puts about half on each pair.
if [ $failed -eq 0 ] && { [ "$carried" -lt $((40 << 20)) ] || [ "$carried" -gt $((80 << 20)) ]; }; then
  echo "FAIL: $B1 carried $carried bytes of ~112 MiB: messages were not striped"; failed=1
fi
# The tagged protocol carries data on the first rail only: one pair must
# carry (nearly) nothing, and every byte still arrives.
before0=$(rx_bytes "$B0") before1=$(rx_bytes "$B1")
protocol=tagged run grouped all || failed=1
carried0=$(( $(rx_bytes "$B0") - before0 )) carried1=$(( $(rx_bytes "$B1") - before1 ))
echo "grouped, tagged: $B0 sent $carried0 bytes, $B1 $carried1"
least=$(( carried0 < carried1 ? carried0 : carried1 ))
if [ $failed -eq 0 ] && [ "$least" -gt $((1 << 20)) ]; then
  echo "FAIL: the tagged protocol spread data over both pairs"; failed=1
fi
reorder=16 run vdevice off || failed=1  # completions shuffled too
run fail all "$A0" "$ADDR_A1" || failed=1
run fail all "$A1" "$ADDR_A0" || failed=1
if [ $failed -eq 0 ]; then echo PASSED; exit 0; fi
echo FAILED; exit 1
