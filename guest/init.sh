#!/bin/busybox sh
# /init of the pysched test guest (busybox initramfs, console on ttyS0).
#
# Runs /cmd.sh, which is not part of the base image: `pysched trace` appends a second cpio
# archive holding it (the kernel unpacks concatenated archives in order). The region of interest
# (roi begin ... roi end) spans the command and the /proc snapshots around it; the console
# lines below are what pysched parses, so keep their wording in step with
# pysched/capture/command.py.

/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root
cd /

echo "=== PYSCHED BEGIN ==="
roi begin
# roi marks 101-104 bracket the two readings of /proc/interrupts, so that tests can compare
# the traced interrupts with the kernel's counts over the same window.
echo "=== /proc/interrupts before ==="
roi mark 101
cat /proc/interrupts
roi mark 102
echo "=== /proc/stat before ==="
cat /proc/stat
if [ -f /cmd.sh ]; then
    # stdin from /dev/null: nothing ever types on the console, so a read would hang the run.
    sh /cmd.sh </dev/null 2>&1
    rc=$?
else
    echo "pysched: /cmd.sh is missing (the run's command archive was not appended to the initrd)"
    rc=127
fi
echo "=== /proc/interrupts after ==="
roi mark 103
cat /proc/interrupts
roi mark 104
echo "=== /proc/stat after ==="
cat /proc/stat
roi end
echo "=== PYSCHED EXIT $rc ==="
sync
poweroff -f
# Not reached; should poweroff fail, init exiting panics the kernel and panic=-1 with QEMU's
# -no-reboot ends the run anyway.
