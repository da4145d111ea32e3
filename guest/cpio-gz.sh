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
# Two steps, not one pipe: dash has no pipefail, and a failed cpio must not leave an empty
# archive behind gzip's success.
(cd "$dir" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --reproducible --quiet) \
  > "$out.cpio.tmp" || { rm -f "$out.cpio.tmp"; echo "guest: cpio failed archiving $dir" >&2; exit 1; }
gzip -9n < "$out.cpio.tmp" > "$out.tmp"
rm -f "$out.cpio.tmp"
mv "$out.tmp" "$out"
echo "guest: $out ($(stat -c %s "$out") bytes)"
