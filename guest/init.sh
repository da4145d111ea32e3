#!/bin/busybox sh
# /init of the pysched test guest (busybox initramfs, console on ttyS0).
#
# Runs /cmd.sh, which is not part of the base image: `pysched trace` appends a second cpio
# archive holding it and the current /run/pysched/lib.sh (the kernel unpacks concatenated
# archives in order). The region of interest (roi begin ... roi end) spans the command: roi_start
# and roi_stop of the Debian guest's workloads/lib.sh read the /proc snapshots just outside it
# and print them after it, in the console lines pysched parses.

/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root
cd /

PYSCHED_MODE=cmd
. /run/pysched/lib.sh

echo "=== PYSCHED BEGIN ==="
roi_start
if [ -f /cmd.sh ]; then
    # stdin from /dev/null: nothing ever types on the console, so a read would hang the run.
    sh /cmd.sh </dev/null 2>&1
    rc=$?
else
    echo "pysched: /cmd.sh is missing (the run's command archive was not appended to the initrd)"
    rc=127
fi
roi_stop
echo "=== PYSCHED EXIT $rc ==="
sync
poweroff -f
# Not reached; should poweroff fail, init exiting panics the kernel and panic=-1 with QEMU's
# -no-reboot ends the run anyway.
