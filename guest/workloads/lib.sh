# Shell functions shared by the guest's stage-2 init and the workload scripts (dash).
#
# The busybox test guest's /init (guest/init.sh) uses roi_start / roi_stop too; pysched trace
# sends this file with every run (in the run's archive), so it needs no image rebuild.
#
# roi_region (the workloads, the Debian guest's --cmd) has roi-wait open and close the region of
# interest around its own wait, so that no harness process starts or exits inside it. roi_start /
# roi_stop (the busybox test guest) open and close it with the roi program. The guest's /proc/interrupts and
# /proc/stat are read just outside the region, into files on a RAM file system, and printed to
# the console only after it has closed: the region holds neither the reading processes nor the
# serial console's interrupts of printing them (about 2 kB per snapshot). The console lines are
# what pysched parses (pysched/capture/console.py). Before the region the guest's devices are read
# too (device_snapshot), to tell which device a device_requests row wrote to.

PYSCHED_ROI_FLAG=/run/pysched/roi-open
PYSCHED_PROC_DIR=/run/pysched/proc

# From here on this shell and what it starts (roi, cat) run at a high priority: under a load of
# dozens of runnable threads each of those small processes would otherwise wait seconds for a
# CPU and stretch the region. Work started earlier keeps nice 0.
roi_raise_priority() {
    renice -n -15 -p $$ > /dev/null
}

# A workload opens its region while its work runs, so it raises its priority first; a --cmd
# command starts after roi_start and must keep the normal priority.
roi_start() {
    if [ "${PYSCHED_MODE:-}" != cmd ]; then
        roi_raise_priority
    fi
    # The flag and the snapshot first: their files and processes stay out of the region.
    : > "$PYSCHED_ROI_FLAG"
    proc_snapshot before
    roi begin
}

roi_stop() {
    roi end
    proc_snapshot after
    rm -f "$PYSCHED_ROI_FLAG"
    proc_print before
    proc_print after
}

# proc_snapshot WHEN: read /proc/interrupts and /proc/stat into $PYSCHED_PROC_DIR (and, before
# the region, the devices).
proc_snapshot() {
    mkdir -p "$PYSCHED_PROC_DIR"
    if [ "$1" = before ]; then
        device_snapshot
    fi
    cat /proc/interrupts > "$PYSCHED_PROC_DIR/interrupts.$1"
    cat /proc/stat > "$PYSCHED_PROC_DIR/stat.$1"
}

# device_snapshot: the guest's I/O memory and port ranges (/proc/iomem, /proc/ioports: the BARs
# of each PCI device, by slot), and one line per PCI device: slot, vendor, device, class, its
# driver and, for a virtio device, the virtio driver bound to it (virtio_blk, virtio_net).
device_snapshot() {
    cat /proc/iomem > "$PYSCHED_PROC_DIR/iomem"
    cat /proc/ioports > "$PYSCHED_PROC_DIR/ioports"
    for _d in /sys/bus/pci/devices/*; do
        [ -e "$_d/vendor" ] || continue
        _drv=$(readlink "$_d/driver" 2> /dev/null)
        _drv=${_drv##*/}
        _vdrv=
        for _v in "$_d"/virtio*; do
            if [ -e "$_v/driver" ]; then
                _vdrv=$(readlink "$_v/driver")
                _vdrv=${_vdrv##*/}
            fi
        done
        echo "${_d##*/} $(cat "$_d/vendor") $(cat "$_d/device") $(cat "$_d/class")" \
            "${_drv:--} ${_vdrv:--}"
    done > "$PYSCHED_PROC_DIR/pci"
}

# proc_print WHEN: the snapshot on the console, each file under its "=== ... ===" header.
proc_print() {
    if [ "$1" = before ] && [ -e "$PYSCHED_PROC_DIR/iomem" ]; then
        echo "=== /proc/iomem before ==="
        cat "$PYSCHED_PROC_DIR/iomem"
        echo "=== /proc/ioports before ==="
        cat "$PYSCHED_PROC_DIR/ioports"
        echo "=== /sys/bus/pci before ==="
        cat "$PYSCHED_PROC_DIR/pci"
    fi
    echo "=== /proc/interrupts $1 ==="
    cat "$PYSCHED_PROC_DIR/interrupts.$1"
    echo "=== /proc/stat $1 ==="
    cat "$PYSCHED_PROC_DIR/stat.$1"
}

# roi_region [ROI-WAIT ARGUMENTS...]: the region of interest is roi-wait's wait (roi-wait -r:
# PIDs to watch, or -x and a command to run; see roi-wait.c), with the /proc snapshots just
# outside it. Inside the region the harness is only the end of roi-wait's poll().
roi_region() {
    if [ "${PYSCHED_MODE:-}" != cmd ]; then
        roi_raise_priority
    fi
    : > "$PYSCHED_ROI_FLAG"
    proc_snapshot before
    roi_wait -r "$@"
    _roi_rc=$?
    proc_snapshot after
    rm -f "$PYSCHED_ROI_FLAG"
    proc_print before
    proc_print after
    return $_roi_rc
}

roi_close_if_open() {
    if [ -e "$PYSCHED_ROI_FLAG" ]; then
        roi_stop
    fi
}

# The steady state: wait until the region's bound is reached, or until the process(es) given
# exit. PYSCHED_ROI_SECONDS is the bound in guest seconds; PYSCHED_CONTROL, when set, is the
# serial port on which the host says "stop" (pysched trace --roi-insns).
roi_wait() {
    set -- -t "${PYSCHED_ROI_SECONDS:-10}" ${PYSCHED_CONTROL:+-c "$PYSCHED_CONTROL"} "$@"
    roi-wait "$@"
}

# roi_over_work PID...: the region of a workload whose work runs in the background as PID...:
# let it reach its steady state, then the region (roi_region: until the bound, or until a PID
# exits), then stop the work.
roi_over_work() {
    warm_up
    roi_region "$@"
    stop_work "$@"
}

# start_copies N FUNCTION: run FUNCTION 0, FUNCTION 1, ... FUNCTION N-1 side by side in the
# background, their output appended to $WORK_LOG; their PIDs in $pids. (A function that ends
# by running a program execs it, so that its PID is the program's.)
start_copies() {
    pids=
    _i=0
    while [ "$_i" -lt "$1" ]; do
        "$2" "$_i" >> "$WORK_LOG" 2>&1 &
        pids="$pids $!"
        _i=$((_i + 1))
    done
}

# fsbench_workload PERSONALITY: filesrv and mailsrv: our fsbench in a Filebench personality,
# P_THREADS threads over P_FILES files of mean size P_SIZE bytes, created before the region.
fsbench_workload() {
    : "${P_THREADS:?}" "${P_FILES:?}" "${P_SIZE:?}"
    fsbench prepare "$1" -f "$P_FILES" -s "$P_SIZE" || die "fsbench prepare failed"
    WORK_LOG=/tmp/fsbench.out
    fsbench run "$1" -t "$P_THREADS" -f "$P_FILES" -s "$P_SIZE" > "$WORK_LOG" 2>&1 &
    roi_over_work $!
    cat "$WORK_LOG"
}

# Fail the workload with a message on the console.
die() {
    echo "workload: $*"
    exit 1
}

# Let the workload reach its steady state before the region opens.
warm_up() {
    sleep "${PYSCHED_WARMUP:-1}"
}

# Tell the host to start its peer (ssh client, load generator): pysched watches the console
# for this line.
peer_start() {
    echo "=== PYSCHED PEER START ==="
}

# wait_for SECONDS WHAT SHELL-TEST...: poll the test every 0.2 s until it succeeds; fail the
# workload (naming WHAT) when it has not within SECONDS.
wait_for() {
    _limit=$1 _what=$2
    shift 2
    _t0=$(date +%s)
    until "$@"; do
        if [ $(($(date +%s) - _t0)) -ge "$_limit" ]; then
            die "timed out after $_limit s waiting for $_what"
        fi
        sleep 0.2
    done
}

# listening PORT: a TCP socket listens on PORT.
listening() {
    ss -Htln "sport = :$1" | grep -q .
}

# connected PORT: an established TCP connection on local port PORT.
connected() {
    ss -Htn state established "sport = :$1" | grep -q .
}

# Drop the page, dentry and inode caches, so that the next reads go to the disk.
drop_caches() {
    sync
    echo 3 > /proc/sys/vm/drop_caches
}

# stop_work PID...: end the workload's processes after the region. Each must still be running:
# one that ended by itself ended the region early (roi_wait returns when a PID exits), which
# fails the workload; the tail of $WORK_LOG (where a script sends its work's output), if set,
# shows why.
stop_work() {
    for _p in "$@"; do
        if ! kill -0 "$_p" 2>/dev/null; then
            if [ -n "${WORK_LOG:-}" ] && [ -s "$WORK_LOG" ]; then
                echo "--- last lines of $WORK_LOG"
                tail -n 20 "$WORK_LOG"
            fi
            die "process $_p ended before the region did"
        fi
    done
    kill "$@" 2>/dev/null
    for _p in "$@"; do
        wait "$_p" 2>/dev/null
    done
    return 0
}
