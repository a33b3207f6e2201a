#!/bin/busybox sh
# shellcheck shell=dash
# /init of the Soft-RoCE test VM's initramfs (run-in-vm.sh builds it with
# this file, a static busybox and the kernel modules listed in modules.order
# next to it). It loads the modules, mounts the host's root (9p, read-only)
# under a tmpfs-backed overlay so the guest may write anywhere without
# touching the host, mounts the job share that run-in-vm.sh prepared, and
# runs that job chrooted in the host's root. Then it powers the VM off.
# Messages start with "[vm]" so run-in-vm.sh's output shows who speaks.

/bin/busybox --install -s /bin
export PATH=/bin

say() { echo "[vm] $*"; }
die() {
  say "init: $*"
  # The host sees no status file and reports a failed boot.
  sync
  [ "$quiet" = 1 ] && echo 0 >/proc/sys/kernel/printk
  poweroff -f
  sleep 10
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# The initramfs has no /dev/console node: the kernel gave init no stdio.
exec </dev/console >/dev/console 2>&1

# run-in-vm.sh's check that this accelerator boots at all.
if grep -q 'weft.probe=1' /proc/cmdline; then
  say "probe ok"
  echo 0 >/proc/sys/kernel/printk
  poweroff -f
  sleep 10
fi

# Kernel messages only from errors on, unless weft.kmsg=1 asked for all.
quiet=1
grep -q 'weft.kmsg=1' /proc/cmdline && quiet=0
[ "$quiet" = 1 ] && echo 3 >/proc/sys/kernel/printk

# Modules in dependency order (modules.order lists them so).
while read -r ko; do
  [ -n "$ko" ] || continue
  insmod "/modules/$ko" 2>/tmp/insmod.err || {
    grep -q 'File exists' /tmp/insmod.err || say "insmod $ko: $(cat /tmp/insmod.err)"
  }
done </modules/modules.order

mkdir -p /lower /rw /newroot
p9opts=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o "$p9opts,ro,cache=loose" hostroot /lower || die "cannot mount the host root over 9p"

# The host root read-only, writes going to guest RAM: tools that write next
# to their inputs (ctest's Testing/ folder, caches) work and the host is
# never changed. Without overlayfs, tmpfs over the usual writable places.
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
if ! mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot \
  2>/tmp/ovl.err; then
  say "overlayfs over 9p failed ($(cat /tmp/ovl.err)); the root stays read-only except /tmp /var/tmp /root"
  mount -o bind /lower /newroot
  for d in tmp var/tmp root; do mount -t tmpfs -o mode=1777 tmpfs "/newroot/$d"; done
fi

mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mkdir -p /newroot/run/weft-vm /newroot/run/lock
mount -t 9p -o "$p9opts,rw" weftjob /newroot/run/weft-vm || die "cannot mount the job share"

# Writable host folders the caller asked for: "tag path" per line.
if [ -f /newroot/run/weft-vm/shares ]; then
  while read -r tag path; do
    [ -n "$tag" ] || continue
    mkdir -p "/newroot$path" 2>/dev/null
    mount -t 9p -o "$p9opts,rw" "$tag" "/newroot$path" || die "cannot mount share $path"
  done </newroot/run/weft-vm/shares
fi

hostname weft-vm
[ -f /newroot/run/weft-vm/job.sh ] || die "no job.sh on the job share"
# A clean environment: job.sh exports what the caller passed.
chroot /newroot /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /bin/bash /run/weft-vm/job.sh </dev/null
rc=$?
[ -f /newroot/run/weft-vm/status ] || say "job.sh ended ($rc) without writing a status"
umount /newroot/run/weft-vm 2>/dev/null
sync
# Not even "reboot: Power down" on the console.
[ "$quiet" = 1 ] && echo 0 >/proc/sys/kernel/printk
poweroff -f
sleep 10
