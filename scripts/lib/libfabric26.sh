# shellcheck shell=bash
# Builds libfabric 2.6.0 from the vendored tarball, for the fabric26 CMake
# preset (weft against a current libfabric instead of Debian's 1.17).
# Sourced by scripts/build-libfabric26.sh (and CI); defines
# weft_build_libfabric26. Needs the packages in install-deps.sh
# (autotools because the tarball ships no configure, rdma-core headers for
# the verbs and efa providers).
#
# The result is cached: a stamp in the prefix records the tarball's sha256
# and everything given to configure; when it matches, nothing is rebuilt.
# Anything else (a new tarball, other flags, a CUDA toolkit appearing or
# changing version, a moved checkout) rebuilds from scratch.

_weft_lf26_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Where the fabric26 preset (CMakePresets.json) looks for it.
# shellcheck disable=SC2034  # used by scripts/build-libfabric26.sh
WEFT_LIBFABRIC26_PREFIX=build-fabric26/libfabric-2.6.0/install

# weft_build_libfabric26 <prefix-dir>
# Installs into <prefix-dir>; the source tree and build.log go to the
# sibling <prefix-dir>.build. Environment: WEFT_LIBFABRIC26_TARBALL (default
# ../shared/vendor/libfabric-2.6.0.tar.xz beside the checkout),
# WEFT_CUDA_HOME (default /usr/local/cuda), WEFT_JOBS (default nproc).
weft_build_libfabric26() {
  if [[ $# -ne 1 || -z $1 ]]; then
    echo "usage: weft_build_libfabric26 <prefix-dir>" >&2
    return 2
  fi
  local tarball=${WEFT_LIBFABRIC26_TARBALL:-$_weft_lf26_repo/../shared/vendor/libfabric-2.6.0.tar.xz}
  if [[ ! -f $tarball ]]; then
    echo "error: libfabric tarball not found: $tarball" >&2
    echo "       set WEFT_LIBFABRIC26_TARBALL to its path" >&2
    return 1
  fi

  # Absolute, because it ends up in libfabric.pc and the stamp.
  local prefix=$1
  mkdir -p "$(dirname "$prefix")" || return 1
  prefix="$(cd "$(dirname "$prefix")" && pwd)/$(basename "$prefix")"

  # Only the providers weft runs on: tcp and shm (CI), rxm, verbs and efa
  # (real NICs). --enable-only skips every provider and hook not named here,
  # which keeps the build short and independent of what else is installed.
  # The named ones are "yes", so configure fails rather than silently
  # dropping verbs/efa when the rdma-core headers are missing.
  # CFLAGS is left alone on purpose: libfabric's default for a non-debug
  # build is already -O2 -DNDEBUG, and setting CFLAGS would also drop its
  # -fvisibility=hidden.
  local args=(
    --prefix="$prefix" --disable-static --enable-debug=no
    --enable-only --enable-tcp --enable-shm --enable-rxm --enable-verbs --enable-efa
    --without-gdrcopy
  )
  # rdma-core before 50 (Debian bookworm has 44) declares no RDMA write,
  # unsolicited write-receive or 128-byte in-order capability, and configure
  # then compiles those paths out of the efa provider: no FI_RMA on
  # efa-direct, emulated writes on efa. Our own declarations of the newer
  # interface (rdma-core-next/) switch them on; the libraries linked are
  # unchanged. A system with newer headers builds against its own.
  local cppflags=() rdma_next=none
  if ! grep -q EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE /usr/include/infiniband/efadv.h 2>/dev/null; then
    cppflags+=("-I$_weft_lf26_repo/build-shims/rdma-core-next")
    rdma_next=$(cat "$_weft_lf26_repo"/build-shims/rdma-core-next/infiniband/*.h | sha256sum | cut -d' ' -f1)
  fi
  local cuda_home=${WEFT_CUDA_HOME:-/usr/local/cuda} cuda_version=none
  if [[ -f $cuda_home/include/cuda_runtime.h ]]; then
    cuda_version=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$cuda_home/include/cuda.h" 2>/dev/null)
    # dlopen: libfabric links no CUDA library, so the result also runs on
    # hosts without a GPU driver. The toolkit has no nvml.h; our stub
    # declares the three NVML calls that hmem_cuda.c looks up with dlsym.
    args+=(--with-cuda="$cuda_home" --enable-cuda-dlopen)
    cppflags+=("-I$_weft_lf26_repo/build-shims/nvml-stub")
  else
    echo "==> libfabric 2.6.0: no CUDA toolkit in $cuda_home (set WEFT_CUDA_HOME);" \
         "building WITHOUT CUDA, so FI_HMEM_CUDA will be unavailable"
    args+=(--without-cuda)
  fi
  ((${#cppflags[@]} == 0)) || args+=(CPPFLAGS="${cppflags[*]}")

  local key stamp=$prefix/.weft-build-stamp
  key="tarball-sha256 $(sha256sum <"$tarball" | cut -d' ' -f1)
cuda-version $cuda_version
nvml-stub-sha256 $(sha256sum <"$_weft_lf26_repo/build-shims/nvml-stub/nvml.h" | cut -d' ' -f1)
rdma-core-next-sha256 $rdma_next
configure ${args[*]}" || return 1
  if [[ -f $stamp && -f $prefix/lib/pkgconfig/libfabric.pc && "$(<"$stamp")" == "$key" ]]; then
    echo "==> libfabric 2.6.0 up to date in $prefix (cached)"
    return 0
  fi

  local work=$prefix.build
  local log=$work/build.log src=$work/libfabric-2.6.0 jobs=${WEFT_JOBS:-$(nproc)}
  local start=$SECONDS
  # A half-built prefix must not look usable.
  rm -rf "$prefix" "$work" && mkdir -p "$work" || return 1
  # Through ccache where installed, as weft's own trees are (CMakeLists.txt):
  # a fresh clone on a machine that built it before compiles nothing again.
  local cc=()
  if command -v ccache >/dev/null 2>&1; then
    cc=(CC="ccache ${CC:-gcc}" CCACHE_BASEDIR="$_weft_lf26_repo" CCACHE_NOHASHDIR=1)
  fi
  echo "==> building libfabric 2.6.0 (CUDA: $cuda_version) into $prefix; log: $log"
  # An && chain, not set -e in a subshell: errexit is ignored inside a
  # subshell that is itself the condition of an if.
  if ! (
    echo "==> extracting $tarball" &&
      tar -xJf "$tarball" -C "$work" &&
      cd "$src" &&
      # Git-archive style tarballs ship no configure; real releases do.
      { [[ -x configure ]] || { echo "==> autogen.sh" && ./autogen.sh; }; } &&
      echo "==> configure ${args[*]}" &&
      env "${cc[@]}" ./configure "${args[@]}" &&
      echo "==> make -j$jobs" &&
      env "${cc[@]}" make -j"$jobs" &&
      echo "==> make install" &&
      make install
  ) >"$log" 2>&1; then
    echo "error: building libfabric 2.6.0 failed; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    return 1
  fi

  # The object files are of no further use; keep the log.
  rm -rf "$src"
  printf '%s\n' "$key" >"$stamp"
  echo "==> libfabric 2.6.0 built in $((SECONDS - start))s ($(du -sh "$prefix" | cut -f1) installed)"
}
