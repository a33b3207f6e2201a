# Installs weft's build and test dependencies on Debian bookworm.
# Sourced by scripts/quickstart.sh and scripts/test.sh; defines
# weft_install_deps. apt-get runs only when a package is missing, so reruns
# are fast and need neither root nor network.

# Building the plugin and its tools, and running them (scripts/quickstart.sh).
WEFT_BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libfabric-dev libfabric-bin libhwloc-dev
)
# What the tests add (scripts/test.sh).
WEFT_TEST_PACKAGES=(
  catch2 clang-format iproute2 iptables
  ccache  # the compiler cache: a rerun, or a tree another tree built, compiles little
  gdb  # stacks of hung test ranks in CI logs
  python3-matplotlib  # scripts/plot-perf.py and its test (tools.plot_perf)
  python3-jsonschema  # weft-info --check --json against docs/node-check.schema.json (tools.node_check)
  openmpi-bin  # scripts/weft-nccl-tests under mpirun (tools.launchers)
  lintian rpm mmdebstrap  # scripts/package-test.sh: the .deb and .rpm, installed in a fresh root
  clang libclang-rt-14-dev  # the fuzz targets (libFuzzer; preset fuzz, docs/fuzzing.md)
  # libfabric 2.6 for the fabric26 preset (scripts/lib/libfabric26.sh): its
  # tarball ships no configure, and verbs/efa need the rdma-core headers
  autoconf automake libtool xz-utils libibverbs-dev librdmacm-dev
  # The Soft-RoCE VM (plugin-tests/vm): QEMU, a static busybox for its
  # initramfs; rdma-core's user space for the guest (it runs this root)
  qemu-system-x86 busybox-static ibverbs-providers ibverbs-utils
)
# What weft_install_deps installs; callers may add to it.
WEFT_DEB_PACKAGES=("${WEFT_BUILD_PACKAGES[@]}")

# weft_install_deps [build|test]: the build packages (the default), or
# those and the test packages.
weft_install_deps() {
  local missing=() pkg
  local wanted=("${WEFT_DEB_PACKAGES[@]}")
  [[ ${1:-build} != test ]] || wanted+=("${WEFT_TEST_PACKAGES[@]}")
  for pkg in "${wanted[@]}"; do
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

# weft_build [plugin|all]: configures and builds with the default preset.
# plugin (scripts/quickstart.sh): the plugin and its tools only, without
# the test suites (which need the test packages); all: everything, the
# suites switched on in a tree that the quickstart configured without them.
weft_build() {
  local what=${1:-all}
  echo "==> configuring and building (cmake --preset default, $what)"
  if [[ $what == plugin ]]; then
    if [[ ! -f build/build.ninja ]]; then
      cmake --preset default -DWEFT_BUILD_TESTS=OFF </dev/null || return
    fi
    cmake --build --preset default -j "$(nproc)" --target nccl-net-weft weft-perf weft-info \
      </dev/null
    return
  fi
  if [[ ! -f build/build.ninja ]] || grep -q '^WEFT_BUILD_TESTS:BOOL=OFF$' build/CMakeCache.txt; then
    cmake --preset default -DWEFT_BUILD_TESTS=ON </dev/null || return
  fi
  cmake --build --preset default -j "$(nproc)" </dev/null
}
