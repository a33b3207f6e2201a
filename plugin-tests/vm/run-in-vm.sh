#!/usr/bin/env bash
# Runs a command inside a QEMU VM whose kernel has Soft-RoCE (rdma_rxe), with
# this machine's root filesystem as the VM's root, so real rdma-core and
# libfabric's verbs provider can be tested on a host whose kernel has no
# RDMA. See README.md next to this file.
#
#   plugin-tests/vm/run-in-vm.sh [options] -- command [args...]
#
# The command runs as root in the guest, in the current directory, with the
# host's root mounted read-only under a RAM overlay (writes are allowed and
# discarded), an rxe0 device on a veth pair, and the environment variables
# named below. Its output streams here; the exit status is the command's,
# 124 on timeout, 125 when the VM could not run it.
set -euo pipefail
# One compound command: bash reads all of it before running any, so editing
# this file while a VM runs cannot break the run.
{

prog=${0##*/}
vm_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
  cat <<EOF
usage: $prog [options] -- command [args...]
       $prog --prepare

Options:
  --timeout SECONDS     stop the VM after this long, exit 124 (default
                        \$WEFT_VM_TIMEOUT or 3600; 0: no limit)
  --memory SIZE         guest memory, QEMU syntax (default \$WEFT_VM_MEMORY or 3G)
  --cpus N              virtual CPUs (default \$WEFT_VM_CPUS or 2)
  --accel auto|kvm|tcg  auto: KVM when /dev/kvm is usable, else TCG (default
                        \$WEFT_VM_ACCEL or auto)
  --env NAME[=VALUE]    pass NAME (its value here, or VALUE) to the command
  --env-prefix PREFIX   pass every variable whose name starts with PREFIX
                        (defaults: WEFT_ FI_ NCCL_ RDMAV_ CTEST_ and PATH,
                        LD_LIBRARY_PATH, HOME, TERM, LANG, LC_ALL, TZ)
  --share DIR           mount host DIR read-write at the same path (results
                        that must outlive the VM); repeatable
  --no-rxe              do not create the veth pair and rxe0
  --kernel-log          show all kernel messages (default: errors only)
  --cache DIR           kernel and initramfs cache (default \$WEFT_VM_CACHE
                        or /var/tmp/weft-vm)
  --prepare             fetch the kernel and build the initramfs, then exit
  --keep                keep the job folder (command script, status)
  -h, --help            this text

Kernel: Debian's linux-image package that linux-image-amd64 depends on
(\$WEFT_VM_KERNEL_PKG names another, \$WEFT_VM_KERNEL_DEB a local .deb),
fetched with apt-get download and cached.
EOF
}

say() { echo "[vm] $*" >&2; }
fail() {
  echo "[vm] error: $*" >&2
  exit 125
}

timeout_s=${WEFT_VM_TIMEOUT:-3600}
memory=${WEFT_VM_MEMORY:-3G}
cpus=${WEFT_VM_CPUS:-2}
accel=${WEFT_VM_ACCEL:-auto}
cache=${WEFT_VM_CACHE:-/var/tmp/weft-vm}
env_names=(PATH LD_LIBRARY_PATH HOME TERM LANG LC_ALL TZ)
env_prefixes=(WEFT_ FI_ NCCL_ RDMAV_ CTEST_)
env_values=()  # NAME=VALUE given on the command line
shares=()
rxe=1
kernel_log=0
prepare_only=0
keep=0

need_arg() { [[ $# -ge 2 ]] || fail "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --timeout) need_arg "$@"; timeout_s=$2; shift 2 ;;
    --memory) need_arg "$@"; memory=$2; shift 2 ;;
    --cpus) need_arg "$@"; cpus=$2; shift 2 ;;
    --accel) need_arg "$@"; accel=$2; shift 2 ;;
    --env)
      need_arg "$@"
      if [[ $2 == *=* ]]; then env_values+=("$2"); else env_names+=("$2"); fi
      shift 2 ;;
    --env-prefix) need_arg "$@"; env_prefixes+=("$2"); shift 2 ;;
    --share) need_arg "$@"; shares+=("$2"); shift 2 ;;
    --no-rxe) rxe=0; shift ;;
    --kernel-log) kernel_log=1; shift ;;
    --cache) need_arg "$@"; cache=$2; shift 2 ;;
    --prepare) prepare_only=1; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    -*) fail "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
if [[ $prepare_only -eq 0 && $# -eq 0 ]]; then
  usage >&2
  exit 125
fi
[[ $timeout_s =~ ^[0-9]+$ ]] || fail "--timeout: '$timeout_s' is not a number of seconds"
[[ $cpus =~ ^[1-9][0-9]*$ ]] || fail "--cpus: '$cpus' is not a positive number"
[[ $memory =~ ^[0-9]+[MGmg]?$ ]] || fail "--memory: '$memory' is not a size such as 3G or 2048M"
case $accel in auto | kvm | tcg) ;; *) fail "--accel: '$accel' is not auto, kvm or tcg" ;; esac

# ---- tools -----------------------------------------------------------------

qemu=$(command -v qemu-system-x86_64 || true)
[[ -n $qemu ]] || fail "qemu-system-x86_64 not found: apt-get install qemu-system-x86 (scripts/vm-test.sh installs everything)"
busybox=""
for candidate in /bin/busybox /usr/bin/busybox "$(command -v busybox || true)"; do
  [[ -n $candidate && -x $candidate ]] || continue
  # The initramfs has no libraries: it needs the static busybox.
  if [[ $(LC_ALL=C ldd "$candidate" 2>&1 || true) == *"not a dynamic executable"* ]]; then
    busybox=$candidate
    break
  fi
done
[[ -n $busybox ]] || fail "no static busybox found: apt-get install busybox-static"
if [[ $rxe -eq 1 && $prepare_only -eq 0 ]]; then
  for tool in ip rdma; do
    command -v "$tool" >/dev/null || fail "'$tool' not found here, and the guest runs this root: apt-get install iproute2"
  done
fi

# ---- kernel and initramfs (cached) -----------------------------------------

# Modules the guest loads, dependencies added from modules.dep. crc32_generic:
# rdma_rxe computes its ICRC with the crypto API's "crc32" and does not
# depend on it by symbol. rdma_ucm: libfabric's verbs provider connects
# through librdmacm.
guest_modules=(crc32_generic virtio_pci 9pnet_virtio 9p overlay veth ib_uverbs rdma_ucm rdma_rxe)

mkdir -p "$cache" || fail "cannot create the cache folder $cache (--cache)"
exec 9>"$cache/.lock"
flock 9

kernel_pkg=""
kernel_deb=${WEFT_VM_KERNEL_DEB:-}
if [[ -n $kernel_deb ]]; then
  [[ -f $kernel_deb ]] || fail "WEFT_VM_KERNEL_DEB=$kernel_deb: no such file"
  kernel_pkg=$(dpkg-deb -f "$kernel_deb" Package) || fail "$kernel_deb is not a .deb"
elif [[ -n ${WEFT_VM_KERNEL_PKG:-} ]]; then
  kernel_pkg=$WEFT_VM_KERNEL_PKG
else
  kernel_pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
    sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n1 || true)
  if [[ -z $kernel_pkg ]]; then
    # No apt metadata (offline): the newest kernel already cached.
    kernel_pkg=$(find "$cache" -mindepth 2 -maxdepth 2 -name vmlinuz -printf '%h\n' 2>/dev/null |
      xargs -r -n1 basename | sort -V | tail -n1)
  fi
  [[ -n $kernel_pkg ]] || fail "cannot tell which kernel to use: apt-cache knows no linux-image-amd64 (run apt-get update) and none is cached in $cache; or set WEFT_VM_KERNEL_PKG / WEFT_VM_KERNEL_DEB"
fi
kdir=$cache/$kernel_pkg

prepare_kernel() {
  local tmp deb release moddir
  tmp=$(mktemp -d "$cache/.kernel.XXXXXX")
  if [[ -z $kernel_deb ]]; then
    say "downloading $kernel_pkg (apt-get download)"
    (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$kernel_pkg" >&2) ||
      { rm -rf "$tmp"; fail "apt-get download $kernel_pkg failed (apt-get update? network?); or set WEFT_VM_KERNEL_DEB"; }
    deb=$(echo "$tmp"/*.deb)
  else
    deb=$kernel_deb
  fi
  say "extracting $(basename "$deb")"
  dpkg-deb -x "$deb" "$tmp/x" || { rm -rf "$tmp"; fail "cannot extract $deb"; }
  release=$(find "$tmp/x/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -n1)
  [[ -n $release && -f $tmp/x/boot/vmlinuz-$release ]] ||
    { rm -rf "$tmp"; fail "$deb has no /boot/vmlinuz-* and /lib/modules/*"; }
  moddir=$tmp/x/lib/modules/$release
  if [[ ! -f $moddir/modules.dep ]]; then
    # Debian generates modules.dep when the package is installed.
    "$busybox" depmod -b "$tmp/x" "$release" || { rm -rf "$tmp"; fail "depmod failed on $deb"; }
  fi

  # Dependency closure of guest_modules, each after its dependencies.
  local -A dep_of=() path_of=() visited=()
  local line mod name order=()
  while IFS= read -r line; do
    mod=${line%%:*}
    name=${mod##*/}
    name=${name%%.ko*}
    path_of[$name]=$mod
    dep_of[$name]=${line#*:}
  done <"$moddir/modules.dep"
  visit() {
    local n=$1 d dn
    [[ -n ${visited[$n]:-} ]] && return 0
    visited[$n]=1
    [[ -n ${path_of[$n]:-} ]] || {
      grep -q "/$n.ko" "$moddir/modules.builtin" 2>/dev/null && return 0
      fail "kernel $release has no module $n"
    }
    for d in ${dep_of[$n]}; do
      dn=${d##*/}
      visit "${dn%%.ko*}"
    done
    order+=("$n")
  }
  for name in "${guest_modules[@]}"; do visit "$name"; done

  mkdir -p "$tmp/k/modules"
  cp "$tmp/x/boot/vmlinuz-$release" "$tmp/k/vmlinuz"
  echo "$release" >"$tmp/k/release"
  for name in "${order[@]}"; do
    mod=$moddir/${path_of[$name]}
    case $mod in
      *.ko) cp "$mod" "$tmp/k/modules/$name.ko" ;;
      *.ko.xz) xz -dc "$mod" >"$tmp/k/modules/$name.ko" ;;
      *.ko.zst) zstd -qdc "$mod" >"$tmp/k/modules/$name.ko" ;;
      *.ko.gz) gzip -dc "$mod" >"$tmp/k/modules/$name.ko" ;;
      *) fail "unexpected module file $mod" ;;
    esac
    echo "$name.ko" >>"$tmp/k/modules/modules.order"
  done
  rm -rf "$kdir"
  mv "$tmp/k" "$kdir"
  rm -rf "$tmp"
  say "kernel $release cached in $kdir (${#order[@]} modules)"
}

if [[ ! -f $kdir/vmlinuz || ! -f $kdir/modules/modules.order ]]; then
  prepare_kernel
fi

# The initramfs depends on the init script, busybox and the modules.
initrd_key=$(cat "$vm_dir/guest-init.sh" "$busybox" "$kdir/modules/modules.order" | sha256sum | cut -c1-16)
initrd=$kdir/initramfs-$initrd_key.cpio.gz
if [[ ! -f $initrd ]]; then
  tmp=$(mktemp -d "$cache/.initrd.XXXXXX")
  mkdir -p "$tmp"/root/{bin,dev,proc,sys,tmp,lower,rw,newroot}
  cp "$busybox" "$tmp/root/bin/busybox"
  cp "$vm_dir/guest-init.sh" "$tmp/root/init"
  chmod 755 "$tmp/root/init" "$tmp/root/bin/busybox"
  cp -r "$kdir/modules" "$tmp/root/modules"
  (cd "$tmp/root" && find . | LC_ALL=C sort | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null | gzip -1) \
    >"$tmp/initrd" || fail "cannot build the initramfs"
  # Older ones (another init script), unless a run may still be reading them.
  find "$kdir" -maxdepth 1 -name 'initramfs-*.cpio.gz' -mmin +60 -delete
  mv "$tmp/initrd" "$initrd"
  rm -rf "$tmp"
  say "initramfs built: $initrd"
fi
flock -u 9

if [[ $prepare_only -eq 1 ]]; then
  say "ready: kernel $(cat "$kdir/release"), $initrd"
  exit 0
fi

# ---- the job ----------------------------------------------------------------

mkdir -p "$cache/jobs"
job=$(mktemp -d "$cache/jobs/job.XXXXXX")
qemu_pid=""
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  if [[ -n $qemu_pid ]]; then kill "$qemu_pid" 2>/dev/null || true; fi
  if [[ $keep -eq 0 ]]; then rm -rf "$job"; else say "job folder kept: $job"; fi
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

# shellcheck disable=SC2016  # $status and $? belong to the guest's script
{
  echo '#!/bin/bash'
  echo '# Generated by run-in-vm.sh: runs in the guest, chrooted in the host root.'
  echo 'status=/run/weft-vm/status'
  echo 'date +%s.%N >/run/weft-vm/started'
  if [[ $rxe -eq 1 ]]; then
    echo 'if ! bash /run/weft-vm/guest-setup.sh; then'
    echo '  echo "[vm] rxe setup failed" >&2; echo 125 >"$status"; exit 0'
    echo 'fi'
  fi
  # The caller's variables.
  declare -A passed=()
  for name in $(compgen -e); do
    pass=0
    for p in "${env_prefixes[@]}"; do [[ $name == "$p"* ]] && pass=1; done
    for n in "${env_names[@]}"; do [[ $name == "$n" ]] && pass=1; done
    [[ $pass -eq 1 ]] && passed[$name]=${!name}
  done
  for kv in "${env_values[@]}"; do passed[${kv%%=*}]=${kv#*=}; done
  for name in "${!passed[@]}"; do
    [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
    printf 'export %s=%q\n' "$name" "${passed[$name]}"
  done
  printf 'cd -- %q || { echo 125 >"$status"; exit 0; }\n' "$PWD"
  printf '%q ' "$@"
  echo
  echo 'echo $? >"$status"'
} >"$job/job.sh"
cp "$vm_dir/guest-setup.sh" "$job/guest-setup.sh"

virtfs=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
        -virtfs "local,path=$job,mount_tag=weftjob,security_model=none,multidevs=remap")
: >"$job/shares"
i=0
for dir in "${shares[@]}"; do
  dir=$(cd "$dir" 2>/dev/null && pwd) || fail "--share: no folder ${shares[$i]}"
  virtfs+=(-virtfs "local,path=$dir,mount_tag=share$i,security_model=none,multidevs=remap")
  echo "share$i $dir" >>"$job/shares"
  i=$((i + 1))
done

# Whether KVM boots this kernel here: /dev/kvm may exist yet fail (nested
# virtualization: QEMU aborts on an MSR, or the guest hangs early). Probed
# once per host kernel, the answer cached.
kvm_boots() {
  [[ -r /dev/kvm && -w /dev/kvm ]] || return 1
  local stamp
  stamp=$cache/kvm-probe.$(uname -r)
  if [[ ! -f $stamp ]]; then
    say "checking whether KVM works here (once)"
    local out
    out=$(timeout -k 2 30 "$qemu" -nodefaults -no-user-config -machine pc -accel kvm -cpu host \
      -m 512M -display none -vga none -no-reboot -kernel "$kdir/vmlinuz" -initrd "$initrd" \
      -append "console=ttyS0 panic=-1 quiet weft.probe=1" -serial stdio </dev/null 2>&1 || true)
    if [[ $out == *"[vm] probe ok"* ]]; then
      echo yes >"$stamp"
    else
      echo no >"$stamp"
    fi
  fi
  [[ $(cat "$stamp") == yes ]]
}

case $accel in
  kvm) accel_args=(-accel kvm -cpu host) ;;
  tcg) accel_args=(-accel "tcg,thread=multi" -cpu max) ;;
  auto)
    if kvm_boots; then
      accel=kvm
      accel_args=(-accel kvm -cpu host)
    else
      accel=tcg
      accel_args=(-accel "tcg,thread=multi" -cpu max)
    fi ;;
esac

append="console=ttyS0 panic=-1 oops=panic mitigations=off"
if [[ $kernel_log -eq 1 ]]; then append+=" weft.kmsg=1"; else append+=" quiet loglevel=3"; fi

shown="$*"
[[ ${#shown} -le 160 ]] || shown="${shown:0:157}..."
say "booting kernel $(cat "$kdir/release") (${accel}, ${cpus} vCPUs, ${memory}) to run: $shown"
start=$(date +%s.%N)
set +e
# stdin: QEMU's serial reads it; the guest command gets /dev/null anyway.
timeout_cmd=()
[[ $timeout_s -gt 0 ]] && timeout_cmd=(timeout -k 5 "$timeout_s")
# stdin: QEMU's serial would read it; the guest command gets /dev/null anyway.
"${timeout_cmd[@]}" "$qemu" -nodefaults -no-user-config -machine pc "${accel_args[@]}" \
  -smp "$cpus" -m "$memory" -display none -vga none -no-reboot \
  -kernel "$kdir/vmlinuz" -initrd "$initrd" -append "$append" \
  -chardev stdio,id=con0,signal=on -serial chardev:con0 \
  "${virtfs[@]}" </dev/null &
qemu_pid=$!
wait "$qemu_pid"
qemu_rc=$?
qemu_pid=""
set -e
end=$(date +%s.%N)

times=""
if [[ -f $job/started ]]; then
  times=$(awk -v s="$start" -v b="$(cat "$job/started")" -v e="$end" \
    'BEGIN { printf "boot %.1fs, command %.1fs, total %.1fs", b - s, e - b, e - s }')
fi
if [[ ${#timeout_cmd[@]} -gt 0 && ($qemu_rc -eq 124 || $qemu_rc -eq 137) ]]; then
  echo >&2
  say "timed out after ${timeout_s}s${times:+ ($times)}"
  exit 124
fi
if [[ ! -s $job/status ]]; then
  say "the VM ended without the command's exit status (QEMU exit $qemu_rc): boot or init failed, see above"
  exit 125
fi
rc=$(cat "$job/status")
say "exit status $rc${times:+ ($times)}"
exit "$rc"
}
