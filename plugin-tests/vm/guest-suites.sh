#!/bin/bash
# Runs inside the Soft-RoCE VM (scripts/vm-test.sh starts it through
# run-in-vm.sh): shows the RDMA device and what libfabric's verbs provider
# makes of it, then runs the verbs flavours of weft's suites (ctest label
# vm, CMakeLists.txt here) from a build folder.
#   guest-suites.sh BUILD_DIR RESULTS_DIR [ctest args...]
# RESULTS_DIR must be writable and outlive the VM (run-in-vm.sh --share):
# ctest's log and JUnit file go there.
set -uo pipefail
{  # read whole before running: safe to edit while it runs
build=$1
results=$2
shift 2

echo "==> RDMA devices"
ibv_devices 2>&1 || true

# The libfabric this build uses: Debian's, or the one in
# WEFT_LIBFABRIC_PREFIX (the fabric26 preset).
prefix=$(sed -n 's/^WEFT_LIBFABRIC_PREFIX:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
fi_info=fi_info
if [[ -n $prefix ]]; then
  [[ $prefix == /* ]] || prefix=$(cd "$build" && cd "$prefix" && pwd)
  fi_info=$prefix/bin/fi_info
  export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
echo "==> $fi_info --version"
"$fi_info" --version 2>&1 | head -n 3
echo "==> $fi_info -p verbs -t FI_EP_RDM (what WEFT_OFI_PROVIDER=verbs finds)"
if ! "$fi_info" -p verbs -t FI_EP_RDM 2>&1; then
  echo "error: libfabric's verbs provider sees no RDM endpoint on rxe0" >&2
  exit 1
fi

# libfabric's verbs provider reads all of /proc/kallsyms in every process
# that calls fi_getinfo, for two symbols that decide FI_HMEM peer memory
# and dma-buf support (scripts/lib/without-kallsyms.sh): 60 ms of kernel
# time a process on the host, more under TCG. No suite here registers
# device memory; the guest is thrown away after the run.
if mount --bind /dev/null /proc/kallsyms 2>/dev/null; then
  echo "==> /proc/kallsyms reads empty for the suites"
fi

echo "==> ctest -L vm in $build"
cd "$build" || exit 1
start=$(date +%s)
# Through a pipe: on the serial console ctest would colour its output.
ctest -L vm -LE "vm-boot|known-issue" --output-on-failure --timeout 1800 \
  -O "$results/ctest.log" --output-junit "$results/junit.xml" "$@" 2>&1 | cat
rc=${PIPESTATUS[0]}
echo "==> ctest exit status $rc, $(($(date +%s) - start))s"
exit "$rc"
}
