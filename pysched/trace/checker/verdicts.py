"""The full check before a command's work, once per trace content and checker code.

Every command that reads a trace refuses one that ``pysched check`` rejects. The whole check
reads every table (2-8 s and up to 1.1 GB for a shipped trace), so its passing verdicts are
kept: :func:`full_check` runs :func:`pysched.trace.checker.check_trace` on a trace the first
time it meets that trace's content with this checker, and afterwards only finds the verdict.

Key
    A SHA-256 over the trace's content (:func:`pysched.trace.digest.trace_digest`: every byte
    of every file of the trace directory), the code that reads and checks it (the sources of
    ``pysched/trace``, with the checker, the reader and the codecs, and :data:`LIBRARIES`'
    versions) and :data:`FORMAT`. A changed byte of the trace or an edited checker gives
    another key, so a verdict never stands for a trace or a check it was not made from.
Where
    ``<cache>/.checked/<key>``, an empty file, in the cache directory of prepared traces
    (:func:`pysched._cachedir.cache_dir`); ``pysched cache --clear`` removes it with the
    rest. A trace that fails is checked again each time (nothing is stored for it), and a
    cache directory that cannot be written only costs the check each time.
"""
from __future__ import annotations

import hashlib
import os
import secrets
from functools import lru_cache
from pathlib import Path

from pysched._cachedir import cache_dir

from ..digest import code_hash, trace_digest
from ..reader import Trace

#: Version of the verdict's meaning; bump it when a passing verdict would mean less.
FORMAT = 1
#: Libraries whose version enters the key (they read and decode the tables).
LIBRARIES = ("numpy", "pyarrow", "numba")
#: The verdicts' directory inside the cache directory.
SUBDIR = ".checked"
#: Violations shown in a refusal (``pysched check`` lists them all).
SHOWN = 5

_TRACE_PACKAGE = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=1)
def checker_digest() -> str:
    """SHA-256 over the sources of ``pysched/trace`` (the reader, codecs and checker),
    :data:`LIBRARIES`' versions, Python's and :data:`FORMAT` (once per process)."""
    files = sorted(_TRACE_PACKAGE.rglob("*.py"))
    return code_hash(FORMAT, LIBRARIES, files, _TRACE_PACKAGE).hexdigest()


def verdict_path(trace: Trace) -> Path:
    """Where the passing verdict of ``trace`` (its content, this checker) is kept."""
    key = hashlib.sha256(f"{trace_digest(trace.path)}\0{checker_digest()}".encode())
    return cache_dir() / SUBDIR / key.hexdigest()


def remember(trace: Trace) -> None:
    """Keep the verdict of a trace that passed every check (``pysched check`` calls it, so a
    command after it does not check the trace again)."""
    _remember(verdict_path(trace))


def _remember(path: Path) -> None:
    """Store a passing verdict (written beside, then renamed: never half there)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}-{os.getpid()}-{secrets.token_hex(4)}")
        tmp.write_bytes(b"")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache: the trace is checked again next time


def full_check(trace: Trace, cache: bool = True) -> None:
    """Run ``pysched check``'s every check on ``trace`` unless it passed them before.

    Parameters
    ----------
    trace : Trace
        A complete trace (not the view of an incomplete one's prefix).
    cache : bool
        Find and keep the passing verdict in the cache directory; False (a command's
        ``--no-cache``) checks the trace and neither reads nor writes there.

    Raises
    ------
    TraceRejected
        When a check fails; the message names the trace and lists the first violations as
        ``pysched check`` does.
    TraceError
        When a part cannot be read.
    """
    from . import check_trace  # the checker's package imports this module's caller
    from .preflight import TraceRejected

    where = verdict_path(trace) if cache else None
    if where is not None and where.is_file():
        return
    report = check_trace(trace, limit=SHOWN)
    if not report.ok:
        lines = [f"  {name} {loc}: {msg}" for name, loc, msg in report.shown()]
        raise TraceRejected(f"{trace.path}: refused, `pysched check` rejects the trace "
                            f"({report.violations:,} violations; `pysched check` lists "
                            "them):\n" + "\n".join(lines))
    if where is not None:
        _remember(where)


__all__ = ["FORMAT", "LIBRARIES", "SUBDIR", "checker_digest", "full_check", "remember",
           "verdict_path"]
