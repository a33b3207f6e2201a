#!/bin/bash
# Auto mode: with WEFT_OFI_PROVIDER and WEFT_TRANSPORT unset, weft must
# choose its native verbs transport where an RDMA port exists and no EFA
# device does, and libfabric's efa provider where an EFA device is (found
# by its kernel driver), showing NCCL each EFA NIC once although libfabric
# offers it as two fabrics (README, "How weft picks a transport"). Runs the
# conformance properties check (both ranks call init and list devices) with
# weft's log at INFO, and checks it ran and what weft reported.
#   auto-provider-test.sh path/to/weft-conformance [verbs|efa]
set -uo pipefail
conformance=$1
expect=${2:-verbs}
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
if [[ $expect == efa ]]; then
  # "candidate transport verbs [rdma-core]: not used: 1 EFA device(s), which
  # libfabric drives", then "NIC 0: softefa0-rdm
  # (provider efa, fabric efa-direct, rdma protocol, ...)".
  if ! grep -qE 'candidate transport verbs \[rdma-core\]: not used: [0-9]+ EFA device\(s\), which libfabric drives' "$log"; then
    echo "FAIL: auto mode did not recognise the EFA device and choose libfabric"
    exit 1
  fi
  nics=$(grep -oE 'NET/weft NIC [0-9]+: [^ ]+ \(provider [^,]+, fabric [^,]+' "$log" | sort -u)
  echo "NICs weft chose in auto mode:"
  echo "$nics"
  if [[ -z $nics ]] || grep -qvE '\(provider efa, ' <<<"$nics"; then
    echo "FAIL: auto mode did not choose the efa provider"
    exit 1
  fi
  if [[ $(grep -c . <<<"$nics") -ne 1 ]]; then
    echo "FAIL: one EFA NIC should appear once (efa and efa-direct are two fabrics of it)"
    exit 1
  fi
  echo "PASS: auto mode chose libfabric's efa provider, one NIC"
  exit 0
fi
# weft names its choice, then one line per port: "NIC 0: rxe0 port 1, RoCE, ...".
if ! grep -qE 'candidate transport verbs \[rdma-core\]: used: auto: [0-9]+ InfiniBand/RoCE port' "$log"; then
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
