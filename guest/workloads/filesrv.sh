# filesrv (seed 000, 4.2 "FileSrv"): Filebench's fileserver personality as our fsbench program
# runs it: THREADS threads each creating and writing whole files, appending, reading whole
# files, deleting and stat-ing, over a set of FILES files of mean size SIZE bytes in
# directories of 20 on the virtio disk (80% created before the run).
# Parameters: threads, files, size.
. /run/pysched/lib.sh
: "${P_THREADS:?}" "${P_FILES:?}" "${P_SIZE:?}"
fsbench prepare fileserver -f "$P_FILES" -s "$P_SIZE" || die "fsbench prepare failed"
WORK_LOG=/tmp/fsbench.out
fsbench run fileserver -t "$P_THREADS" -f "$P_FILES" -s "$P_SIZE" > "$WORK_LOG" 2>&1 &
work=$!
warm_up
roi_start
roi_wait "$work"
roi_stop
stop_work "$work"
cat "$WORK_LOG"
