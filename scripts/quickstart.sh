#!/usr/bin/env bash
# From a fresh Debian bookworm machine to weft moving bytes: installs the
# build dependencies (apt-get, as root or through sudo), builds the plugin
# and its tools, and runs
# weft-perf with two ranks over loopback through the plugin, printing the
# latency and bandwidth table. Safe to rerun.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/install-deps.sh

# What building and running the plugin needs, no more: scripts/test.sh
# installs and builds what the tests add.
weft_install_deps build
weft_build plugin

perf=build/src/tools/perf/weft-perf
if [[ ! -x $perf ]]; then
  echo "error: $perf was not built" >&2
  exit 1
fi

# libfabric's tcp provider on loopback: no RDMA hardware needed.
echo "==> weft-perf: two ranks on this machine, libfabric tcp provider over lo"
export WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo
"$perf" --local --max-bytes 64M --iter-bytes 1G "$@" </dev/null

echo
echo "Done. Next: scripts/test.sh runs every test; README.md shows how to use weft with NCCL."
