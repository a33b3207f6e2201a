#!/usr/bin/env bash
# Makes a self-contained folder for a GPU machine that has NCCL and CUDA but
# no libfabric: the NCCL test program, two builds of the plugin, each with
# its libfabric and every library that needs beyond glibc, and the scripts
# that run them (gpu-e2e.sh, gpu-device-check.sh). Copy the folder over and
# run its gpu-device-check.sh (or gpu-e2e.sh).
#
#   lib/    the plugin built against Debian's libfabric 1.17 (no CUDA: NCCL
#           stages GPU data through host memory), that libfabric and its
#           libraries, from `apt-get download` + `dpkg -x`
#   lib26/  the plugin built against libfabric 2.6 with CUDA (FI_HMEM,
#           --enable-cuda-dlopen), that libfabric, its libraries (Debian's
#           again), and the CUDA runtime it dlopens as libcudart.so
#   bin/    weft-nccl-e2e, weft-info, weft-perf (1.17 build); bin26/ weft-perf (2.6 build)
#
# usage: scripts/gpu-bundle.sh [--out DIR] [--build-dir DIR] [--fabric26 DIR | --no-fabric26]
#                              [--cuda DIR]
#   --out        bundle folder (default: out/gpu-bundle)
#   --build-dir  weft build against Debian's libfabric (default: build)
#   --fabric26   weft build against libfabric 2.6 (default: build-fabric26 when it holds
#                src/libnccl-net-weft.so); its libfabric is taken from
#                DIR/libfabric-2.6.0/install/lib (the fabric26 preset's)
#   --cuda       CUDA toolkit with nccl.h, libnccl and libcudart (default: /usr/local/cuda)
#
# Debug information is stripped from the copies (symbols stay), so the
# bundle stays small enough to carry. The test program is built here with
# g++ (no CMake needed):
#   g++ -std=c++17 -O2 -I$CUDA/include plugin-tests/gpu/nccl_e2e.cpp \
#       -o weft-nccl-e2e -L$CUDA/lib -lnccl -lcudart
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/out/gpu-bundle
build=$root/build
fabric26=auto
cuda=/usr/local/cuda
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --build-dir) build=$(realpath -m "$2"); shift 2 ;;
    --fabric26) fabric26=$(realpath -m "$2"); shift 2 ;;
    --no-fabric26) fabric26=none; shift ;;
    --cuda) cuda=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

die() { echo "gpu-bundle.sh: $*" >&2; exit 1; }

plugin=$build/src/libnccl-net-weft.so
[[ -f $plugin ]] || die "$plugin not found: build first (cmake --preset default && cmake --build build)"
if [[ $fabric26 == auto ]]; then
  fabric26=none
  [[ -f $root/build-fabric26/src/libnccl-net-weft.so ]] && fabric26=$root/build-fabric26
fi
if [[ $fabric26 != none ]]; then
  plugin26=$fabric26/src/libnccl-net-weft.so
  lf26=$fabric26/libfabric-2.6.0/install/lib
  [[ -f $plugin26 ]] || die "$plugin26 not found (scripts/build-libfabric26.sh, then cmake --preset fabric26 && cmake --build --preset fabric26)"
  [[ -f $lf26/libfabric.so.1 ]] || die "$lf26/libfabric.so.1 not found"
  # The CUDA runtime libfabric dlopens (unversioned: libcudart.so).
  cudart=$(find "$cuda/lib64/" "$cuda/lib/" -maxdepth 1 -name 'libcudart.so.[0-9]*' 2>/dev/null | sort -V | head -1)
  [[ -n $cudart ]] || die "no libcudart.so.<N> in $cuda/lib64 or $cuda/lib (use --cuda)"
  cudart_soname=$(objdump -p "$cudart" | awk '$1 == "SONAME" { print $2 }')
  cudart=$(readlink -f "$cudart")
fi
[[ -f $cuda/include/nccl.h ]] || die "$cuda/include/nccl.h not found (use --cuda)"
{ command -v apt-get && command -v dpkg; } >/dev/null || die "needs apt-get and dpkg (Debian)"
command -v objcopy >/dev/null || die "needs objcopy (binutils)"

rm -rf "$out"
mkdir -p "$out/lib" "$out/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A copy without debug information (symbols stay, for backtraces).
copy_stripped() {
  cp "$1" "$2"
  chmod u+w "$2"
  objcopy --strip-debug "$2"
}

echo "==> plugin (libfabric 1.17): $plugin"
copy_stripped "$plugin" "$out/lib/libnccl-net-weft.so"

echo "==> building weft-nccl-e2e against $cuda"
g++ -std=c++17 -O2 -Wall -Wextra -I"$cuda/include" "$root/plugin-tests/gpu/nccl_e2e.cpp" \
  -o "$out/bin/weft-nccl-e2e" -L"$cuda/lib" -L"$cuda/lib64" -lnccl -lcudart

for tool in "$build/src/tools/info/weft-info" "$build/src/tools/perf/weft-perf"; do
  if [[ -x $tool ]]; then copy_stripped "$tool" "$out/bin/$(basename "$tool")"; fi
done
if [[ $fabric26 != none ]]; then
  echo "==> plugin (libfabric 2.6): $plugin26"
  mkdir -p "$out/lib26"
  copy_stripped "$plugin26" "$out/lib26/libnccl-net-weft.so"
  copy_stripped "$(readlink -f "$lf26/libfabric.so.1")" "$out/lib26/libfabric.so.1"
  echo "==> CUDA runtime for libfabric's dlopen: $cudart"
  cp "$cudart" "$out/lib26/$cudart_soname"
  ln -s "$cudart_soname" "$out/lib26/libcudart.so"
  if [[ -x $fabric26/src/tools/perf/weft-perf ]]; then
    mkdir -p "$out/bin26"
    copy_stripped "$fabric26/src/tools/perf/weft-perf" "$out/bin26/weft-perf"
  fi
fi
cp "$root/scripts/gpu-e2e.sh" "$root/scripts/gpu-device-check.sh" "$out/"

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

# Every non-glibc library a bundled .so needs, recursively (ldd resolves the
# tree), as "variant name path" in $work/deps. Libraries in $local_dir (our
# own libfabric 2.6) are bundled already; the rest come from Debian packages.
declare -A lib_pkg
: > "$work/deps"
collect_deps() {
  local variant=$1 elf=$2 ld_path=$3 local_dir=$4 name path
  while read -r name _ path _; do
    [[ $path == /* ]] || continue
    is_glibc "$name" && continue
    if [[ -n $local_dir && $(readlink -f "$path") == "$(readlink -f "$local_dir")"/* ]]; then
      continue
    fi
    echo "$variant $name $path" >> "$work/deps"
    [[ -n ${lib_pkg[$path]:-} ]] || lib_pkg[$path]=$(owner_of "$path") || die "no Debian package owns $path"
  done < <(LD_LIBRARY_PATH=$ld_path ldd "$elf" | grep '=>')
}
collect_deps lib "$plugin" "" ""
grep -q '^lib libfabric.so.1 ' "$work/deps" || die "the plugin does not link libfabric.so.1?"
if [[ $fabric26 != none ]]; then
  collect_deps lib26 "$plugin26" "$lf26" "$lf26"
  collect_deps lib26 "$lf26/libfabric.so.1" "$lf26" "$lf26"
fi

mapfile -t packages < <(printf '%s\n' "${lib_pkg[@]}" | sort -u)
echo "==> apt-get download ${packages[*]}"
(cd "$work" && { apt-get download "${packages[@]}" </dev/null 2>&1 | grep -v '^W: Download is performed unsandboxed' || true; })
for pkg in "${packages[@]}"; do
  compgen -G "$work/${pkg}_*.deb" >/dev/null || die "apt-get download did not fetch $pkg (apt-get update first?)"
done
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done

{
  echo "# weft GPU bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "# weft commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD -- src include 2>/dev/null || echo ' (src/ or include/ modified since)')"
  echo "# lib/libnccl-net-weft.so   from $plugin ($(date -u -r "$plugin" +%Y-%m-%dT%H:%M:%SZ))"
  if [[ $fabric26 != none ]]; then
    echo "# lib26/libnccl-net-weft.so from $plugin26 ($(date -u -r "$plugin26" +%Y-%m-%dT%H:%M:%SZ))"
    echo "# lib26/libfabric.so.1      from $(readlink -f "$lf26/libfabric.so.1")"
    echo "# lib26/$cudart_soname   from $cudart (libcudart.so links to it)"
  fi
  echo "# libraries the plugins need beyond glibc, from Debian packages:"
  printf '%-6s %-28s %s\n' "dir" "library" "package"
} > "$out/MANIFEST.txt"
sort -u "$work/deps" | while read -r variant name path; do
  # By the real file's name first: some sonames are /etc/alternatives links.
  real=$(basename "$(readlink -f "$path")")
  found=$(find "$work/root" -name "$real" \( -type f -o -type l \) | head -1)
  [[ -n $found ]] || found=$(find "$work/root" -name "$name" \( -type f -o -type l \) | head -1)
  [[ -n $found ]] || die "$name is not in package ${lib_pkg[$path]}"
  cp -L "$found" "$out/$variant/$name"
  printf '%-6s %-28s %s\n' "$variant" "$name" "${lib_pkg[$path]}" >> "$out/MANIFEST.txt"
done
for deb in "$work"/*.deb; do echo "# $(basename "$deb")" >> "$out/MANIFEST.txt"; done

# Proof of self-containment: with only lib/ (lib26/) on the path, everything
# the plugin and its libfabric need resolves inside the bundle or to glibc.
missing=0
check_closed() {
  local dir=$1 elf=$2 name path status
  echo "==> ldd of $(basename "$dir")/$(basename "$elf") (LD_LIBRARY_PATH=$(basename "$dir") only)"
  while read -r name _ path _; do
    if is_glibc "$name"; then
      status="glibc (system)"
    elif [[ $path == "$dir/"* ]]; then
      status="bundled"
    else
      status="MISSING on a minimal system (resolved to $path)"
      missing=1
    fi
    printf '  %-28s %s\n' "$name" "$status"
  done < <(env -i LD_LIBRARY_PATH="$dir" PATH=/usr/bin:/bin ldd "$elf" | grep -v 'linux-vdso' | sed 's/^\s*//' | awk '{ if ($2 == "=>") print $1, $2, $3; else print $1, "=>", $1 }')
}
check_closed "$out/lib" "$out/lib/libnccl-net-weft.so"
if [[ $fabric26 != none ]]; then
  check_closed "$out/lib26" "$out/lib26/libnccl-net-weft.so"
  check_closed "$out/lib26" "$out/lib26/libfabric.so.1"
  echo "==> libfabric 2.6 dlopens at run time: $(strings "$out/lib26/libfabric.so.1" | grep -E '^lib(cuda|cudart|nvidia-ml)\.so' | tr '\n' ' ')"
  echo "    (libcudart.so: bundled; libcuda.so.1 and libnvidia-ml.so.1: the GPU driver's)"
fi
[[ $missing -eq 0 ]] || die "some libraries are not bundled"

glibc_needed=$(find "$out" -type f \( -name '*.so*' -o -perm -u+x \) -exec objdump -T {} + 2>/dev/null |
  grep -oE 'GLIBC_[0-9]+\.[0-9]+' | sort -uV | tail -1 | sed 's/GLIBC_//' || true)
echo "# needs glibc >= $glibc_needed (the newest symbol version any bundled file uses)" >> "$out/MANIFEST.txt"
echo "==> the GPU machine's glibc must be $glibc_needed or newer"
echo "==> test program needs (from the GPU machine): $(ldd "$out/bin/weft-nccl-e2e" | awk '/nccl|cudart/ {print $1}' | tr '\n' ' ')"
du -sh "$out" | awk '{print "==> bundle: " $2 " (" $1 ")"}'
echo "    on the GPU machine, from the checkout: bash scripts/gpu-device-check.sh ${out#"$root"/} OUTDIR"
echo "    (or, with the folder alone: bash $(basename "$out")/gpu-device-check.sh $(basename "$out") OUTDIR)"
