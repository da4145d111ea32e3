"""The files a ``pysched trace`` run owns, and what becomes of them when it is stopped.

- **The output directory** is claimed atomically: a lock file created with ``O_EXCL`` in it,
  so that of two runs started into one new ``--out`` the second gets a clear error instead of
  writing into the first one's trace. The lock holds the owner's pid; a run removes it when it
  ends (also when stopped by a signal). A ``SIGKILL`` leaves it, and the directory then is
  not empty, so no later run writes into that broken trace.
- **The temporary directory** (``pysched-trace-*`` in ``$TMPDIR``: the run's initrd, the Debian
  disk's copy-on-write overlay, sockets) carries an ``owner`` file naming the pysched process
  and, once started, QEMU (pid and start time, so that a reused pid is not mistaken for
  them). A run removes its own; the next run removes those whose processes are all gone
  (:func:`remove_stale_tmpdirs`), which is what a ``SIGKILL`` leaves.
- **Signals**: within :func:`signals_raise`, ``SIGTERM`` and ``SIGHUP`` (the shell that started
  the run went away) raise :class:`RunInterrupted`, like ``SIGINT`` raises
  ``KeyboardInterrupt``, so that the same clean-up runs: QEMU is stopped with ``SIGTERM`` (the
  plugin closes its tables: every part on disk is complete), the peer is stopped, temporary
  files are removed, and no ``manifest.json`` is written (the trace is incomplete). QEMU itself
  gets ``SIGTERM`` from the kernel should pysched die without any of this (``SIGKILL``): see
  :func:`pysched.capture.qemu.run_qemu`.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Iterator

from pysched.trace.schema import CAPTURE_LOCK as OUT_LOCK

#: Prefix of the runs' temporary directories.
TMP_PREFIX = "pysched-trace-"
#: The file in a temporary directory naming its processes.
OWNER_FILE = "owner"


class OutDirError(Exception):
    """The output directory cannot be claimed (the message says why and names it)."""


class RunInterrupted(BaseException):
    """pysched received ``SIGTERM`` or ``SIGHUP`` (a BaseException, like KeyboardInterrupt,
    so that no ``except Exception`` swallows it).

    Attributes
    ----------
    signum : int
        The signal.
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _start_time(pid: int) -> str | None:
    """The process's start time (field 22 of ``/proc/PID/stat``), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count after its last ")".
    return stat.rpartition(")")[2].split()[19]


def process_id(pid: int) -> str:
    """``"PID:START"``: a process's identity that a reused pid does not share."""
    return f"{pid}:{_start_time(pid)}"


def _alive(ident: str) -> bool:
    pid, _, start = ident.partition(":")
    try:
        return _start_time(int(pid)) == start
    except ValueError:
        return False


def claim_out_dir(out: Path) -> Path:
    """Create ``out`` if needed and claim it for this run.

    Parameters
    ----------
    out : Path
        The trace directory (absolute); it must be empty or not exist.

    Returns
    -------
    Path
        The lock file, for :func:`release_out_dir`.

    Raises
    ------
    OutDirError
        When it cannot be created or written, another run holds it, or it is not empty.
    """
    lock = out / OUT_LOCK
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        try:
            owner = lock.read_text().strip()
        except OSError:
            owner = "?"
        raise OutDirError(f"output directory {out} is being written by another pysched trace "
                          f"(process {owner.partition(':')[0]}, see {lock}); choose another "
                          "directory") from None
    except OSError as e:
        raise OutDirError(f"cannot create the output directory {out}: "
                          f"{e.strerror or e}") from None
    with os.fdopen(fd, "w") as f:
        f.write(process_id(os.getpid()) + "\n")
    others = [p.name for p in out.iterdir() if p.name != OUT_LOCK]
    if others:
        lock.unlink()
        raise OutDirError(f"output directory {out} is not empty ({others[0]}); choose a new "
                          "directory or empty it")
    return lock


def release_out_dir(lock: Path) -> None:
    """Remove the lock of :func:`claim_out_dir` (nothing when it is already gone)."""
    with contextlib.suppress(FileNotFoundError):
        lock.unlink()


class RunTmpDir:
    """The run's temporary directory, with its ``owner`` file.

    Parameters
    ----------
    parent : Path, optional
        Where to make it (default: ``tempfile.gettempdir()``).
    """

    def __init__(self, parent: Path | None = None):
        self.path = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=parent))
        self._owners = [process_id(os.getpid())]
        self._write()

    def _write(self) -> None:
        tmp = self.path / (OWNER_FILE + ".tmp")
        tmp.write_text("\n".join(self._owners) + "\n")
        os.replace(tmp, self.path / OWNER_FILE)

    def add_process(self, pid: int) -> None:
        """Record another process that uses the directory (QEMU)."""
        self._owners.append(process_id(pid))
        self._write()

    def remove(self) -> None:
        """Remove the directory and everything in it."""
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> RunTmpDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def remove_stale_tmpdirs(parent: Path | None = None) -> list[Path]:
    """Remove the temporary directories of runs whose processes are all gone.

    Parameters
    ----------
    parent : Path, optional
        Where to look (default: ``tempfile.gettempdir()``).

    Returns
    -------
    list of Path
        The directories removed. Only this user's directories with an ``owner`` file are
        considered; one whose pysched or QEMU still runs is kept.
    """
    root = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    removed = []
    for d in root.glob(TMP_PREFIX + "*"):
        try:
            if not d.is_dir() or d.is_symlink() or d.stat().st_uid != os.getuid():
                continue
            owners = (d / OWNER_FILE).read_text().split()
        except OSError:
            continue
        if owners and not any(_alive(o) for o in owners):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _raise_interrupted(signum: int, frame: object) -> None:
    raise RunInterrupted(signum)


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, ``SIGTERM`` and ``SIGHUP`` raise :class:`RunInterrupted`, unless the
    process ignores them (``nohup``); the former handlers are restored after it (only in the
    main thread, where Python delivers signals)."""
    sigs = [s for s in (signal.SIGTERM, signal.SIGHUP)
            if signal.getsignal(s) is not signal.SIG_IGN]
    try:
        old = {s: signal.signal(s, _raise_interrupted) for s in sigs}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


__all__ = ["OUT_LOCK", "OWNER_FILE", "TMP_PREFIX", "OutDirError", "RunInterrupted", "RunTmpDir",
           "claim_out_dir", "process_id", "release_out_dir", "remove_stale_tmpdirs",
           "signals_raise"]
