#!/bin/bash
# Runs a command whose two ranks are two "hosts": two network namespaces
# joined by a veth pair (10.232.<n>.1 and .2). The command itself stays in
# this namespace; the conformance harness moves rank 0 into the first and
# rank 1 into the second (WEFT_TEST_RANK_NETNS). WEFT_SOCKET_IFNAME names the
# veth pair, which exists only inside the namespaces, so a rank left outside
# fails to connect instead of passing unnoticed. Everything made here is
# removed on exit, failure included.
#   in-netns.sh <command> [args...]
# Exit: the command's, or 77 (skipped) where namespaces cannot be made.
set -u
[ $# -ge 1 ] || { echo "usage: in-netns.sh <command> [args...]" >&2; exit 2; }
SKIP=77
TAG=$$
NS_A=weft-ra-$TAG
NS_B=weft-rb-$TAG
IF_A=wra$TAG  # interface names: at most 15 characters
IF_B=wrb$TAG
SUBNET=10.232.$((TAG % 250)).

source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/netns.sh"
trap 'weft_netns_down "$NS_A" "$NS_B" "$IF_A"' EXIT
trap 'exit 1' INT TERM

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: network namespaces need root (running as uid $(id -u))"; exit $SKIP
fi
if ! command -v ip >/dev/null; then
  echo "SKIP: iproute2 (ip) is not installed"; exit $SKIP
fi
if ! err=$(ip netns add "$NS_A" 2>&1); then
  echo "SKIP: cannot create a network namespace: $err"; exit $SKIP
fi
weft_netns_up "$NS_A" "$NS_B" "$IF_A" "$IF_B" "${SUBNET}1" "${SUBNET}2" ||
  { echo "FAIL: veth setup failed"; exit 1; }
echo "rank 0 in $NS_A ($IF_A ${SUBNET}1), rank 1 in $NS_B ($IF_B ${SUBNET}2)"
WEFT_TEST_RANK_NETNS="$NS_A,$NS_B" WEFT_SOCKET_IFNAME=wr "$@"
