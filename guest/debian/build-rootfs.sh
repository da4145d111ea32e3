#!/usr/bin/env bash
# Build the Debian guest's root file system image (run by guest/debian/Makefile, as root).
#
#   build-rootfs.sh OUT_DIR BIN_DIR MIRROR
#
# debootstrap (minbase + packages.txt, debs cached in OUT_DIR/cache) into OUT_DIR/rootfs, then
# configure it for our own init (no systemd), install the static programs of BIN_DIR in
# /usr/local/bin, generate the workloads' data (the find tree, the dss database), add an ssh
# key for the host's scp, drop documentation and apt caches, and turn the tree into an ext4
# image with mke2fs -d (no loop mount): OUT_DIR/root.img. OUT_DIR/packages.lock lists the
# installed packages and versions; OUT_DIR/ssh/ holds the host's key for the guest's root.
set -euo pipefail

out=$1 bins=$2 mirror=$3
here=$(cd "$(dirname "$0")" && pwd)
rootfs=$out/rootfs
img_size=3G
log() { printf '[guest-debian] %s\n' "$*"; }
die() { printf 'guest-debian: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "building the image needs root (debootstrap, file ownership)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (make setup installs it)"
command -v mke2fs >/dev/null || die "mke2fs is not installed (package e2fsprogs)"
mkdir -p "$out/cache"
# The tree, its image and the deb cache take about 1.5 GB at peak.
avail_kb=$(df -Pk "$out" | awk 'NR == 2 { print $4 }')
if [ "${avail_kb:-0}" -lt 2000000 ]; then
  die "only $((avail_kb / 1024)) MB free in $out; the image build needs about 2 GB"
fi

pkgs=$(sed -e 's/#.*//' "$here/packages.txt" | tr -s ' \t\n' ',' | sed -e 's/^,//' -e 's/,$//')
rm -rf "$rootfs"
log "debootstrap minbase + $pkgs from $mirror"
if ! debootstrap --variant=minbase --cache-dir="$out/cache" --include="$pkgs" \
     bookworm "$rootfs" "$mirror" > "$out/debootstrap.log" 2>&1; then
  tail -n 20 "$out/debootstrap.log" >&2
  die "debootstrap failed (log: $out/debootstrap.log)"
fi

# --- configuration: our init runs the services by hand -------------------------------------
echo pysched > "$rootfs/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tpysched\n::1\tlocalhost\n' > "$rootfs/etc/hosts"
# No systemd: PAM's session modules would only log failures.
mkdir -p "$rootfs/etc/ssh/sshd_config.d"
cat > "$rootfs/etc/ssh/sshd_config.d/pysched.conf" <<'CONF'
PermitRootLogin prohibit-password
UsePAM no
UseDNS no
PrintMotd no
CONF
cat > "$rootfs/etc/mysql/mariadb.conf.d/90-pysched.cnf" <<'CONF'
# Sized for a guest with 512 MB-1 GB of RAM and many sysbench threads.
[mysqld]
innodb_buffer_pool_size = 64M
innodb_log_file_size = 32M
max_connections = 300
skip-name-resolve
CONF
# The host's scp and ssh log in as root with this key (QEMU user networking; the host end is
# 127.0.0.1 only).
rm -rf "$out/ssh"; mkdir -p "$out/ssh" "$rootfs/root/.ssh"
ssh-keygen -q -t ed25519 -N '' -C pysched-host -f "$out/ssh/id_ed25519"
install -m 0600 "$out/ssh/id_ed25519.pub" "$rootfs/root/.ssh/authorized_keys"
chmod 0700 "$rootfs/root/.ssh"
# The host key, for the host's known_hosts (pysched pins it instead of trusting any key).
cp "$rootfs/etc/ssh/ssh_host_ed25519_key.pub" "$out/ssh/guest_host_key.pub"
# Built through sudo: the user who runs pysched must be able to read the key (ssh insists on
# its being private to them).
if [ -n "${SUDO_UID:-}" ]; then
  chown -R "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$out/ssh"
fi

# --- our programs and the workloads' data ----------------------------------------------------
install -m 0755 "$bins"/* "$rootfs/usr/local/bin/"
python3 "$here/gen_tree.py" "$rootfs/srv/tree"
mkdir -p "$rootfs/srv/dss"
python3 "$here/gen_tpch.py" "$rootfs/srv/dss/tpch.db"
mkdir -p "$rootfs/srv/files" "$rootfs/srv/incoming"

# --- lean: no docs, no apt lists or caches, no logs ------------------------------------------
chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}\n' > "$out/packages.lock"
rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
       "$rootfs"/usr/share/locale/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* \
       "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*

log "mke2fs -d: $(du -sm "$rootfs" | cut -f1) MB into a $img_size ext4 image"
rm -f "$out/root.img.tmp"
mke2fs -q -t ext4 -L pysched-root -d "$rootfs" "$out/root.img.tmp" "$img_size"
mv "$out/root.img.tmp" "$out/root.img"
rm -rf "$rootfs"
log "$out/root.img ($(du -m "$out/root.img" | cut -f1) MB used)"
