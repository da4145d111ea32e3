#!/bin/sh
# Stage 2 of the pysched Debian guest: PID 1 after switch_root (dash, no systemd).
#
# `pysched trace` supplies this file and the rest of /run/pysched with every run (see
# pysched/capture/guest.py), so that changing it or a workload script needs no image rebuild:
#   /run/pysched/init           this script
#   /run/pysched/run.env        PYSCHED_MODE (cmd | workload), PYSCHED_WORKLOAD and its
#                               PYSCHED_SCRIPT, the region's bounds, parameters (P_*)
#   /run/pysched/cmd.sh         the command (--cmd runs)
#   /run/pysched/lib.sh         roi_start / roi_stop and helpers shared with the workloads
#   /run/pysched/workloads/     the workload scripts (guest/workloads/*.sh)
#
# It mounts the virtual file systems, configures the network (QEMU user networking: address
# 10.0.2.15, gateway 10.0.2.2), sends the loaded modules' symbols to the host on ttyS1, prints
# "=== PYSCHED BEGIN ===", runs the command inside the region of interest (a workload script
# places the region itself), prints "=== PYSCHED EXIT <status> ===" and powers off.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
HOME=/root
LANG=C
export PATH HOME LANG
cd /

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=000 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /run/lock /run/sshd /run/mysqld /run/apache2 /run/lock/apache2
chown mysql:mysql /run/mysqld 2>/dev/null
hostname pysched
ip link set lo up
if ip link show eth0 >/dev/null 2>&1; then
    ip link set eth0 up
    ip addr add 10.0.2.15/24 dev eth0
    ip route add default via 10.0.2.2
fi

. /run/pysched/run.env
. /run/pysched/lib.sh

# The symbols of the loaded modules (virtio, ext4, ...), which System.map lacks: kallsyms lines
# "address type name [module]" to the host through the second serial port (raw, so that the
# tty neither adds carriage returns nor echoes); and the kernel's own _stext line, with which
# the host checks the KASLR slide the plugin found.
if [ -c /dev/ttyS1 ] && stty -F /dev/ttyS1 raw -echo 2>/dev/null; then
    grep -E ']$| _stext$' /proc/kallsyms > /dev/ttyS1
fi

echo "=== PYSCHED BEGIN ==="
case "$PYSCHED_MODE" in
cmd)
    # roi-wait runs the command inside the region it opens (roi_region), at nice 0, while the
    # harness runs raised. Without a bound (--roi-seconds, or the backstop of --roi-insns) the
    # region lasts as long as the command; with one, the host may end the region first.
    status=/run/pysched/cmd.status
    roi_raise_priority
    # stdin from /dev/null: nothing ever types on the console, so a read would hang the run.
    roi_region -t "${PYSCHED_ROI_SECONDS:-inf}" -x -n 0 -s "$status" sh /run/pysched/cmd.sh \
        </dev/null 2>&1
    rc=$?
    case "$(cat "$status" 2>/dev/null)" in
    "exit "*) rc=$(sed 's/^exit //' "$status") ;;
    "signal "*) rc=$((128 + $(sed 's/^signal //' "$status"))) ;;
    stopped)
        echo "pysched: the command was stopped when the region ended (the instruction bound, or the time backstop)"
        rc=0 ;;
    *) echo "pysched: roi-wait could not run the command (exit $rc)" ;;
    esac
    ;;
workload)
    script=/run/pysched/workloads/$PYSCHED_SCRIPT
    if [ -f "$script" ]; then
        sh "$script" </dev/null 2>&1
        rc=$?
    else
        echo "pysched: no workload script $script"
        rc=127
    fi
    # A script that failed inside its region still closes it, so the trace ends cleanly.
    roi_close_if_open
    ;;
*)
    echo "pysched: bad PYSCHED_MODE '$PYSCHED_MODE' in /run/pysched/run.env"
    rc=2
    ;;
esac
echo "=== PYSCHED EXIT $rc ==="
# An orderly end: stop every other process (servers, the workload's leftovers), make the root
# file system read-only so that nothing is written while devices shut down, then power off.
# The host stops its peer when it sees the EXIT line, so no traffic arrives meanwhile.
kill -TERM -1 2>/dev/null
sleep 0.3
kill -KILL -1 2>/dev/null
sync
mount -o remount,ro / 2>/dev/null || sync
# minbase has no poweroff without an init system: reboot(2) with LINUX_REBOOT_CMD_POWER_OFF
# through perl (perl-base is essential), or magic SysRq should that fail. PID 1 must not exit
# meanwhile (a panic), so it waits in the shell.
perl -e 'syscall(169, 0xfee1dead, 672274793, 0x4321fedc, 0); exit 1' 2>/dev/null \
    || echo o > /proc/sysrq-trigger
while :; do sleep 1; done
