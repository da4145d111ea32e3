# mailsrv (seed 000, 4.2 "MailSrvIO"): Filebench's varmail personality as our fsbench program
# runs it: THREADS threads each deleting a mail file, creating one (append + fsync), reading
# one whole and appending to it (+ fsync), and reading another, over FILES small files of mean
# size SIZE bytes in one directory on the virtio disk.
# Parameters: threads, files, size.
. /run/pysched/lib.sh
fsbench_workload varmail
