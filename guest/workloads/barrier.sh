# barrier (seed 001): our barrier program, a Jacobi relaxation of a GRID x GRID grid by THREADS
# threads with a pthread barrier after every sweep (SPLASH-2 ocean-like); IMBALANCE makes
# thread t's band (1 + t * IMBALANCE / 100) times as tall, so that some threads wait.
# Parameters: threads, grid, imbalance.
. /run/pysched/lib.sh
: "${P_THREADS:?}" "${P_GRID:?}" "${P_IMBALANCE:?}"
WORK_LOG=/tmp/barrier.out
barrier -t "$P_THREADS" -g "$P_GRID" -b "$P_IMBALANCE" -T 100000 > "$WORK_LOG" 2>&1 &
roi_over_work $!
