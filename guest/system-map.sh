#!/usr/bin/env bash
# Make a kernel's System.map from its own /proc/kallsyms (run by guest/Makefile).
#
#   system-map.sh VMLINUZ OUT KERNEL_RELEASE "KERNEL COMMAND LINE"
#
# Debian's linux-image package carries only a placeholder System.map (the real one is in the
# -dbg package, an 860 MB download). The kernel knows its symbols, though: this boots it once
# under QEMU TCG, with the command line the traces use (nokaslr, so the addresses are those of
# every traced boot), on a throw-away initramfs (busybox and an /init that sends
# /proc/kallsyms through the second serial port, raw, into a file), then keeps the kernel's
# own symbols (module lines, "ADDRESS TYPE NAME [module]", are dropped: the Debian guest
# records its modules' at every run) sorted as System.map is, as "ADDRESS TYPE NAME" lines.
# Compared with the -dbg package's map for 6.1.0-56-amd64: the same symbols, addresses and
# order, but for the types of per-CPU symbols (current_task, ...: kallsyms says "A" where
# System.map says "D" or "d"; same addresses, offsets in the per-CPU area) and 14 absolute and
# linker symbols kallsyms leaves out (kallsyms_*, init_per_cpu__*, phys_startup_64, text_size,
# kexec_control_code_size).
set -euo pipefail

die() { printf 'guest: system-map: %s\n' "$*" >&2; exit 1; }
[ $# = 4 ] || die "usage: system-map.sh VMLINUZ OUT KERNEL_RELEASE 'KERNEL COMMAND LINE'"
vmlinuz=$1 out=$2 release=$3 append=$4
busybox=${BUSYBOX:-/bin/busybox}
qemu=${QEMU:-qemu-system-x86_64}
# Where the kernel's image starts with nokaslr: a different _text means the map is not the one
# traced boots see.
text_base=ffffffff81000000

case " $append " in
*" nokaslr "*) ;;
*) die "the kernel command line '$append' lacks nokaslr: the addresses would change every boot" ;;
esac
[ -f "$vmlinuz" ] || die "$vmlinuz is missing"
[ -x "$busybox" ] || die "$busybox is missing: install busybox-static (make setup does)"
command -v "$qemu" >/dev/null || die "$qemu is not installed (make setup installs it)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pysched-sysmap.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/root/bin" "$tmp/root/proc" "$tmp/root/dev" "$tmp/root/tmp"
install -m 0755 "$busybox" "$tmp/root/bin/busybox"
# The symbols are counted and compressed (a fifth of the bytes to send through the emulated
# UART, the slow part) before they are sent: a header line with the kernel release, the number
# of lines and of gzip bytes, the gzip data, an end line. Counts and gzip's CRC catch a cut-off
# or garbled transfer.
cat > "$tmp/root/init" <<'INIT'
#!/bin/busybox sh
b=/bin/busybox
$b mount -t proc proc /proc
$b mount -t devtmpfs devtmpfs /dev
echo 0 > /proc/sys/kernel/kptr_restrict
$b cat /proc/kallsyms > /tmp/kallsyms
n=$($b wc -l < /tmp/kallsyms)
$b gzip -1 /tmp/kallsyms
$b stty -F /dev/ttyS1 raw -echo
{
    echo "=== KALLSYMS $($b uname -r) $n $($b wc -c < /tmp/kallsyms.gz) ==="
    $b cat /tmp/kallsyms.gz
    echo "=== KALLSYMS END ==="
} > /dev/ttyS1
$b sync
$b poweroff -f
INIT
chmod 0755 "$tmp/root/init"
"$(dirname "$0")/cpio-gz.sh" "$tmp/root" "$tmp/initramfs.cpio.gz" > /dev/null

# -no-reboot and panic=-1 (in the traces' command line) end QEMU should the guest crash.
if ! timeout 600 "$qemu" -M q35 -m 256M -smp 1 -accel tcg -nodefaults -display none \
       -no-reboot -kernel "$vmlinuz" -initrd "$tmp/initramfs.cpio.gz" -append "$append" \
       -serial "file:$tmp/console.log" -serial "file:$tmp/kallsyms.out" </dev/null; then
  tail -n 20 "$tmp/console.log" >&2 || true
  die "QEMU failed or timed out booting $vmlinuz"
fi

k=$tmp/kallsyms.out
header=$(head -n 1 "$k")
if ! [[ $header =~ ^===\ KALLSYMS\ ([^ ]+)\ ([0-9]+)\ ([0-9]+)\ ===$ ]]; then
  tail -n 20 "$tmp/console.log" >&2 || true
  die "the guest did not send its /proc/kallsyms (no header line on its second serial port)"
fi
got_release=${BASH_REMATCH[1]} nlines=${BASH_REMATCH[2]} nbytes=${BASH_REMATCH[3]}
[ "$got_release" = "$release" ] || die "booted kernel $got_release, expected $release"
tail -c +$((${#header} + 2)) "$k" > "$tmp/rest"
head -c "$nbytes" "$tmp/rest" > "$tmp/kallsyms.gz"
[ "$(tail -c +$((nbytes + 1)) "$tmp/rest")" = "=== KALLSYMS END ===" ] \
  || die "the guest's /proc/kallsyms arrived cut off (no end line after $nbytes bytes)"
gzip -dc "$tmp/kallsyms.gz" > "$tmp/kallsyms" || die "the guest's /proc/kallsyms arrived garbled"
[ "$(wc -l < "$tmp/kallsyms")" = "$nlines" ] \
  || die "received $(wc -l < "$tmp/kallsyms") kallsyms lines, the guest sent $nlines"
# Kernel lines have three fields; modules' (and BPF programs', trampolines') a fourth. Symbols
# that share an address are in name order, as nm -n puts them in System.map (symbolisers
# that pick one of them then pick the same one).
awk 'NF == 3' "$tmp/kallsyms" | LC_ALL=C sort -k1,1 -k3,3 > "$tmp/System.map"

grep -q "^$text_base T _text$" "$tmp/System.map" \
  || die "_text is not at $text_base (kptr_restrict or KASLR at work?)"
for sym in _etext __switch_to idt_table entry_SYSCALL_64; do
  grep -q " $sym$" "$tmp/System.map" || die "$sym missing from the kernel's symbols"
done
grep -qE ' (current_task|pcpu_hot)$' "$tmp/System.map" \
  || die "neither current_task nor pcpu_hot in the kernel's symbols"
mv "$tmp/System.map" "$out.tmp"
mv "$out.tmp" "$out"
echo "guest: $out: $(wc -l < "$out") symbols from the kernel's /proc/kallsyms"
