# apache (seed 000, 4.2 "Apache"): Debian's apache2 (event MPM, default site) serving its
# 10 KB index page to ApacheBench on the host, which keeps CONCURRENCY requests in flight
# through QEMU user networking and the virtio NIC, a new TCP connection per request.
# Parameters (host side, for ab): concurrency, requests, path.
. /run/pysched/lib.sh
. /etc/apache2/envvars
mkdir -p "$APACHE_RUN_DIR" "$APACHE_LOCK_DIR" "$APACHE_LOG_DIR"
rm -f "$APACHE_LOG_DIR/access.log"
apache2 -k start || die "apache2 did not start"
wait_for 60 "apache2 to listen on port 80" listening 80
peer_start
# Steady state: ab is running when the access log has a few hundred requests.
served() {
    [ "$(wc -l < "$APACHE_LOG_DIR/access.log" 2>/dev/null || echo 0)" -ge 200 ]
}
wait_for 120 "the first 200 requests from ab" served
roi_region
echo "apache: $(wc -l < "$APACHE_LOG_DIR/access.log") requests served"
