# iscp (seed 000, 4.2 "Iscp"): the host's scp copies a large file (SIZE_MB) into the guest over
# ssh, through QEMU user networking and the virtio NIC; the guest's sshd and sftp-server decrypt
# it and write it to the virtio disk (/srv/incoming).
# Parameters: size_mb (the file; the region ends before the copy does, or when it does).
. /run/pysched/lib.sh
rm -f /srv/incoming/file
/usr/sbin/sshd || die "sshd did not start"
wait_for 60 "sshd to listen on port 22" listening 22
peer_start
# Steady state: the copy has written its first 8 MB.
started() {
    [ -f /srv/incoming/file ] && [ "$(stat -c %s /srv/incoming/file)" -ge 8388608 ]
}
wait_for 120 "the first 8 MB of the copy" started
roi_region
echo "iscp: $(stat -c %s /srv/incoming/file) bytes received"
