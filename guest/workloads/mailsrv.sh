# mailsrv (seed 000, 4.2 "MailSrvIO"): Filebench's varmail personality as our fsbench program
# runs it: THREADS threads each deleting a mail file, creating one (append + fsync), reading
# one whole and appending to it (+ fsync), and reading another, over FILES small files of mean
# size SIZE bytes in one directory on the virtio disk.
# Parameters: threads, files, size.
. /run/pysched/lib.sh
: "${P_THREADS:?}" "${P_FILES:?}" "${P_SIZE:?}"
fsbench prepare varmail -f "$P_FILES" -s "$P_SIZE" || die "fsbench prepare failed"
WORK_LOG=/tmp/fsbench.out
fsbench run varmail -t "$P_THREADS" -f "$P_FILES" -s "$P_SIZE" > "$WORK_LOG" 2>&1 &
work=$!
warm_up
roi_start
roi_wait "$work"
roi_stop
stop_work "$work"
cat "$WORK_LOG"
