# Shell functions shared by the guest's stage-2 init and the workload scripts (dash).
#
# The busybox test guest's /init (guest/init.sh) uses roi_start / roi_stop too.
#
# roi_start / roi_stop open and close the region of interest. The console lines they print and
# the marks 101-104 around the /proc/interrupts readings are what pysched and the tests parse
# (pysched/capture/console.py).

PYSCHED_ROI_FLAG=/run/pysched/roi-open

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
    # The flag first: its file creation stays out of the region.
    : > "$PYSCHED_ROI_FLAG"
    roi begin
    echo "=== /proc/interrupts before ==="
    roi mark 101
    cat /proc/interrupts
    roi mark 102
    echo "=== /proc/stat before ==="
    cat /proc/stat
}

roi_stop() {
    echo "=== /proc/interrupts after ==="
    roi mark 103
    cat /proc/interrupts
    roi mark 104
    echo "=== /proc/stat after ==="
    cat /proc/stat
    roi end
    rm -f "$PYSCHED_ROI_FLAG"
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
# let it reach its steady state, open the region, wait for the bound (or for a PID to exit),
# close the region and stop the work.
roi_over_work() {
    warm_up
    roi_start
    roi_wait "$@"
    roi_stop
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
