#!/bin/bash
# Auto mode: with WEFT_OFI_PROVIDER unset, weft must choose the verbs
# provider where an RDMA device exists (README, "How weft picks a
# provider"). Runs the conformance properties check (both ranks call init
# and list devices) with weft's log at INFO, and checks it ran and that
# every device weft reported is on verbs.
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
# One line per NIC (rail): "NIC 0: rxe0 (provider verbs;ofi_rxm, ...)".
devices=$(grep -E 'NET/weft NIC [0-9]+: .*\(provider ' "$log" | sed 's/.*NET\/weft //' | sort -u)
if [[ -z $devices ]]; then
  echo "FAIL: weft's INFO log names no NIC (expected 'NIC 0: ... (provider verbs...')"
  exit 1
fi
echo "NICs weft chose in auto mode:"
echo "$devices"
if grep -vq '(provider verbs' <<<"$devices"; then
  echo "FAIL: auto mode chose a provider other than verbs"
  exit 1
fi
echo "protocol weft chose:"
grep -E 'NET/weft [^ ]+: [a-z]+ protocol \(' "$log" | sed 's/.*NET\/weft //' | sort -u
echo "PASS: auto mode chose verbs"
