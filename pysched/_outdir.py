"""The ``--out`` contract of the commands that write results.

Every such command claims ``--out`` with a lock file beside it (``.NAME.pysched-lock``,
created with ``O_EXCL``, holding its pid), so a second command into the same ``--out`` gets a
clear error at once naming the first; the next command into that ``--out`` removes a lock
whose owner is gone.

* One-shot commands (``analyse``, ``evaluate``, ``seeds``; :func:`finished_dir`): ``--out``
  must be new or empty; they write into a temporary sibling ``.NAME.partial-*`` and rename it
  to ``--out`` at the end, so a killed command leaves no directory that looks finished.
* Resumable commands (``sweep``, ``ablate``, ``study``; :func:`locked_dir`): ``--out`` keeps
  every finished run, each file written under a temporary name and renamed, so a re-run into
  the same ``--out`` skips what is stored and finishes the rest.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


class OutputError(ValueError):
    """``--out`` cannot be used (the message names it and says why)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _claim(out: Path) -> Path:
    """Create the lock beside ``out``; clear a dead owner's lock and partial directories."""
    lock = out.parent / f".{out.name}.pysched-lock"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            text = lock.read_text().strip() if lock.exists() else ""
            pid = int(text) if text.isdigit() else 0
            if pid and _alive(pid):
                raise OutputError(f"--out {out}: another pysched command (process {pid}) is "
                                  f"writing it (lock {lock})") from None
            for stale in out.parent.glob(f".{out.name}.partial-*"):
                shutil.rmtree(stale, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            continue
        except OSError as exc:
            raise OutputError(f"--out {out}: cannot write in {out.parent} "
                              f"({exc.strerror or exc})") from None
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        return lock
    raise OutputError(f"--out {out}: its lock {lock} keeps coming back")


@contextlib.contextmanager
def finished_dir(out: Path) -> Iterator[Path]:
    """Claim ``out`` and yield a temporary directory that becomes ``out`` when the block ends
    without an exception (nothing of it is left otherwise).

    Raises
    ------
    OutputError
        ``out`` exists and is not an empty directory, cannot be created there, or another
        command is writing it.
    """
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OutputError(f"--out {out} exists and is not empty (results are never mixed: "
                          "remove it or choose another)")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"--out {out}: cannot create {out.parent} "
                          f"({exc.strerror or exc})") from None
    with _locked(out):
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
        try:
            yield tmp
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o777 & ~mask)  # mkdtemp's 0700 is for the partial directory only
            if out.exists():
                out.rmdir()  # empty (checked above); a file put there since fails here
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def locked_dir(out: Path) -> Iterator[Path]:
    """Claim ``out``, a directory a resumable command adds to, while the block runs; yields
    ``out``, created when missing.

    Raises
    ------
    OutputError
        ``out`` is not a directory, cannot be created, or another command is writing it.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"--out {out}: cannot create it ({exc.strerror or exc})") from None
    with _locked(out):
        yield out


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold the lock of ``out`` while the block runs."""
    lock = _claim(out)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
