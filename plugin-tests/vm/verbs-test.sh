#!/bin/bash
# Runs a test of the verbs flavour (CMakeLists.txt here) only where an RDMA
# device exists: inside the Soft-RoCE VM (run-in-vm.sh) or on a host with an
# RDMA NIC. Elsewhere it exits 77, which ctest reports as skipped.
#   verbs-test.sh program [args...]
shopt -s nullglob
devices=(/sys/class/infiniband/*)
if [[ ${#devices[@]} -eq 0 ]]; then
  echo "skipped: no RDMA device here (/sys/class/infiniband is empty);" \
    "scripts/vm-test.sh runs this test in a Soft-RoCE VM"
  exit 77
fi
exec "$@"
