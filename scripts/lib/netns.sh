# Two network namespaces joined by a veth pair: two "hosts" on one machine.
# Sourced by scripts/perf-netns.sh and the plugin-tests/functional scripts.
#   weft_netns_first NS_A [TOOL...]  creates NS_A, or says why it cannot and
#                                    exits 77 (skipped): not root, a TOOL
#                                    (besides ip) missing, no namespaces
#   weft_netns_up NS_A NS_B IF_A IF_B ADDR_A ADDR_B   (returns non-zero on failure)
#   weft_netns_down NS_A NS_B IF_A                     (never fails)

weft_netns_first() {
  local ns_a=$1 tool err
  shift
  if [ "$(id -u)" != 0 ]; then
    echo "SKIP: network namespaces need root (running as uid $(id -u))"; exit 77
  fi
  for tool in ip "$@"; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
  done
  if ! err=$(ip netns add "$ns_a" 2>&1); then
    echo "SKIP: cannot create a network namespace: $err"; exit 77
  fi
}

weft_netns_up() {
  local ns_a=$1 ns_b=$2 if_a=$3 if_b=$4 addr_a=$5 addr_b=$6
  ip netns add "$ns_b" &&
    ip link add "$if_a" type veth peer name "$if_b" &&
    ip link set "$if_a" netns "$ns_a" &&
    ip link set "$if_b" netns "$ns_b" &&
    ip -n "$ns_a" addr add "$addr_a/24" dev "$if_a" &&
    ip -n "$ns_b" addr add "$addr_b/24" dev "$if_b" &&
    ip -n "$ns_a" link set lo up &&
    ip -n "$ns_b" link set lo up &&
    ip -n "$ns_a" link set "$if_a" up &&
    ip -n "$ns_b" link set "$if_b" up
}

weft_netns_down() {
  ip netns del "$1" 2>/dev/null
  ip netns del "$2" 2>/dev/null
  ip link del "$3" 2>/dev/null  # only if it never moved into the namespace
  true
}
