# oscp (seed 000, 4.2 "Oscp"): the host's scp copies a large file (SIZE_MB, written before the
# run and dropped from the page cache, so it is read from the virtio disk) out of the guest
# over ssh: the guest's sftp-server reads it and sshd encrypts and sends it through the virtio
# NIC and QEMU user networking.
# Parameters: size_mb.
. /run/pysched/lib.sh
: "${P_SIZE_MB:?}"
mkdir -p /srv/outgoing
dd if=/dev/zero of=/srv/outgoing/file bs=1M count="$P_SIZE_MB" status=none \
    || die "cannot write the $P_SIZE_MB MB file"
drop_caches
/usr/sbin/sshd || die "sshd did not start"
wait_for 60 "sshd to listen on port 22" listening 22
peer_start
sending() {
    pgrep -x sftp-server > /dev/null
}
wait_for 120 "the host's scp to connect" sending
warm_up
roi_region
echo "oscp: done"
