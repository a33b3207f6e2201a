#!/usr/bin/env bash
# Installs the build and test dependencies, builds, and runs every test
# (all ctest labels, including the docs check) against Debian's libfabric
# 1.17; then runs each fuzz target for WEFT_FUZZ_SECONDS (20) from its seed
# corpus (clang, preset fuzz); then the unit, conformance and functional
# suites over tcp, shm and softverbs again under AddressSanitizer + UBSan
# (preset asan, LeakSanitizer checking each rank) and the threaded ones
# under ThreadSanitizer (preset tsan); then builds libfabric 2.6 from
# ../shared/vendor (CUDA-enabled, cached) and runs the conformance,
# functional and cuda suites against it too, where the GPU paths run on
# softcuda over softefa's FI_HMEM; then the Soft-RoCE VM's suites (real
# rdma-core and the kernel's rdma_rxe under QEMU, label vm-ci); then builds
# the .deb and .rpm, lints the .deb and installs it into a fresh Debian
# root (scripts/package-test.sh).
#
# Every stage is timed: the run ends with a table of the stages and the 25
# slowest tests (scripts/lib/stages.sh), and under CI it fails when the
# whole run took longer than WEFT_RUN_BUDGET_S (scripts/lib/stages.sh).
# Used by CI (.ci/run); needs no stdin. Extra arguments go to the 1.17 ctest
# run only (and skip every later stage), e.g. scripts/test.sh -L unit
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/install-deps.sh
source scripts/lib/libfabric26.sh
source scripts/lib/stages.sh
source scripts/lib/without-kallsyms.sh

# Per-test timeout: a hung peer must fail the test, not the CI job.
timeout_s=${WEFT_TEST_TIMEOUT:-600}
# Tests run six at a time on 2 cores: a test's ranks spend most of it
# waiting (close timeouts, peers, retries), and they wait without spinning
# (src/core/idle_backoff.h); none binds a fixed port outside its own
# network namespace, and none asserts on time. Measured on 2 cores, the
# libfabric 1.17 stage (632 tests): 1,165 s at -j2 and 923 s at -j4 while
# the waits spun; 402 s at -j4 and 337 s at -j6 since they back off and
# /proc/kallsyms reads empty (scripts/lib/without-kallsyms.sh). Tests over
# libfabric's shm run beside others since weft names each shm endpoint
# uniquely. WEFT_TEST_JOBS=1 runs them all one by one. ThreadSanitizer's
# stage runs two at a time: its slowdown is tenfold.
jobs=${WEFT_TEST_JOBS:-6}
tsan_jobs=${WEFT_TEST_JOBS:-2}
status=0
full_run=0
[[ $# -eq 0 ]] && full_run=1

stage_install() {
  weft_install_deps test
}

stage_build() {
  weft_build
}

stage_tests_117() {
  local args=("$@")
  # Tests labelled known-issue fail because of libfabric provider bugs
  # (docs/known-issues.md); run them with: ctest --preset default -L known-issue
  if [[ ${#args[@]} -eq 0 ]]; then
    args=(-LE known-issue)
    echo "==> not run (known provider issues): $(ctest --preset default -N -L known-issue | sed -n 's/.*Test *#[0-9]*: //p' | tr '\n' ' ')"
  fi
  echo "==> ctest --preset default -j $jobs, libfabric 1.17 (timeout ${timeout_s}s per test)"
  weft_without_kallsyms ctest --preset default -j "$jobs" --output-on-failure --timeout "$timeout_s" \
    --output-junit "$(weft_junit libfabric-1.17)" "${args[@]}" </dev/null
}

stage_fuzz() {
  local fuzz_seconds=${WEFT_FUZZ_SECONDS:-20}
  echo "==> fuzz targets (clang, AddressSanitizer + UBSan), ${fuzz_seconds}s each (docs/fuzzing.md)"
  if [[ ! -f build-fuzz/build.ninja ]]; then
    cmake --preset fuzz </dev/null || return
  fi
  cmake -S . -B build-fuzz -DWEFT_FUZZ_SECONDS="$fuzz_seconds" >/dev/null </dev/null || return
  cmake --build --preset fuzz -j "$(nproc)" </dev/null || return
  weft_without_kallsyms ctest --preset fuzz -j "$jobs" -L fuzz --output-junit "$(weft_junit fuzz)" </dev/null
}

stage_asan() {
  local rc=0
  echo "==> AddressSanitizer + UBSan build (preset asan): unit tests, conformance and functional over tcp, shm, softverbs (docs/sanitizers.md)"
  if [[ ! -f build-asan/build.ninja ]]; then
    cmake --preset asan </dev/null || return
  fi
  cmake --build --preset asan -j "$(nproc)" </dev/null || return
  local asan_ctest=(weft_without_kallsyms ctest --preset asan -j "$jobs" --output-on-failure --timeout "$timeout_s")
  (
    export LSAN_OPTIONS=suppressions=$PWD/plugin-tests/sanitizers/lsan.supp:print_suppressions=0
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
    "${asan_ctest[@]}" --output-junit "$(weft_junit asan-unit)" -L unit </dev/null || rc=1
    # The two-process suites at ABI version 12 here; the 1.17 run above
    # covers every version. Every version adapter also runs under ASan in
    # the unit tests (version_adapters_test.cpp), and the oldest, v6 (int
    # sizes, the oldest properties), once more below through the checks
    # that cross it with real transfers, over both protocols: the adapters
    # sit above the transport.
    export WEFT_TEST_STAGE_VERSIONS=12
    # 50 connect/transfer/close cycles, not 200: LeakSanitizer finds a
    # comm's lost memory after one, where the 1.17 run's exact heap count
    # (off under ASan) needs many. conformance.tcp.comm-cycles was the
    # slowest test of the whole run (67 s of this run's 78; 23 s now).
    export WEFT_TEST_COMM_CYCLES=50
    # conformance.shm.close: under ASan, the send after finalize and re-init
    # never completes (also with the liveness links off); without ASan it
    # passes. Not traced yet (docs/sanitizers.md).
    "${asan_ctest[@]}" --output-junit "$(weft_junit asan-ofi)" -LE 'known-issue|vm' \
      -R '^(conformance|functional)[.](tcp|tcp-rdma|shm|shm-rdma)[.]' \
      -E '^conformance[.]shm[.]close$' </dev/null || rc=1
    WEFT_TEST_STAGE_VERSIONS=6 "${asan_ctest[@]}" --output-junit "$(weft_junit asan-ofi-v6)" \
      -R '^conformance[.](tcp|tcp-rdma)[.](xfer|grouped|trunc|inflight|abi|props|handles)$' \
      </dev/null || rc=1
    # The verbs transport over softverbs: memory errors and UB, no leak
    # check yet (docs/sanitizers.md says what it reports).
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 "${asan_ctest[@]}" \
      --output-junit "$(weft_junit asan-softverbs)" -LE 'known-issue|vm' \
      -R '^(conformance|functional)[.]softverbs[.]' </dev/null || rc=1
    # One-sided comms (plugin-tests/rma): atomics and messages as signals
    # over libfabric, and the native verbs transport on softverbs.
    # No leak check: a rank's process ends with _exit.
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 "${asan_ctest[@]}" \
      --output-junit "$(weft_junit asan-rma)" -R '^rma[.](tcp|tcp-message|softverbs)[.]rma14$' </dev/null || rc=1
    exit "$rc"
  )
}

stage_tsan() {
  local rc=0
  echo "==> ThreadSanitizer build (preset tsan): unit tests and the threaded suites over tcp, shm, softverbs (docs/sanitizers.md)"
  if [[ ! -f build-tsan/build.ninja ]]; then
    cmake --preset tsan </dev/null || return
  fi
  cmake --build --preset tsan -j "$(nproc)" </dev/null || return
  (
    # halt_on_error: a rank ends with _exit, which would skip TSan's exit code.
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=7 suppressions=$PWD/plugin-tests/sanitizers/tsan.supp"
    # No liveness links here: under TSan's slowdown a receiver can fall more
    # than their one second of grace behind a sender that has already
    # closed its comms, which the link reports as the peer gone (seen once;
    # docs/liveness.md, "Not covered"). This stage looks for data races.
    export WEFT_PEER_TIMEOUT_MS=0
    # Races do not depend on the ABI version: the newest one only.
    export WEFT_TEST_STAGE_VERSIONS=12
    tsan_ctest=(weft_without_kallsyms ctest --preset tsan -j "$tsan_jobs" --output-on-failure --timeout "$timeout_s")
    # The unit tests of weft's own libraries (the preset builds no others).
    weft_without_kallsyms build-tsan/plugin-tests/unit/weft-unit-tests </dev/null || rc=1
    "${tsan_ctest[@]}" --output-junit "$(weft_junit tsan-threads)" -LE 'known-issue|vm' \
      -R '^conformance[.](tcp|tcp-rdma|tcp-weft|shm|shm-rdma|softverbs|softverbs-qp4)[.](threads|inflight)$' \
      </dev/null || rc=1
    # One-sided context blocks driven from four threads at once, and
    # completions on whichever thread polls (libfabric, and verbs queue
    # pairs shared by the blocks). 16 MiB at most: softverbs' 64 MiB puts
    # to every rank took over the suite's 60 s wait under TSan.
    WEFT_TEST_RMA_MAX=16777216 "${tsan_ctest[@]}" --output-junit "$(weft_junit tsan-rma)" \
      -R '^rma[.](tcp-message|softverbs)[.]rma14$' </dev/null || rc=1
    exit "$rc"
  )
}

stage_fabric26() {
  local tarball=${WEFT_LIBFABRIC26_TARBALL:-../shared/vendor/libfabric-2.6.0.tar.xz}
  if [[ ! -f $tarball && -z ${CI:-} ]]; then
    echo "==> skipping the libfabric 2.6 run: $tarball not found (CI requires it)"
    return 0
  fi
  weft_build_libfabric26 "$WEFT_LIBFABRIC26_PREFIX" || return
  echo "==> configuring and building against libfabric 2.6 (cmake --preset fabric26)"
  if [[ ! -f build-fabric26/build.ninja ]]; then
    cmake --preset fabric26 </dev/null || return
  fi
  cmake --build --preset fabric26 -j "$(nproc)" </dev/null || return
  # The native verbs suites (label ibv) use no libfabric: run once, above.
  echo "==> ctest --preset fabric26 -L 'conformance|functional|cuda' -LE 'known-issue|ibv', libfabric 2.6"
  # The newest ABI version only: this run checks weft against another
  # libfabric; the version adapters above the transport do not depend on
  # it, and the 1.17 run covers every version (and every one-sided table:
  # here the newest the NCCL releases load and the oldest).
  WEFT_TEST_STAGE_VERSIONS=12 weft_without_kallsyms ctest --preset fabric26 -j "$jobs" --output-on-failure \
    --timeout "$timeout_s" --output-junit "$(weft_junit libfabric-2.6)" \
    -L 'conformance|functional|cuda' -LE 'known-issue|ibv' \
    -E '^rma[.][^.]+[.](rma17|rma16|rma15|rma13|gin13|gin12)$' </dev/null
}

stage_vm() {
  # Real rdma-core (libibverbs, its rxe provider), the kernel's rdma_rxe and
  # libfabric's verbs;ofi_rxm, under QEMU with Debian's kernel
  # (plugin-tests/vm/README.md): the tests labelled vm-ci, at the newest ABI
  # version (the 1.17 run above covers every version). The rest of the VM
  # suites: scripts/vm-test.sh.
  local rc=0
  # One at a time by default. WEFT_VM_CI_JOBS=2 uses the guest's two CPUs
  # (319 s instead of about 450 s), but in one of two rehearsals at -j 2
  # (2026-12-02) a rank of rma.verbs.rma14 died of SIGSEGV inside
  # libfabric 1.17's verbs;ofi_rxm, posting its first setup send in
  # connect: not traced yet, so not the default.
  local vm_jobs=${WEFT_VM_CI_JOBS:-1}
  echo "==> Soft-RoCE VM: ctest -L vm-ci -j $vm_jobs in the guest (scripts/vm-test.sh)"
  WEFT_TEST_STAGE_VERSIONS=12 WEFT_VM_TIMEOUT=${WEFT_VM_CI_TIMEOUT:-1200} \
    scripts/vm-test.sh --no-install --no-build --build-dir build -- -L vm-ci -j "$vm_jobs" </dev/null || rc=$?
  # The guest's JUnit file, for the slowest-tests list.
  cp build/vm-results/junit.xml "$WEFT_RESULTS_DIR/vm.xml" 2>/dev/null || true
  # 125: the VM could not start (no QEMU, no kernel package, a failed boot).
  # CI must run it; elsewhere that is said and the run goes on.
  if [[ $rc -eq 125 && -z ${CI:-} ]]; then
    echo "==> skipped the Soft-RoCE VM: it could not start here (see above); CI requires it"
    return 0
  fi
  return "$rc"
}

stage_packages() {
  # The .deb (lintian-clean) and .rpm, and the .deb installed with apt in a
  # fresh bookworm root where the node check and a transfer run
  # (scripts/package-test.sh, about a minute).
  echo "==> packages: build, lintian, install into a fresh root (scripts/package-test.sh)"
  scripts/package-test.sh build </dev/null
}

# The install and the default build stop the run: nothing else can run.
if ! weft_stage install stage_install || ! weft_stage build stage_build; then
  weft_stage_report || true
  echo "==> tests FAILED: the dependencies or the default build failed; see the output above" >&2
  exit 1
fi
weft_stage tests-libfabric-1.17 stage_tests_117 "$@" || status=1
if [[ $full_run -eq 1 ]]; then
  weft_stage fuzz stage_fuzz || status=1
  weft_stage asan stage_asan || status=1
  weft_stage tsan stage_tsan || status=1
  weft_stage libfabric-2.6 stage_fabric26 || status=1
  weft_stage soft-roce-vm stage_vm || status=1
  weft_stage packages stage_packages || status=1
fi

weft_stage_report || status=1
if [ "$status" -eq 0 ]; then
  echo "==> all tests passed"
else
  echo "==> tests FAILED; see the stage table and the output above" >&2
  exit "$status"
fi
