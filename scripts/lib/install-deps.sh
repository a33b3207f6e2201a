# Installs weft's build and test dependencies on Debian bookworm.
# Sourced by scripts/quickstart.sh and scripts/test.sh; defines
# weft_install_deps. apt-get runs only when a package is missing, so reruns
# are fast and need neither root nor network.

WEFT_DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libfabric-dev libfabric-bin libhwloc-dev catch2
  clang-format iproute2 iptables
  gdb  # stacks of hung test ranks in CI logs
  python3-matplotlib  # scripts/plot-perf.py and its test (tools.plot_perf)
  python3-jsonschema  # weft-info --check --json against docs/node-check.schema.json (tools.node_check)
  openmpi-bin  # scripts/weft-nccl-tests under mpirun (tools.launchers)
  lintian rpm mmdebstrap  # scripts/package-test.sh: the .deb and .rpm, installed in a fresh root
  clang libclang-rt-14-dev  # the fuzz targets (libFuzzer; preset fuzz, docs/fuzzing.md)
  # libfabric 2.6 for the fabric26 preset (scripts/lib/libfabric26.sh): its
  # tarball ships no configure, and verbs/efa need the rdma-core headers
  autoconf automake libtool xz-utils libibverbs-dev librdmacm-dev
)

weft_install_deps() {
  local missing=() pkg
  for pkg in "${WEFT_DEB_PACKAGES[@]}"; do
    # dpkg -s alone also succeeds for removed-but-configured packages.
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
      missing+=("$pkg")
    fi
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "==> build dependencies already installed"
    return 0
  fi

  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo -n)
      # Allow a password prompt only when someone can answer it.
      [[ -t 0 && -z "${CI:-}" ]] && sudo=(sudo)
    else
      echo "error: missing packages: ${missing[*]}" >&2
      echo "       run as root, install sudo, or install them yourself:" >&2
      echo "       apt-get install ${missing[*]}" >&2
      return 1
    fi
  fi

  echo "==> installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update </dev/null
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
}

# Configures (once) and builds with the default preset.
weft_build() {
  echo "==> configuring and building (cmake --preset default)"
  if [[ ! -f build/build.ninja ]]; then
    cmake --preset default </dev/null
  fi
  cmake --build --preset default -j "$(nproc)" </dev/null
}
