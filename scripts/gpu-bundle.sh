#!/usr/bin/env bash
# Makes a self-contained folder for a GPU machine that has NCCL and CUDA but
# no libfabric: the plugin, the NCCL test program, Debian's libfabric and
# every library it needs beyond glibc (from `apt-get download` + `dpkg -x`),
# and gpu-e2e.sh to run it. Copy the folder over and run its gpu-e2e.sh.
#
# usage: scripts/gpu-bundle.sh [--out DIR] [--build-dir DIR] [--cuda DIR]
#   --out        bundle folder (default: out/gpu-bundle)
#   --build-dir  weft build with libnccl-net-weft.so (default: build)
#   --cuda       CUDA toolkit with nccl.h and libnccl (default: /usr/local/cuda)
#
# The test program is built here with g++ (no CMake needed):
#   g++ -std=c++17 -O2 -I$CUDA/include plugin-tests/gpu/nccl_e2e.cpp \
#       -o weft-nccl-e2e -L$CUDA/lib -lnccl -lcudart
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/out/gpu-bundle
build=$root/build
cuda=/usr/local/cuda
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --build-dir) build=$(realpath -m "$2"); shift 2 ;;
    --cuda) cuda=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

die() { echo "gpu-bundle.sh: $*" >&2; exit 1; }

plugin=$build/src/libnccl-net-weft.so
[[ -f $plugin ]] || die "$plugin not found: build first (cmake --preset default && cmake --build build)"
[[ -f $cuda/include/nccl.h ]] || die "$cuda/include/nccl.h not found (use --cuda)"
command -v apt-get >/dev/null && command -v dpkg >/dev/null || die "needs apt-get and dpkg (Debian)"

rm -rf "$out"
mkdir -p "$out/lib" "$out/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "==> plugin: $plugin"
cp "$plugin" "$out/lib/"

echo "==> building weft-nccl-e2e against $cuda"
g++ -std=c++17 -O2 -Wall -Wextra -I"$cuda/include" "$root/plugin-tests/gpu/nccl_e2e.cpp" \
  -o "$out/bin/weft-nccl-e2e" -L"$cuda/lib" -L"$cuda/lib64" -lnccl -lcudart

for tool in "$build/src/tools/info/weft-info" "$build/src/tools/perf/weft-perf"; do
  if [[ -x $tool ]]; then cp "$tool" "$out/bin/"; fi
done
cp "$root/scripts/gpu-e2e.sh" "$out/"

# glibc is on every system and must match its ld.so: never bundle it.
is_glibc() {
  case "${1##*/}" in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*) return 0 ;;
    *) return 1 ;;
  esac
}

# Package that owns a library path (Debian registers /usr/lib after usrmerge).
owner_of() {
  local path=$1 real
  real=$(readlink -f "$path")
  for candidate in "$path" "$real" "/usr$path" "/usr$real"; do
    dpkg -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1 && return 0
  done
  return 1
}

# Every non-glibc library the plugin needs, recursively (ldd resolves the tree).
declare -A lib_path lib_pkg
while read -r name _ path _; do
  [[ $path == /* ]] || continue
  is_glibc "$name" && continue
  lib_path[$name]=$path
  lib_pkg[$name]=$(owner_of "$path") || die "no Debian package owns $path"
done < <(ldd "$plugin" | grep '=>')
[[ -n ${lib_path[libfabric.so.1]:-} ]] || die "the plugin does not link libfabric.so.1?"

mapfile -t packages < <(printf '%s\n' "${lib_pkg[@]}" | sort -u)
echo "==> apt-get download ${packages[*]}"
(cd "$work" && apt-get download "${packages[@]}" </dev/null 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
for deb in "$work"/*.deb; do
  [[ -f $deb ]] || die "apt-get download fetched nothing"
  dpkg -x "$deb" "$work/root"
done

{
  echo "# weft GPU bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "# weft commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "# libraries the plugin needs beyond glibc (all bundled in lib/):"
  printf '%-28s %s\n' "library" "package"
} > "$out/MANIFEST.txt"
for name in $(printf '%s\n' "${!lib_path[@]}" | sort); do
  # By the real file's name first: some sonames are /etc/alternatives links.
  real=$(basename "$(readlink -f "${lib_path[$name]}")")
  found=$(find "$work/root" -name "$real" \( -type f -o -type l \) | head -1)
  [[ -n $found ]] || found=$(find "$work/root" -name "$name" \( -type f -o -type l \) | head -1)
  [[ -n $found ]] || die "$name is not in package ${lib_pkg[$name]}"
  cp -L "$found" "$out/lib/$name"
  printf '%-28s %s\n' "$name" "${lib_pkg[$name]}" >> "$out/MANIFEST.txt"
done
for deb in "$work"/*.deb; do echo "# $(basename "$deb")" >> "$out/MANIFEST.txt"; done

# Proof of self-containment: with only lib/ on the path, everything the
# plugin needs resolves inside the bundle or to glibc.
echo "==> ldd of the bundled plugin (LD_LIBRARY_PATH=lib only)"
missing=0
while read -r name _ path _; do
  if is_glibc "$name"; then
    status="glibc (system)"
  elif [[ $path == "$out/lib/"* ]]; then
    status="bundled"
  else
    status="MISSING on a minimal system (resolved to $path)"
    missing=1
  fi
  printf '  %-28s %s\n' "$name" "$status"
done < <(env -i LD_LIBRARY_PATH="$out/lib" PATH=/usr/bin:/bin ldd "$out/lib/libnccl-net-weft.so" | grep -v 'linux-vdso' | sed 's/^\s*//' | awk '{ if ($2 == "=>") print $1, $2, $3; else print $1, "=>", $1 }')
[[ $missing -eq 0 ]] || die "some libraries are not bundled"

echo "==> test program needs (from the GPU machine): $(ldd "$out/bin/weft-nccl-e2e" | awk '/nccl|cudart/ {print $1}' | tr '\n' ' ')"
du -sh "$out" | awk '{print "==> bundle: " $2 " (" $1 ")"}'
echo "    run on the GPU machine: $(basename "$out")/gpu-e2e.sh"
