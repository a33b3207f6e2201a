#!/bin/bash
# Auto mode: with WEFT_OFI_PROVIDER and WEFT_TRANSPORT unset, weft must
# choose its native verbs transport where an RDMA port exists and no EFA
# device does (README, "How weft picks a transport"). Runs the conformance properties check (both ranks call init
# and list devices) with weft's log at INFO, and checks it ran and that
# weft reported its verbs ports.
#   auto-provider-test.sh path/to/weft-conformance
set -uo pipefail
conformance=$1
unset WEFT_OFI_PROVIDER WEFT_OFI_DOMAIN WEFT_TRANSPORT
# weft-conformance's logger prints INFO at NCCL_DEBUG=INFO, as NCCL does.
export WEFT_DEBUG=INFO NCCL_DEBUG=INFO

log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$conformance" "[props]" >"$log" 2>&1
rc=$?
cat "$log"
echo "----"
if [[ $rc -ne 0 ]]; then
  echo "FAIL: weft-conformance [props] in auto mode exited with $rc"
  exit 1
fi
# weft names its choice, then one line per port: "NIC 0: rxe0 port 1, RoCE, ...".
if ! grep -q 'using the native verbs transport' "$log"; then
  echo "FAIL: auto mode did not choose the native verbs transport (no EFA here, an RDMA port is)"
  exit 1
fi
devices=$(grep -E 'NET/weft NIC [0-9]+: .* port [0-9]+, (RoCE|InfiniBand)' "$log" | sed 's/.*NET\/weft //' | sort -u)
if [[ -z $devices ]]; then
  echo "FAIL: weft's INFO log names no verbs port (expected 'NIC 0: ... port 1, RoCE, ...')"
  exit 1
fi
echo "ports weft chose in auto mode:"
echo "$devices"
echo "PASS: auto mode chose the native verbs transport"
