# chase-large / chase-small (seed 003): COPIES copies of our single-threaded pointer chase over a
# working set of KIB KiB (64-byte nodes in one random cycle): chase-large is the cache-hungry
# program (64 MiB, far beyond any cache), chase-small the cache-light one (16 KiB, within an L1
# data cache).
# Parameters: kib, copies.
. /run/pysched/lib.sh
: "${P_KIB:?}" "${P_COPIES:?}"
WORK_LOG=/tmp/ptrchase.out
# chase I: copy I, seeded with its index.
chase() {
    exec ptrchase -k "$P_KIB" -T 100000 -S "$1"
}
start_copies "$P_COPIES" chase
roi_over_work $pids
