# chase-large / chase-small (seed 003): COPIES copies of our single-threaded pointer chase over a
# working set of KIB KiB (64-byte nodes in one random cycle): chase-large is the cache-hungry
# program (64 MiB, far beyond any cache), chase-small the cache-light one (16 KiB, within an L1
# data cache).
# Parameters: kib, copies.
. /run/pysched/lib.sh
: "${P_KIB:?}" "${P_COPIES:?}"
WORK_LOG=/tmp/ptrchase.out
pids=
i=0
while [ "$i" -lt "$P_COPIES" ]; do
    ptrchase -k "$P_KIB" -T 100000 -S "$i" >> "$WORK_LOG" 2>&1 &
    pids="$pids $!"
    i=$((i + 1))
done
warm_up
roi_start
roi_wait $pids
roi_stop
stop_work $pids
