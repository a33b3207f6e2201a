#!/usr/bin/env bash
# Installs the build dependencies, builds, and runs every test (all ctest
# labels, including the docs check) against Debian's libfabric 1.17; then
# runs each fuzz target for WEFT_FUZZ_SECONDS (20) from its seed corpus
# (clang, preset fuzz); then the unit, conformance and functional suites
# over tcp, shm and softverbs again under AddressSanitizer + UBSan (preset
# asan, LeakSanitizer checking each rank); then builds libfabric 2.6 from
# ../shared/vendor (CUDA-enabled, cached) and runs the conformance,
# functional and cuda suites against it too, where the GPU paths run on
# softcuda over softefa's FI_HMEM; then builds the .deb and .rpm, lints the
# .deb and installs it into a fresh Debian root (scripts/package-test.sh).
# Used by CI (.ci/run); needs no stdin. Extra arguments go to the 1.17 ctest run only (and skip the 2.6
# run), e.g. scripts/test.sh -L unit
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/install-deps.sh
source scripts/lib/libfabric26.sh

weft_install_deps
weft_build

# Per-test timeout: a hung peer must fail the test, not the CI job.
timeout_s=${WEFT_TEST_TIMEOUT:-600}
# Tests run two at a time: most of a test's time is spent waiting (close
# timeouts, peers, retries), none binds a fixed port outside its own network
# namespace, and none asserts on time. Tests over libfabric's shm, once run
# alone (its EBUSY on re-init), run beside others since weft names each shm
# endpoint uniquely. WEFT_TEST_JOBS=1 runs them all one by one.
jobs=${WEFT_TEST_JOBS:-2}
status=0
full_run=0
# Tests labelled known-issue fail because of libfabric provider bugs
# (docs/known-issues.md); run them with: ctest --preset default -L known-issue
if [ $# -eq 0 ]; then
  full_run=1
  set -- -LE known-issue
  echo "==> not run (known provider issues): $(ctest --preset default -N -L known-issue | sed -n 's/.*Test *#[0-9]*: //p' | tr '\n' ' ')"
fi
echo "==> ctest --preset default -j $jobs, libfabric 1.17 (timeout ${timeout_s}s per test)"
ctest --preset default -j "$jobs" --output-on-failure --timeout "$timeout_s" "$@" </dev/null ||
  status=$?

if [ "$full_run" -eq 1 ]; then
  fuzz_seconds=${WEFT_FUZZ_SECONDS:-20}
  echo "==> fuzz targets (clang, AddressSanitizer + UBSan), ${fuzz_seconds}s each (docs/fuzzing.md)"
  if [[ ! -f build-fuzz/build.ninja ]]; then
    cmake --preset fuzz </dev/null
  fi
  cmake -S . -B build-fuzz -DWEFT_FUZZ_SECONDS="$fuzz_seconds" >/dev/null </dev/null
  cmake --build --preset fuzz -j "$(nproc)" </dev/null &&
    ctest --preset fuzz -j "$jobs" -L fuzz </dev/null || status=$?

  echo "==> AddressSanitizer + UBSan build (preset asan): unit tests, conformance and functional over tcp, shm, softverbs (docs/sanitizers.md)"
  if [[ ! -f build-asan/build.ninja ]]; then
    cmake --preset asan </dev/null
  fi
  if cmake --build --preset asan -j "$(nproc)" </dev/null; then
    asan_ctest=(ctest --preset asan -j "$jobs" --output-on-failure --timeout "$timeout_s")
    export LSAN_OPTIONS=suppressions=$PWD/plugin-tests/sanitizers/lsan.supp:print_suppressions=0
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
    "${asan_ctest[@]}" -L unit </dev/null || status=$?
    # ABI versions 6 and 12 only in the two-process suites here: the
    # adapters for the others run under ASan in the unit tests, and over
    # every version in the 1.17 run above.
    export WEFT_TEST_VERSIONS=6,12
    # conformance.shm.close: under ASan, the send after finalize and re-init
    # never completes (also with the liveness links off); without ASan it
    # passes. Not traced yet (docs/sanitizers.md).
    "${asan_ctest[@]}" -LE 'known-issue|vm' \
      -R '^(conformance|functional)[.](tcp|tcp-rdma|shm|shm-rdma)[.]' \
      -E '^conformance[.]shm[.]close$' </dev/null || status=$?
    # The verbs transport over softverbs: memory errors and UB, no leak
    # check yet (docs/sanitizers.md says what it reports).
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 "${asan_ctest[@]}" \
      -LE 'known-issue|vm' -R '^(conformance|functional)[.]softverbs[.]' </dev/null || status=$?
    # One-sided comms (plugin-tests/rma): atomics and messages as signals
    # over libfabric, and the native verbs transport on softverbs.
    # No leak check: a rank's process ends with _exit.
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 "${asan_ctest[@]}" \
      -R '^rma[.](tcp|tcp-message|softverbs)[.]rma14$' </dev/null || status=$?
    unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS WEFT_TEST_VERSIONS
  else
    status=1
  fi

  echo "==> ThreadSanitizer build (preset tsan): unit tests and the threaded suites over tcp, shm, softverbs (docs/sanitizers.md)"
  if [[ ! -f build-tsan/build.ninja ]]; then
    cmake --preset tsan </dev/null
  fi
  if cmake --build --preset tsan -j "$(nproc)" </dev/null; then
    # halt_on_error: a rank ends with _exit, which would skip TSan's exit code.
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=7 suppressions=$PWD/plugin-tests/sanitizers/tsan.supp"
    # No liveness links here: under TSan's slowdown a receiver can fall more
    # than their one second of grace behind a sender that has already
    # closed its comms, which the link reports as the peer gone (seen once;
    # docs/liveness.md, "Not covered"). This stage looks for data races.
    export WEFT_PEER_TIMEOUT_MS=0
    # Races do not depend on the ABI version: the newest one only, where
    # the suite's own environment does not pick versions.
    export WEFT_TEST_VERSIONS=12
    tsan_ctest=(ctest --preset tsan -j "$jobs" --output-on-failure --timeout "$timeout_s")
    # The unit tests of weft's own libraries (the preset builds no others).
    build-tsan/plugin-tests/unit/weft-unit-tests </dev/null || status=$?
    "${tsan_ctest[@]}" -LE 'known-issue|vm' \
      -R '^conformance[.](tcp|tcp-rdma|tcp-weft|shm|shm-rdma|softverbs|softverbs-qp4)[.](threads|inflight)$' \
      </dev/null || status=$?
    # One-sided context blocks driven from four threads at once, and
    # completions on whichever thread polls (libfabric, and verbs queue
    # pairs shared by the blocks). 16 MiB at most: softverbs' 64 MiB puts
    # to every rank took over the suite's 60 s wait under TSan.
    WEFT_TEST_RMA_MAX=16777216 "${tsan_ctest[@]}" -R '^rma[.](tcp-message|softverbs)[.]rma14$' \
      </dev/null || status=$?
    unset TSAN_OPTIONS WEFT_PEER_TIMEOUT_MS WEFT_TEST_VERSIONS
  else
    status=1
  fi

  tarball=${WEFT_LIBFABRIC26_TARBALL:-../shared/vendor/libfabric-2.6.0.tar.xz}
  if [[ ! -f $tarball && -z ${CI:-} ]]; then
    echo "==> skipping the libfabric 2.6 run: $tarball not found (CI requires it)"
  else
    weft_build_libfabric26 "$WEFT_LIBFABRIC26_PREFIX"
    echo "==> configuring and building against libfabric 2.6 (cmake --preset fabric26)"
    if [[ ! -f build-fabric26/build.ninja ]]; then
      cmake --preset fabric26 </dev/null
    fi
    cmake --build --preset fabric26 -j "$(nproc)" </dev/null
    # The native verbs suites (label ibv) use no libfabric: run once, above.
    echo "==> ctest --preset fabric26 -L 'conformance|functional|cuda' -LE 'known-issue|ibv', libfabric 2.6"
    # The newest ABI version only (where the suite's environment does not
    # pick versions): this run checks weft against another libfabric; the
    # version adapters above the transport do not depend on it, and the
    # 1.17 run covers every version (and every one-sided table: here the
    # newest the NCCL releases load and the oldest).
    WEFT_TEST_VERSIONS=12 ctest --preset fabric26 -j "$jobs" --output-on-failure \
      --timeout "$timeout_s" -L 'conformance|functional|cuda' -LE 'known-issue|ibv' \
      -E '^rma[.][^.]+[.](rma17|rma16|rma15|rma13|gin13|gin12)$' </dev/null || status=$?
  fi
fi

if [ "$full_run" -eq 1 ]; then
  # The .deb (lintian-clean) and .rpm, and the .deb installed with apt in a
  # fresh bookworm root where the node check and a transfer run
  # (scripts/package-test.sh, about a minute).
  echo "==> packages: build, lintian, install into a fresh root (scripts/package-test.sh)"
  scripts/package-test.sh build </dev/null || status=1
fi

if [ "$status" -eq 0 ]; then
  echo "==> all tests passed"
else
  echo "==> tests FAILED (ctest exit status $status); see the output above" >&2
  exit "$status"
fi
