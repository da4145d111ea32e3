#!/bin/busybox sh
# Stage 1 of the pysched Debian guest: the /init of its small initrd (busybox).
#
# The Debian kernel has virtio and ext4 as modules, so this stage loads them (in the order of
# /lib/pysched-modules/order, written by the Makefile from the modules' own dependencies),
# mounts the root file system from the virtio disk, copies the run's files (/pysched, appended
# to the initrd by `pysched trace` as a second cpio archive) to a tmpfs on /run of the new root,
# and hands over to the run's stage-2 init there. Any failure is reported on the console as
# "=== PYSCHED STAGE1 FAILED: <why> ===" and the machine powers off.

/bin/busybox mkdir -p /proc /sys /dev /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s /bin
export PATH=/bin

fail() {
    echo "=== PYSCHED STAGE1 FAILED: $* ==="
    poweroff -f
    exit 1
}

for m in $(cat /lib/pysched-modules/order); do
    insmod "/lib/pysched-modules/$m.ko" || fail "insmod $m"
done

# virtio-blk probes asynchronously: wait up to 20 s for the disk node.
i=0
while [ ! -b /dev/vda ]; do
    i=$((i + 1))
    [ "$i" -gt 200 ] || { sleep 0.1; continue; }
    fail "no /dev/vda: the root image is not attached as a virtio disk"
done
mount -t ext4 /dev/vda /newroot || fail "cannot mount /dev/vda (ext4)"
[ -d /pysched ] || fail "the run's archive (/pysched) is missing from the initrd"
mount -t tmpfs -o mode=0755,size=64m tmpfs /newroot/run || fail "cannot mount /run"
cp -a /pysched /newroot/run/pysched || fail "cannot copy the run's files"
[ -x /newroot/run/pysched/init ] || fail "the run's archive has no executable init"
umount /proc /sys
mount --move /dev /newroot/dev || fail "cannot move /dev"
exec switch_root /newroot /run/pysched/init
fail "switch_root failed"
