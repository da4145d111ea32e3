# dss (seed 000, 4.2 "DSS"): TPC-H query 2 (minimum cost supplier) on a TPC-H-like SQLite
# database at scale 0.1 (/srv/dss/tpch.db, 16 MB: part 20,000 rows, partsupp 80,000), run by
# STREAMS concurrent sqlite3 processes, each executing batches of BATCH queries with random
# substitution parameters (size, type, region) as TPC-H's qgen draws them. One warm-up query
# fills the page cache first (the paper's 1 GB MySQL database sits in its buffer pool).
# Parameters: streams, batch.
. /run/pysched/lib.sh
: "${P_STREAMS:?}" "${P_BATCH:?}"
db=/srv/dss/tpch.db
[ -r "$db" ] || die "$db is missing from the image"

# q2 SEED N: N instances of query 2 with random parameters.
q2() {
    awk -v seed="$1" -v n="$2" 'BEGIN {
        srand(seed)
        split("TIN NICKEL BRASS STEEL COPPER", t, " ")
        split("AFRICA AMERICA ASIA EUROPE", r, " ")
        r[5] = "MIDDLE EAST"
        for (i = 0; i < n; i++) {
            size = int(rand() * 50) + 1; type = t[int(rand() * 5) + 1]
            region = r[int(rand() * 5) + 1]
            printf "SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment\n"
            printf "FROM part, supplier, partsupp, nation, region\n"
            printf "WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = %d\n", size
            printf "  AND p_type LIKE '\''%%%s'\'' AND s_nationkey = n_nationkey\n", type
            printf "  AND n_regionkey = r_regionkey AND r_name = '\''%s'\''\n", region
            printf "  AND ps_supplycost = (SELECT min(ps_supplycost) FROM partsupp, supplier, nation, region\n"
            printf "    WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND s_nationkey = n_nationkey\n"
            printf "      AND n_regionkey = r_regionkey AND r_name = '\''%s'\'')\n", region
            printf "ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100;\n"
        }
    }'
}

q2 0 1 | sqlite3 -batch "$db" > /tmp/dss-warmup.out || die "the warm-up query failed"
echo "dss: warm-up query returned $(wc -l < /tmp/dss-warmup.out) rows"
WORK_LOG=/tmp/dss.err
# stream I: stream I + 1's batches, each with its own seed (the stream's number, then the
# batch's), until the work is stopped.
stream() {
    s=$(($1 + 1)) k=0
    while :; do
        k=$((k + 1))
        q2 "$s$k" "$P_BATCH" | sqlite3 -batch "$db" > /dev/null || exit 1
    done
}
start_copies "$P_STREAMS" stream
roi_over_work $pids
echo "dss: $P_STREAMS streams ran"
