"""The on-disk cache of prepared traces: segment a trace and build its workload once.

:func:`pysched.evaluation.runner.prepare` builds a shipped trace in up to 30 s; with this cache
it does so once per trace and code version, and then reads the result back in under a second
(measured per trace in ``docs/sandbox.md``).

Where
    ``$PYSCHED_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/pysched/prepared``, else
    ``~/.cache/pysched/prepared`` (:func:`cache_dir`). Each entry is a directory
    ``<trace name>-<key>``; removing the cache directory (``rm -rf``, or ``pysched cache
    --clear``) only costs the next preparations their time.
Key
    A SHA-256 (:func:`entry_key`) over the trace's content (:func:`trace_digest`: the
    relative path, size and every byte of each file of the trace directory, and the
    ``System.map`` used when it lies outside it; SHA-256 reads about 1 GB/s here, so 0.03 s
    for the largest shipped trace: sizes and times would not see a file rewritten in place,
    and hashing only the Parquet footers would miss a changed page), the view of an
    incomplete trace (:attr:`~pysched.trace.Trace.prefix`), the code that builds it
    (:func:`code_digest`: the sources in :data:`SOURCES`, the building function's own source,
    the numpy, pandas, pyarrow and numba versions and :data:`FORMAT`) and the parameters
    (line size, ``keep_harness``, workload name). Editing the engine or a policy keeps the
    cache; editing segmentation or a workload builder rebuilds it.
Format
    ``meta.json`` (the key, its parts, the value as a JSON tree, and the size and CRC-32 of
    every array file, with a SHA-256 of its own) and one ``.npy`` file per array
    (:mod:`~pysched.evaluation.tree_codec`; no pickle). Arrays of 1 MiB or more (the
    footprint's) are memory-mapped copy-on-write: their pages are shared between processes
    and a write changes the process's copy, never the file.
Invalidation
    A changed trace, code or parameter gives another key. An entry is used only when its
    ``meta.json`` is whole and names that key and this :data:`FORMAT`, and every file has its
    recorded size and CRC-32 (zlib's: 1.5 GB/s here where SHA-256 does 1 GB/s; enough for
    what threatens an entry, a damaged or cut file, not forgery; dss's entry, the largest
    at 600 MiB, is checked and read in 0.2 s); otherwise it is removed with a line on stderr
    and rebuilt. When an entry is stored, entries of the same trace directory and parameters
    under another key (older code or content) are removed.
Concurrency
    An entry is written into a hidden temporary directory and renamed into place, so a reader
    sees a whole entry or none; of two processes storing the same entry one rename wins and
    the other's copy is dropped. Removal renames an entry away before deleting it. Processes
    on one machine build an entry one at a time (:func:`building`: an advisory lock on a
    hidden file per entry, which the kernel releases when its holder exits or is killed): the
    workers of a sweep or study that meet the same new trace at once prepare it once, the
    others wait and read it (without the lock, two workers each spent the 30-60 s).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import secrets
import shutil
import sys
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from pysched._cachedir import ENV_DIR, cache_dir
from pysched.trace.digest import code_hash, file_digest, trace_digest

from . import tree_codec

#: Version of the entry layout; bump it when the stored value's meaning changes.
FORMAT = 1
#: pysched sources (globs relative to the package) whose code builds a prepared trace.
SOURCES = ("constants.py", "trace/*.py", "superfunctions/*.py", "models/codes.py",
           "models/caches/streams.py", "characterisation/scheduler.py",
           "sandbox/workload.py", "sandbox/device_loop.py", "sandbox/footprint.py",
           "sandbox/kernel_data.py",
           "sandbox/switch_cost.py", "sandbox/app_events.py",
           "evaluation/tree_codec.py", "evaluation/prepared_cache.py")
#: Libraries whose version enters the key.
LIBRARIES = ("numpy", "pandas", "pyarrow", "numba")
#: Arrays at least this large are memory-mapped rather than read.
MMAP_BYTES = 1 << 20
#: A temporary or removed entry older than this (seconds) is a dead writer's: deleted.
LEFTOVER_S = 3600.0

_PACKAGE = Path(__file__).resolve().parents[1]
_META = "meta.json"


def describe() -> str:
    """Where the cache lives and how to clear it, for ``--help`` texts."""
    return (f"prepared traces are cached in {cache_dir()} (${ENV_DIR}; clear it with "
            f"`pysched cache --clear` or rm -rf)")


class _Crc32:
    """zlib's CRC-32 behind hashlib's ``update`` and ``hexdigest``."""

    def __init__(self, data: bytes = b"") -> None:
        self.value = zlib.crc32(data)

    def update(self, data) -> None:
        self.value = zlib.crc32(data, self.value)

    def hexdigest(self) -> str:
        return f"{self.value:08x}"


@lru_cache(maxsize=8)
def code_digest(extra: tuple[str, ...] = ()) -> str:
    """SHA-256 over the :data:`SOURCES`, ``extra`` texts (e.g. a function's source), the
    :data:`LIBRARIES`' versions, Python's version and :data:`FORMAT` (computed once per
    process: the code of a running process does not change)."""
    files = sorted({f for pattern in SOURCES for f in _PACKAGE.glob(pattern)})
    return code_hash(FORMAT, LIBRARIES, files, _PACKAGE, extra).hexdigest()


@dataclass(frozen=True)
class Slot:
    """The place of one prepared trace in the cache.

    Attributes
    ----------
    root : pathlib.Path
        The cache directory.
    key : str
        :func:`entry_key`'s hex digest.
    label : str
        The trace directory's name, as the start of the entry's name.
    source : str
        The trace directory (resolved), recorded for removing its older entries.
    params : dict
        What besides the content and code entered the key (JSON values).
    """

    root: Path
    key: str
    label: str
    source: str
    params: dict

    @property
    def path(self) -> Path:
        """The entry's directory."""
        return self.root / f"{self.label}-{self.key[:32]}"


def entry_key(content: str, code: str, params: dict) -> str:
    """SHA-256 of a trace's :func:`trace_digest`, a :func:`code_digest` and parameters."""
    text = json.dumps({"format": FORMAT, "content": content, "code": code, "params": params},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def slot(root: Path, trace_dir: Path, params: dict, code: str,
         extra: Sequence[Path] = ()) -> Slot:
    """The :class:`Slot` of the trace in ``trace_dir`` prepared with ``params`` by ``code``
    (hashes the trace: :func:`trace_digest` with the ``extra`` files it depends on)."""
    label = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(trace_dir).name)
    return Slot(Path(root), entry_key(trace_digest(trace_dir, extra), code, params),
                label or "trace", str(Path(trace_dir).resolve()), params)


class Corrupt(Exception):
    """An entry that must not be used (the message says why)."""


def notice(text: str) -> None:
    """One line on stderr about the cache."""
    print(f"pysched: prepared-trace cache: {text}", file=sys.stderr, flush=True)


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, allow_nan=True).encode()


def _read_meta(entry: Path) -> dict:
    try:
        doc = json.loads((entry / _META).read_bytes())
        body = doc["body"]
        good = hashlib.sha256(_canonical(body)).hexdigest() == doc["sha256"]
    except FileNotFoundError:
        raise Corrupt(f"{_META} is missing") from None
    except (ValueError, KeyError, TypeError) as e:
        raise Corrupt(f"{_META} is unreadable ({type(e).__name__})") from None
    if not good:
        raise Corrupt(f"{_META} does not match its checksum")
    return body


def _read_array(path: Path, size: int, digest: str) -> np.ndarray:
    if size >= MMAP_BYTES:
        have, n = file_digest(path, _Crc32)
        if (n, have) != (size, digest):
            raise Corrupt(f"{path.name} has changed (size or checksum)")
        # copy-on-write: writes stay in this process, the file is never changed
        return np.asarray(np.load(path, mmap_mode="c", allow_pickle=False))
    data = path.read_bytes()
    if len(data) != size or _Crc32(data).hexdigest() != digest:
        raise Corrupt(f"{path.name} has changed (size or checksum)")
    return np.load(io.BytesIO(data), allow_pickle=False)


def load(where: Slot, classes: Sequence[type]) -> Any | None:
    """The value stored in ``where``, or None when there is none.

    An entry that is not whole and right (see the module docstring) is removed, with a line
    on stderr, and None returned: the caller rebuilds it.
    """
    entry = where.path
    try:
        ino = entry.stat().st_ino
    except OSError:
        return None
    try:
        body = _read_meta(entry)
        if body.get("format") != FORMAT or body.get("key") != where.key:
            raise Corrupt(f"written for another key or format ({body.get('format')!r})")
        arrays = {name: _read_array(entry / f["file"], f["bytes"], f["crc32"])
                  for name, f in body["files"].items()}
        return tree_codec.decode(body["value"], classes, arrays)
    except (Corrupt, OSError, ValueError, KeyError, TypeError) as e:
        try:
            if entry.stat().st_ino != ino:
                return None  # replaced meanwhile by another process: a plain miss
        except OSError:
            return None  # removed meanwhile by another process: a plain miss
        why = str(e) if isinstance(e, Corrupt) else f"{type(e).__name__}: {e}"
        notice(f"{entry}: {why}; removed, rebuilding")
        _remove(entry)
        return None


class _HashingFile:
    """A file that hashes and counts what is written to it (for ``np.lib.format``)."""

    def __init__(self, f) -> None:
        self.f, self.h, self.n = f, _Crc32(), 0

    def write(self, b) -> int:
        n = self.f.write(b)
        self.h.update(b)
        self.n += memoryview(b).nbytes
        return n


def save(where: Slot, value: Any, classes: Sequence[type]) -> Path | None:
    """Store ``value`` in ``where``; returns the entry, or None when it could not be written
    (a line on stderr says why; the caller goes on with ``value``).

    Raises
    ------
    TypeError
        When ``value`` holds something :mod:`~pysched.evaluation.tree_codec` cannot store.
    """
    arrays: dict[str, np.ndarray] = {}
    tree = tree_codec.encode(value, classes, arrays)
    tmp = where.root / f".tmp-{where.path.name}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        where.root.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        files = {}
        for i, (name, a) in enumerate(arrays.items()):
            fname = f"{i:03d}-{name}.npy"
            with open(tmp / fname, "wb") as raw:
                out = _HashingFile(raw)
                np.lib.format.write_array(out, np.asanyarray(a), allow_pickle=False)
            files[name] = {"file": fname, "bytes": out.n, "crc32": out.h.hexdigest()}
        body = {"format": FORMAT, "key": where.key, "source": where.source,
                "params": where.params, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "files": files, "value": tree}
        (tmp / _META).write_bytes(json.dumps(
            {"body": body, "sha256": hashlib.sha256(_canonical(body)).hexdigest()},
            sort_keys=True, allow_nan=True).encode())
        try:
            os.rename(tmp, where.path)
        except OSError:
            if not where.path.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process stored it first
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        notice(f"{where.path}: not stored ({e.strerror or e}); going on without it")
        return None
    _prune(where)
    return where.path


def present(where: Slot) -> bool:
    """Whether an entry is stored in ``where`` (whole or not: :func:`load` checks)."""
    return (where.path / _META).is_file()


@contextlib.contextmanager
def building(where: Slot) -> Iterator[bool]:
    """Hold ``where``'s build lock while the body builds and stores the entry; yields whether
    another process held it first (then the entry may be there now: look again).

    Without a writable cache directory the body runs unlocked (it cannot store the entry
    either, :func:`save`)."""
    lock = where.root / f".lock-{where.path.name}"
    try:
        where.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    try:
        waited = False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waited = True
            fcntl.flock(fd, fcntl.LOCK_EX)  # another process builds it: wait for it
        yield waited
    finally:
        os.close(fd)  # releases the lock


def _remove(entry: Path) -> None:
    """Rename ``entry`` away (atomically: no reader sees it half deleted), then delete it."""
    gone = entry.with_name(f".trash-{entry.name}-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.rename(entry, gone)
    except OSError:
        return  # already removed by another process
    shutil.rmtree(gone, ignore_errors=True)


def _prune(where: Slot) -> None:
    """Remove the entries of the same trace directory and parameters under other keys, and
    dead writers' leftovers."""
    for entry in where.root.glob(f"{where.label}-*"):
        if entry == where.path:
            continue
        try:
            body = _read_meta(entry)
        except (Corrupt, OSError):
            continue  # someone else's, or being removed: its own lookup deals with it
        if body.get("source") == where.source and body.get("params") == where.params:
            _remove(entry)
    now = time.time()
    for left in [*where.root.glob(".tmp-*"), *where.root.glob(".trash-*"),
                 *where.root.glob(".lock-*")]:
        try:
            old = now - left.stat().st_mtime > LEFTOVER_S
        except OSError:
            continue
        if old and left.name.startswith(".lock-"):
            # an old lock file: a holder (if any) keeps its lock; a later builder makes a new
            # file, at worst building an entry twice
            with contextlib.suppress(OSError):
                left.unlink()
        elif old:
            shutil.rmtree(left, ignore_errors=True)


def entries(root: Path | None = None) -> list[tuple[Path, int]]:
    """The entries in the cache directory and their sizes in bytes."""
    root = cache_dir() if root is None else Path(root)
    if not root.is_dir():
        return []
    out = []
    for entry in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        out.append((entry, sum(f.stat().st_size for f in entry.iterdir() if f.is_file())))
    return out


def clear(root: Path | None = None) -> int:
    """Remove every entry (and leftover) of the cache directory; returns the entries removed."""
    root = cache_dir() if root is None else Path(root)
    if not root.is_dir():
        return 0
    n = 0
    for entry in list(root.iterdir()):
        if entry.name.startswith(".lock-") and entry.is_file():
            entry.unlink(missing_ok=True)  # a holder keeps its lock on the unlinked file
        elif entry.is_dir():
            n += not entry.name.startswith(".")
            if entry.name.startswith(".trash-"):
                shutil.rmtree(entry, ignore_errors=True)
            else:
                _remove(entry)
    return n


__all__ = ["ENV_DIR", "FORMAT", "LIBRARIES", "SOURCES", "Slot", "building", "cache_dir",
           "clear", "code_digest", "describe", "entries", "entry_key", "load", "notice",
           "present", "save", "slot", "trace_digest"]
