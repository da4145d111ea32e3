# oltp (seed 000, 4.2 "OLTP"): sysbench's oltp_read_write against MariaDB in the guest, with
# THREADS client threads (one server thread each) over the unix socket: transactions of point
# selects, range selects, updates, a delete and an insert on TABLES tables of TABLE_SIZE rows,
# prepared before the run.
# Parameters: threads, tables, table_size.
. /run/pysched/lib.sh
: "${P_THREADS:?}" "${P_TABLES:?}" "${P_TABLE_SIZE:?}"
sock=/run/mysqld/mysqld.sock
mariadbd --user=mysql --socket="$sock" > /tmp/mariadbd.log 2>&1 &
server=$!
up() {
    [ -S "$sock" ] && mariadb --socket="$sock" -e 'SELECT 1' > /dev/null 2>&1
}
wait_for 180 "mariadbd to accept connections" up
mariadb --socket="$sock" -e 'CREATE DATABASE IF NOT EXISTS sbtest' || die "cannot create sbtest"
sb="sysbench oltp_read_write --db-driver=mysql --mysql-user=root --mysql-socket=$sock \
    --tables=$P_TABLES --table-size=$P_TABLE_SIZE"
$sb prepare > /tmp/sysbench-prepare.out 2>&1 || { cat /tmp/sysbench-prepare.out; die "sysbench prepare failed"; }
WORK_LOG=/tmp/sysbench.out
$sb --threads="$P_THREADS" --time=0 --events=0 --report-interval=0 run \
    > "$WORK_LOG" 2>&1 &
work=$!
# Connecting the threads takes a while under emulation: the steady state starts after.
running() {
    grep -q "Threads started" "$WORK_LOG"
}
wait_for 300 "sysbench's threads to start" running
warm_up
roi_region "$work" "$server"
stop_work "$work"
tail -n 25 "$WORK_LOG"
