#!/usr/bin/env bash
# One-shot, idempotent set-up for a fresh Debian 12 (bookworm) machine.
#
# Installs: QEMU 10.0 from bookworm-backports, glib and C/C++ build tools, the QEMU plugin
# header (extracted from Debian's QEMU source package, never stored in the repo), busybox and a
# Debian kernel for the test guest (its System.map made by booting it once under QEMU: see
# guest/system-map.sh), and the Python environment .venv/ with pysched.
# Each step is skipped when its result is already there.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build"
mkdir -p "$build"
log() { printf '[setup] %s\n' "$*"; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive

# --- apt sources: bookworm-backports (binaries and sources), same mirror as the system -------
mirror=$( { sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null;
            sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' \
              /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null; } \
          | tr ' ' '\n' | grep -E '/debian/?$' | head -n 1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
bp=/etc/apt/sources.list.d/pysched-backports.sources
want="Types: deb deb-src
URIs: $mirror
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
if [ "$(cat "$bp" 2>/dev/null)" != "$want" ]; then
  log "adding bookworm-backports from $mirror"
  printf '%s\n' "$want" | $SUDO tee "$bp" >/dev/null
  $SUDO apt-get update -q
fi

# --- apt packages ------------------------------------------------------------------------------
pkgs="build-essential pkg-config libglib2.0-dev busybox-static cpio xz-utils zstd dpkg-dev
      python3-venv python3-dev kmod procps"
# The Debian guest image (debootstrap, mke2fs -d) and the workloads' host-side peers (scp, ab).
pkgs="$pkgs debootstrap e2fsprogs openssh-client apache2-utils"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  log "installing:$missing"
  $SUDO apt-get update -q || true
  $SUDO apt-get install -y -q --no-install-recommends $missing
fi
if ! qemu-system-x86_64 --version 2>/dev/null | grep -qE 'version (9\.[2-9]|1[0-9])\.'; then
  log "installing QEMU from bookworm-backports"
  $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86
fi

# --- the plugin header (and contrib plugins, for the benchmark peers) from the source package --
qsrc="$build/qemu-src"
if [ ! -f "$qsrc/include/qemu/qemu-plugin.h" ]; then
  log "fetching Debian's QEMU source package for qemu-plugin.h"
  ver=$(dpkg-query -W -f='${Version}' qemu-system-x86 | sed -E 's/^[0-9]+://')
  upstream=${ver%%+ds*}
  mkdir -p "$build/qemu-dl" && cd "$build/qemu-dl"
  # The .dsc may be missing on the mirror; the orig tarball is what we need.
  apt-get source --download-only "qemu=1:$ver" >/dev/null 2>&1 \
    || apt-get source --download-only qemu/bookworm-backports >/dev/null 2>&1 || true
  tarball=$(ls qemu_*.orig.tar.* 2>/dev/null | head -n 1 || true)
  if [ -z "$tarball" ]; then
    echo "setup: could not download Debian's QEMU source tarball (qemu_${upstream}+ds.orig.tar.xz)" >&2
    exit 1
  fi
  rm -rf "$qsrc.tmp" && mkdir -p "$qsrc.tmp"
  tar xf "$tarball" -C "$qsrc.tmp" --strip-components=1 --wildcards \
      '*/include/qemu/qemu-plugin.h' '*/contrib/plugins/*'
  rm -rf "$qsrc" && mv "$qsrc.tmp" "$qsrc"
  cd "$top"
fi

# --- Python environment -----------------------------------------------------------------------
venv="$top/.venv"
stamp="$venv/.installed-$(sha1sum "$top/pyproject.toml" | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  log "creating .venv and installing pysched"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -e "$top[test]"
  rm -f "$venv"/.installed-* && touch "$stamp"
fi

# --- the test guest's kernel and initramfs --------------------------------------------------------
make -C "$top/guest" busybox-guest

# --- pysched's numba kernels, compiled into numba's cache ----------------------------------------
bash "$top/scripts/compile-kernels.sh"

# --- the shipped traces, prepared for the sandbox into the user's cache (not under CI) -----------
bash "$top/scripts/prepare-traces.sh"

log "done"
