#!/usr/bin/env bash
# Builds libfabric 2.6.0 (with CUDA support where a toolkit is installed) for
# the fabric26 CMake preset. Cached: a rerun with nothing changed returns at
# once. Then: cmake --preset fabric26 && cmake --build --preset fabric26
# Usage: scripts/build-libfabric26.sh [prefix-dir]
#        (default build-fabric26/libfabric-2.6.0/install, which the preset uses)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/install-deps.sh
source scripts/lib/libfabric26.sh

# Installs autotools and the rdma-core headers if missing (no-op otherwise).
weft_install_deps
weft_build_libfabric26 "${1:-$WEFT_LIBFABRIC26_PREFIX}"
