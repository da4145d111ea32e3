# netserver (seed 002): our netserver answers requests for SIZES bytes (10 B to 10 MB) from a
# host client that keeps CONNECTIONS persistent connections, each issuing PER_CONNECTION
# requests before reconnecting (NEWTOS's 8 connections x 10 requests), through QEMU user
# networking and the virtio NIC.
# Parameters (host side, for the client): sizes, connections, per_connection.
. /run/pysched/lib.sh
WORK_LOG=/tmp/netserver.out
netserver -p 7000 > "$WORK_LOG" 2>&1 &
server=$!
wait_for 60 "netserver to listen on port 7000" listening 7000
peer_start
wait_for 120 "the host's client to connect" connected 7000
roi_over_work "$server"
