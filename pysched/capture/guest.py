"""The test guest: locating its built files and making the per-run initramfs.

``make -C guest busybox-guest`` (run by ``make setup``) leaves a Debian kernel, its
``System.map`` and a busybox initramfs in ``build/guest/``. The initramfs's ``/init`` runs
``/cmd.sh``, which is not in it: each run appends a second, tiny cpio archive holding the
command. Linux unpacks concatenated (and separately compressed) cpio archives in order, so the
base image never needs rebuilding.
"""
from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

#: The repository root: the parent of the ``pysched`` package directory.
REPO_ROOT = Path(__file__).resolve().parents[2]

#: Where ``make -C guest busybox-guest`` puts the guest.
GUEST_BUILD_DIR = REPO_ROOT / "build" / "guest"

# st_mode bits for the archive entries (regular file / directory).
S_IFREG = 0o100000
S_IFDIR = 0o040000

_NEWC_MAGIC = b"070701"
_TRAILER = "TRAILER!!!"


class GuestNotBuiltError(FileNotFoundError):
    """A file of the built guest is missing."""


@dataclass(frozen=True)
class GuestImage:
    """The files of the built test guest.

    Attributes
    ----------
    directory : Path
        The build directory (``build/guest``).
    vmlinuz : Path
        The kernel image, booted with ``-kernel``.
    system_map : Path
        The kernel's ``System.map`` (the plugin's ``sysmap=``).
    initramfs : Path
        The base initramfs (gzip-compressed newc cpio) without ``/cmd.sh``.
    kernel_version : str
        The kernel release, e.g. ``6.1.0-56-amd64``.
    kernel_package_version : str or None
        The Debian package version, e.g. ``6.1.192-2``, when recorded.
    """

    directory: Path
    vmlinuz: Path
    system_map: Path
    initramfs: Path
    kernel_version: str
    kernel_package_version: str | None = None


def locate_guest(build_dir: Path | None = None) -> GuestImage:
    """Find the built guest files.

    Parameters
    ----------
    build_dir : Path, optional
        The guest build directory; default :data:`GUEST_BUILD_DIR`.

    Returns
    -------
    GuestImage
        Paths of the kernel, ``System.map`` and base initramfs, and the kernel version.

    Raises
    ------
    GuestNotBuiltError
        When any of them is missing; the message names the missing files and says to run
        ``make setup``.
    """
    d = Path(build_dir) if build_dir is not None else GUEST_BUILD_DIR
    names = ["vmlinuz", "System.map", "initramfs.cpio.gz", "kernel-version"]
    missing = [n for n in names if not (d / n).is_file()]
    if missing:
        raise GuestNotBuiltError(
            f"the test guest is not built: {', '.join(str(d / n) for n in missing)} "
            f"missing; run `make setup` (or `make -C guest busybox-guest`)"
        )
    pkg = d / "kernel-package-version"
    return GuestImage(
        directory=d,
        vmlinuz=d / "vmlinuz",
        system_map=d / "System.map",
        initramfs=d / "initramfs.cpio.gz",
        kernel_version=(d / "kernel-version").read_text().strip(),
        kernel_package_version=pkg.read_text().strip() if pkg.is_file() else None,
    )


@dataclass(frozen=True)
class CpioEntry:
    """One member of a newc cpio archive.

    Attributes
    ----------
    name : str
        Path inside the archive, without a leading ``/`` (e.g. ``cmd.sh``).
    mode : int
        Full ``st_mode``: file type bits and permissions (e.g. ``S_IFREG | 0o755``).
    data : bytes
        File contents (empty for a directory).
    mtime : int
        Modification time (seconds since the epoch); 0 keeps archives reproducible.
    """

    name: str
    mode: int
    data: bytes = b""
    mtime: int = 0


def _pad4(n: int) -> bytes:
    return b"\0" * (-n % 4)


def cpio_newc(entries: Iterable[CpioEntry]) -> bytes:
    """Write a newc ("070701", SVR4 without CRC) cpio archive, trailer included.

    Parameters
    ----------
    entries : iterable of CpioEntry
        The members, in order (a directory must come before what it contains). Owner is root.

    Returns
    -------
    bytes
        The uncompressed archive, ending with the ``TRAILER!!!`` entry.
    """
    out = bytearray()
    all_entries = list(entries) + [CpioEntry(_TRAILER, 0)]
    for ino, e in enumerate(all_entries, start=1):
        is_trailer = e.name == _TRAILER
        name = e.name.encode() + b"\0"
        # 13 eight-digit hex fields: ino mode uid gid nlink mtime filesize devmajor devminor
        # rdevmajor rdevminor namesize check. nlink 1 keeps Linux's hard-link logic out of it.
        fields = [
            0 if is_trailer else ino,
            e.mode,
            0,
            0,
            1,
            e.mtime,
            len(e.data),
            0,
            0,
            0,
            0,
            len(name),
            0,
        ]
        header = _NEWC_MAGIC + b"".join(b"%08X" % f for f in fields)
        out += header + name
        out += _pad4(len(header) + len(name))  # name is padded so data starts 4-aligned
        out += e.data + _pad4(len(e.data))
    return bytes(out)


def cmd_script(command: str) -> str:
    """The ``/cmd.sh`` text for a shell command.

    Parameters
    ----------
    command : str
        The command line, run by busybox ``sh`` as written (it may hold several lines).

    Returns
    -------
    str
        The script, newline-terminated.
    """
    return "# written by pysched trace\n" + command.rstrip("\n") + "\n"


def cmd_archive(command: str) -> bytes:
    """The gzip-compressed cpio archive that supplies ``/cmd.sh`` (mode 0755).

    Parameters
    ----------
    command : str
        The shell command the guest runs.

    Returns
    -------
    bytes
        gzip data (reproducible: mtime 0).
    """
    script = CpioEntry("cmd.sh", S_IFREG | 0o755, cmd_script(command).encode())
    return gzip.compress(cpio_newc([script]), compresslevel=9, mtime=0)


def write_run_initrd(base: Path, command: str, dest: Path) -> Path:
    """Write the run's initrd: the base initramfs followed by the ``/cmd.sh`` archive.

    Parameters
    ----------
    base : Path
        The base initramfs (``build/guest/initramfs.cpio.gz``).
    command : str
        The shell command the guest runs.
    dest : Path
        The file to write (for example in a temporary directory).

    Returns
    -------
    Path
        ``dest``.
    """
    with open(base, "rb") as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out)
        # The kernel skips zero bytes between archives only at 4-byte boundaries.
        out.write(b"\0" * (-out.tell() % 4))
        out.write(cmd_archive(command))
    return dest
