#!/usr/bin/env bash
# Runs weft's suites over a real RDMA provider: libfabric's verbs;ofi_rxm
# on the kernel's Soft-RoCE (rdma_rxe), in a QEMU VM booted with Debian's
# kernel on this machine's root (plugin-tests/vm/README.md). Installs what
# is missing (apt-get), builds weft if needed, boots the VM, runs the tests
# labelled verbs (conformance.verbs.*, functional.verbs.*) there and prints
# a summary. Needs no stdin; takes minutes (the VM's CPUs are emulated).
#
#   scripts/vm-test.sh [options] [-- extra ctest args, e.g. -R xfer]
#
# Options:
#   --preset NAME     build folder of a CMake preset: default (build/) or
#                     fabric26 (build-fabric26/, libfabric 2.6; run
#                     scripts/build-libfabric26.sh first)
#   --build-dir DIR   another build folder (configured with Ninja if empty)
#   --no-install      do not run apt-get
#   --no-build        use the build folder as it is
#   --if-enabled      exit 77 (skipped) unless WEFT_VM_TESTS=1 (ctest's vm.suites)
# The VM's settings come from WEFT_VM_* (run-in-vm.sh --help); the whole
# run is stopped after WEFT_VM_TIMEOUT seconds (default 6600).
set -euo pipefail
{  # read whole before running: safe to edit while it runs

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD

preset=default
build_dir=""
install=1
build=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --preset) preset=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --no-install) install=0; shift ;;
    --no-build) build=0; shift ;;
    --if-enabled)
      if [[ ${WEFT_VM_TESTS:-0} != 1 ]]; then
        echo "skipped: boots a Soft-RoCE VM for many minutes; set WEFT_VM_TESTS=1 to run it"
        exit 77
      fi
      shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

use_preset=0
if [[ -z $build_dir ]]; then
  use_preset=1
  case $preset in
    default) build_dir=build ;;
    fabric26) build_dir="build-fabric26" ;;
    *) echo "error: --preset: default or fabric26, not '$preset'" >&2; exit 2 ;;
  esac
fi

t0=$(date +%s)
if [[ $install -eq 1 ]]; then
  # shellcheck source=scripts/lib/install-deps.sh
  source scripts/lib/install-deps.sh
  # The test packages include the VM's (QEMU, busybox, rdma-core's user
  # space for the guest, which runs this machine's root).
  weft_install_deps test
fi

if [[ $build -eq 1 ]]; then
  if [[ $use_preset -eq 1 ]]; then
    echo "==> configuring and building (cmake --preset $preset)"
    [[ -f $build_dir/build.ninja ]] || cmake --preset "$preset" </dev/null
    cmake --build --preset "$preset" -j "${WEFT_JOBS:-$(nproc)}" </dev/null
  else
    echo "==> configuring and building in $build_dir"
    [[ -f $build_dir/build.ninja ]] || cmake -S . -B "$build_dir" -G Ninja </dev/null
    cmake --build "$build_dir" -j "${WEFT_JOBS:-$(nproc)}" </dev/null
  fi
fi
build_dir=$(cd "$build_dir" && pwd) || { echo "error: no build folder $build_dir" >&2; exit 1; }
registered=$(ctest --test-dir "$build_dir" -N -L verbs 2>/dev/null | grep -c 'Test *#' || true)
if [[ $registered -eq 0 ]]; then
  echo "error: $build_dir registers no verbs tests (plugin-tests/vm); reconfigure it" >&2
  exit 1
fi
t_build=$(date +%s)

echo "==> preparing the VM (kernel, initramfs; cached)"
plugin-tests/vm/run-in-vm.sh --prepare
t_prep=$(date +%s)

# ctest's log and JUnit file land here, outside the VM's RAM overlay.
results=$build_dir/vm-results
rm -rf "$results"
mkdir -p "$results"
echo "==> running the verbs suites in the VM (log: $results/vm.log)"
set +e
WEFT_VM_TIMEOUT=${WEFT_VM_TIMEOUT:-6600} \
  plugin-tests/vm/run-in-vm.sh --share "$results" -- \
  "$repo/plugin-tests/vm/guest-suites.sh" "$build_dir" "$results" "$@" 2>&1 | tee "$results/vm.log"
status=${PIPESTATUS[0]}
set -e
t_run=$(date +%s)

echo
echo "==> summary (Soft-RoCE VM, verbs;ofi_rxm, $build_dir)"
if [[ -f $results/ctest.log ]]; then
  # "  3/18 Test #166: conformance.verbs.cycles ....   Passed   42.1 sec"
  sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) [ .*]*\([A-Za-z].*\)$/\1 \2/p' "$results/ctest.log" |
    awk '{ name = $1; $1 = ""; sub(/^ /, ""); printf "    %-40s %s\n", name, $0 }'
  grep -E '^[0-9]+% tests passed' "$results/ctest.log" | sed 's/^/    /' || true
else
  echo "    no ctest log: the VM did not get to the tests (see $results/vm.log)"
fi
vm_times=$(sed -n 's/.*\[vm\] exit status [0-9]* (\(.*\))$/\1/p' "$results/vm.log" | tail -n1)
echo "    wall time: install+build $((t_build - t0))s, VM prepare $((t_prep - t_build))s," \
  "VM $((t_run - t_prep))s${vm_times:+ ($vm_times)}"
if [[ $status -eq 0 ]]; then
  echo "==> all verbs tests passed"
else
  echo "==> verbs tests FAILED (exit status $status); logs in $results" >&2
fi
exit "$status"
}
