#!/bin/bash
# Runs inside the VM, chrooted in the host's root, before the job's
# command: a veth pair and one Soft-RoCE device on it. Both ranks of a test
# use rxe0 (two rxe devices on the two ends of one veth pair do not reach
# each other). Addresses: veth0 10.89.0.1/24 (rxe0), veth1 10.89.0.2/24.
set -euo pipefail

ip link set lo up
ip link add veth0 type veth peer name veth1
ip addr add 10.89.0.1/24 dev veth0
ip addr add 10.89.0.2/24 dev veth1
ip link set veth0 up
ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0

# The device is usable once its port is ACTIVE (immediately with veth up,
# but do not race the kernel).
for _ in $(seq 50); do
  if [[ $(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null) == *ACTIVE* ]]; then
    break
  fi
  sleep 0.1
done
state=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null || echo missing)
if [[ $state != *ACTIVE* ]]; then
  echo "[vm] rxe0 port state: $state" >&2
  exit 1
fi
echo "[vm] rxe0 on veth0 (10.89.0.1): $(rdma link show rxe0/1 2>&1)"
