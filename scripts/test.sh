#!/usr/bin/env bash
# Installs the build dependencies, builds, and runs every test (all ctest
# labels, including the docs check). Used by CI (.ci/run); needs no stdin.
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/install-deps.sh

weft_install_deps
weft_build

# Per-test timeout: a hung peer must fail the test, not the CI job.
timeout_s=${WEFT_TEST_TIMEOUT:-600}
echo "==> ctest --preset default (timeout ${timeout_s}s per test)"
if ctest --preset default --output-on-failure --timeout "$timeout_s" "$@" </dev/null; then
  echo "==> all tests passed"
else
  status=$?
  echo "==> tests FAILED (ctest exit status $status); see the output above" >&2
  exit "$status"
fi
