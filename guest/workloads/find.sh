# find (seed 000, 4.2 "Find"): `find / -xdev -name NAME` over the root file system, which holds
# a generated tree of 1,884 directories and 20,736 files (/srv/tree) besides the system. The
# caches are dropped before every pass, so directories are read from the virtio disk. Like the
# paper's single-threaded benchmarks, INSTANCES walks run side by side (0: one per vCPU).
# Parameters: name (a name no file has, so the whole tree is walked), instances.
. /run/pysched/lib.sh
: "${P_NAME:?}" "${P_INSTANCES:?}"
WORK_LOG=/tmp/find.out
n=$P_INSTANCES
[ "$n" -gt 0 ] || n=$PYSCHED_VCPUS
walk() {
    while :; do
        drop_caches
        find / -xdev -name "$P_NAME" -print
    done
}
start_copies "$n" walk
roi_over_work $pids
echo "find: $(grep -c . "$WORK_LOG") matches printed"
