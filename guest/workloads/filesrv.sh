# filesrv (seed 000, 4.2 "FileSrv"): Filebench's fileserver personality as our fsbench program
# runs it: THREADS threads each creating and writing whole files, appending, reading whole
# files, deleting and stat-ing, over a set of FILES files of mean size SIZE bytes in
# directories of 20 on the virtio disk (80% created before the run).
# Parameters: threads, files, size.
. /run/pysched/lib.sh
fsbench_workload fileserver
