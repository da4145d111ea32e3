"""A trace directory's content as one digest: what the caches of derived results are keyed
by (prepared traces, the full check's verdicts), so that any changed byte of any file of the
trace gives another key."""
from __future__ import annotations

import hashlib
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

_CHUNK = 1 << 20


def file_digest(path: Path, new: Callable[[], Any] = hashlib.sha256) -> tuple[str, int]:
    """The hex digest (``new()``: SHA-256 by default) and size of the file ``path``."""
    h, n = new(), 0
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb") as f:
        while k := f.readinto(buf):
            h.update(view[:k])
            n += k
    return h.hexdigest(), n


def trace_digest(root: Path, extra: Sequence[Path] = ()) -> str:
    """SHA-256 over every file of the trace directory ``root`` (relative path, size, bytes;
    links followed) and the files ``extra`` (their absolute path and bytes)."""
    h = hashlib.sha256()
    root = Path(root)
    files = []
    for d, dirs, names in os.walk(root, followlinks=True):
        dirs.sort()
        files += [Path(d) / n for n in names]
    for f in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest, n = file_digest(f)
        h.update(f"{f.relative_to(root).as_posix()}\0{n}\0{digest}\0".encode())
    for f in extra:
        digest, n = file_digest(f)
        h.update(f"{Path(f).resolve()}\0{n}\0{digest}\0".encode())
    return h.hexdigest()


def code_hash(fmt: int, libraries: Sequence[str], files: Sequence[Path], root: Path,
              extra: Sequence[str] = ()):
    """A SHA-256 object over a cache format number ``fmt``, Python's version, the installed
    versions of ``libraries``, the ``files`` (each by its path relative to ``root`` and its
    bytes) and ``extra`` texts: what a derived result's code is, for a cache key."""
    h = hashlib.sha256(f"format {fmt}\0python {platform.python_version()}\0".encode())
    for lib in libraries:
        try:
            h.update(f"{lib} {metadata.version(lib)}\0".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{lib} none\0".encode())
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    for text in extra:
        h.update(text.encode() + b"\0")
    return h


__all__ = ["code_hash", "file_digest", "trace_digest"]
