"""The guests: locating their built files and making the per-run initrd.

Two guests share the Debian kernel of ``build/guest/`` (its ``System.map`` is what the tracer
needs):

- the **busybox** test guest (``make -C guest busybox-guest``, run by ``make setup``): a busybox
  initramfs whose ``/init`` runs ``/cmd.sh``; each run appends a second, tiny cpio archive
  holding the command (Linux unpacks concatenated, separately compressed archives in order), so
  the base image never needs rebuilding;
- the **Debian** guest (``make -C guest/debian debian-guest``, run by ``make guest``): a
  bookworm root file system on a virtio disk (``build/guest/debian/root.img``) and a small
  initrd that loads the virtio and ext4 modules. Each run appends an archive holding
  ``/pysched``: the stage-2 init (``guest/debian/init.sh``), the workload scripts
  (``guest/workloads/*.sh``), ``run.env`` and the command, which stage 1 copies to the root's
  ``/run/pysched``. Changing a script therefore needs no image rebuild.
"""
from __future__ import annotations

import gzip
import re
import shlex
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping

#: The repository root: the parent of the ``pysched`` package directory.
REPO_ROOT = Path(__file__).resolve().parents[2]

#: Where ``make -C guest busybox-guest`` puts the guest.
GUEST_BUILD_DIR = REPO_ROOT / "build" / "guest"

#: The guest sources: ``debian/init.sh`` and ``workloads/*.sh`` go into every Debian run.
GUEST_SRC_DIR = REPO_ROOT / "guest"

#: The guests ``pysched trace --guest`` knows.
GUEST_KINDS = ("debian", "busybox")

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
    kind : str
        ``busybox`` or ``debian``.
    disk : Path or None
        The Debian guest's root file system image (a virtio disk); None for busybox.
    recipe_sha : str or None
        The hash of the Debian image's recipe it was built from.
    packages_lock : Path or None
        The Debian image's package list (``name version`` lines).
    ssh_key : Path or None
        The host's private key for the Debian guest's root (scp peers).
    ssh_host_key : Path or None
        The Debian guest's ssh host public key, which the host's ssh pins.
    """

    directory: Path
    vmlinuz: Path
    system_map: Path
    initramfs: Path
    kernel_version: str
    kernel_package_version: str | None = None
    kind: str = "busybox"
    disk: Path | None = None
    recipe_sha: str | None = None
    packages_lock: Path | None = None
    ssh_key: Path | None = None
    ssh_host_key: Path | None = None

    def packages(self) -> dict[str, str]:
        """The image's packages and versions (empty for the busybox guest).

        Returns
        -------
        dict
            ``{package: version}`` from ``packages.lock``.
        """
        if self.packages_lock is None or not self.packages_lock.is_file():
            return {}
        out: dict[str, str] = {}
        for line in self.packages_lock.read_text().splitlines():
            name, _, version = line.strip().partition(" ")
            if name:
                out[name] = version
        return out


def _read_optional(path: Path) -> str | None:
    """The stripped text of ``path``, or None when it does not exist."""
    return path.read_text().strip() if path.is_file() else None


def _locate(d: Path, initramfs: Path, extra: list[Path], guest: str, how: str) -> GuestImage:
    """The kernel of build directory ``d`` with ``initramfs``, after checking that they and
    ``extra`` exist.

    Raises
    ------
    GuestNotBuiltError
        Naming every missing file, ``guest`` (what is not built) and ``how`` to build it.
    """
    names = [d / "vmlinuz", d / "System.map", d / "kernel-version", initramfs] + extra
    missing = [p for p in names if not p.is_file()]
    if missing:
        raise GuestNotBuiltError(
            f"{guest} is not built: {', '.join(str(p) for p in missing)} missing; {how}")
    return GuestImage(
        directory=d,
        vmlinuz=d / "vmlinuz",
        system_map=d / "System.map",
        initramfs=initramfs,
        kernel_version=(d / "kernel-version").read_text().strip(),
        kernel_package_version=_read_optional(d / "kernel-package-version"),
    )


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
    return _locate(d, d / "initramfs.cpio.gz", [], "the test guest",
                   "run `make setup` (or `make -C guest busybox-guest`)")


def locate_debian_guest(build_dir: Path | None = None) -> GuestImage:
    """Find the built Debian guest: the kernel of ``build_dir`` (as :func:`locate_guest`)
    and the image of its ``debian/`` sub-directory.

    Returns
    -------
    GuestImage
        With ``kind="debian"``, ``initramfs`` the stage-1 initrd and ``disk`` the root image.

    Raises
    ------
    GuestNotBuiltError
        When a file is missing; the message names them and says how to build them.
    """
    d = Path(build_dir) if build_dir is not None else GUEST_BUILD_DIR
    dd = d / "debian"
    ssh = dd / "ssh"
    kernel = _locate(
        d, dd / "initrd.cpio.gz", [dd / "root.img", ssh / "id_ed25519", ssh / "guest_host_key.pub"],
        "the Debian guest",
        "run `make guest` (after `make setup`), or use --guest busybox for the test guest")
    return replace(
        kernel,
        directory=dd,
        kind="debian",
        disk=dd / "root.img",
        recipe_sha=_read_optional(dd / "recipe.sha"),
        packages_lock=dd / "packages.lock",
        ssh_key=ssh / "id_ed25519",
        ssh_host_key=ssh / "guest_host_key.pub",
    )


def locate(kind: str, build_dir: Path | None = None) -> GuestImage:
    """Find the built guest of the given kind (``debian`` or ``busybox``).

    Raises
    ------
    ValueError
        For an unknown kind.
    GuestNotBuiltError
        When the guest is not built.
    """
    if kind == "debian":
        return locate_debian_guest(build_dir)
    if kind == "busybox":
        return locate_guest(build_dir)
    raise ValueError(f"unknown guest {kind!r}: use one of {', '.join(GUEST_KINDS)}")


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


def cmd_archive(command: str, src_dir: Path | None = None) -> bytes:
    """The gzip-compressed cpio archive of a busybox guest run: ``/cmd.sh`` (mode 0755) and
    ``/run/pysched/lib.sh``.

    The base image has a ``lib.sh`` too; the run's copy replaces it (the kernel unpacks the
    archives in order and truncates a file it writes again), so that a change to
    ``guest/workloads/lib.sh`` (``roi_start``/``roi_stop``) reaches the guest without a rebuild.

    Parameters
    ----------
    command : str
        The shell command the guest runs.
    src_dir : Path, optional
        The guest sources (default :data:`GUEST_SRC_DIR`).

    Returns
    -------
    bytes
        gzip data (reproducible: mtime 0).

    Raises
    ------
    FileNotFoundError
        When ``workloads/lib.sh`` is missing from the guest sources.
    """
    lib = (Path(src_dir) if src_dir is not None else GUEST_SRC_DIR) / "workloads" / "lib.sh"
    if not lib.is_file():
        raise FileNotFoundError(f"guest source {lib} is missing")
    entries = [
        CpioEntry("cmd.sh", S_IFREG | 0o755, cmd_script(command).encode()),
        CpioEntry("run", S_IFDIR | 0o755),
        CpioEntry("run/pysched", S_IFDIR | 0o755),
        CpioEntry("run/pysched/lib.sh", S_IFREG | 0o644, lib.read_bytes()),
    ]
    return gzip.compress(cpio_newc(entries), compresslevel=9, mtime=0)


_ENV_NAME_RE = re.compile(r"[A-Z_][A-Z0-9_]*")


def run_env_text(env: Mapping[str, str]) -> str:
    """The text of the Debian guest's ``/run/pysched/run.env``: one ``export NAME='value'``
    line per variable, shell-quoted, which the stage-2 init sources.

    Raises
    ------
    ValueError
        When a name is not an upper-case shell identifier.
    """
    lines = ["# written by pysched trace"]
    for name, value in env.items():
        if not _ENV_NAME_RE.fullmatch(name):
            raise ValueError(f"bad run.env variable name {name!r}")
        lines.append(f"export {name}={shlex.quote(str(value))}")
    return "\n".join(lines) + "\n"


def debian_run_archive(
    env: Mapping[str, str],
    command: str | None = None,
    src_dir: Path | None = None,
) -> bytes:
    """The gzip-compressed cpio archive of a Debian guest run: the ``/pysched`` directory.

    Parameters
    ----------
    env : mapping
        The variables of ``run.env`` (``PYSCHED_MODE``, ``PYSCHED_WORKLOAD``, ``P_*``, ...).
    command : str, optional
        The shell command for ``cmd.sh`` (``--cmd`` runs).
    src_dir : Path, optional
        The guest sources (default :data:`GUEST_SRC_DIR`): ``debian/init.sh`` becomes
        ``/pysched/init``, ``workloads/lib.sh`` ``/pysched/lib.sh`` and
        ``workloads/*.sh`` ``/pysched/workloads/``.

    Returns
    -------
    bytes
        gzip data (reproducible: mtime 0).
    """
    src = Path(src_dir) if src_dir is not None else GUEST_SRC_DIR
    init = src / "debian" / "init.sh"
    lib = src / "workloads" / "lib.sh"
    for f in (init, lib):
        if not f.is_file():
            raise FileNotFoundError(f"guest source {f} is missing")
    entries = [
        CpioEntry("pysched", S_IFDIR | 0o755),
        CpioEntry("pysched/init", S_IFREG | 0o755, init.read_bytes()),
        CpioEntry("pysched/lib.sh", S_IFREG | 0o644, lib.read_bytes()),
        CpioEntry("pysched/run.env", S_IFREG | 0o644, run_env_text(env).encode()),
        CpioEntry("pysched/workloads", S_IFDIR | 0o755),
    ]
    if command is not None:
        entries.append(CpioEntry("pysched/cmd.sh", S_IFREG | 0o755, cmd_script(command).encode()))
    for script in sorted((src / "workloads").glob("*.sh")):
        if script.name != "lib.sh":
            entries.append(CpioEntry(f"pysched/workloads/{script.name}", S_IFREG | 0o644,
                                     script.read_bytes()))
    return gzip.compress(cpio_newc(entries), compresslevel=9, mtime=0)


def write_initrd(base: Path, archive: bytes, dest: Path) -> Path:
    """Write a run's initrd: the base initrd followed by ``archive`` (gzip-compressed cpio).

    Parameters
    ----------
    base : Path
        The base initrd.
    archive : bytes
        The run's archive (:func:`cmd_archive`, :func:`debian_run_archive`).
    dest : Path
        The file to write.

    Returns
    -------
    Path
        ``dest``.
    """
    with open(base, "rb") as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out)
        # The kernel skips zero bytes between archives only at 4-byte boundaries.
        out.write(b"\0" * (-out.tell() % 4))
        out.write(archive)
    return dest


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
    return write_initrd(base, cmd_archive(command), dest)
