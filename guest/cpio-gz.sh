#!/bin/sh
# Archive a staged tree as an initramfs: a gzip-compressed newc cpio (guest/Makefile,
# guest/debian/Makefile, system-map.sh).
#
#   cpio-gz.sh DIR OUT
#
# Owner root, names sorted, times zeroed: the same tree always gives the same bytes. Written
# to OUT.tmp, then renamed.
set -eu
dir=$1 out=$2
find "$dir" -mindepth 1 -exec touch -h -d @0 {} +
(cd "$dir" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --reproducible --quiet) \
  | gzip -9n > "$out.tmp"
mv "$out.tmp" "$out"
echo "guest: $out ($(stat -c %s "$out") bytes)"
