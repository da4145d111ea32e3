"""Keeping a ``pysched`` command's address space small, and failing in one line when a limit
(``ulimit -v``, as batch schedulers set) is below what it needs.

Most of a command's address space is not memory it uses but reservations: Arrow's mimalloc
pool maps a large arena at first use, glibc gives each thread its own 64 MiB malloc arena,
and OpenBLAS starts a thread per core with its own buffers. Measured on ``analyse
data/apache`` (before any trace data is read): 2.0 GB of address space with the defaults,
0.63 GB with the system allocator for Arrow, one malloc arena and one BLAS thread
(:func:`lean_process`). The commands use no BLAS routine on their hot paths and Arrow's
allocations are large and few, so neither costs speed.
"""
from __future__ import annotations

import ctypes
import errno
import os
import resource

#: glibc's ``mallopt`` parameter for the number of malloc arenas (``M_ARENA_MAX``).
_M_ARENA_MAX = -8

#: Peak address space measured per command (bytes, VmPeak, rounded up), the figure named
#: when a limit is too low: ``analyse`` of all shipped traces in one run (1.18 GB),
#: ``evaluate`` at its benchmark's setting (apache, 8 cores, 4X: 1.32 GB), ``check`` of
#: apache (0.93 GB). See the README, "Faults and bad input".
NEEDS: dict[str, float] = {"analyse": 1.3e9, "evaluate": 1.4e9, "check": 1.0e9}
#: Below this limit no command starts (the libraries' own mappings take about 0.65 GB).
FLOOR = 0.75e9


def lean_process() -> None:
    """Set the allocators and thread pools for a small address space.

    Call before numpy and pyarrow are imported (environment variables are read then);
    values the user has set are kept.
    """
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, 2)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


def address_space_limit() -> int | None:
    """The soft ``RLIMIT_AS`` in bytes, None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def too_small(command: str) -> str | None:
    """A one-line error when the address-space limit is below :data:`FLOOR` (a command
    that reads traces cannot even load its libraries), else None."""
    limit = address_space_limit()
    if limit is None or command not in NEEDS or limit >= FLOOR:
        return None
    return out_of_memory(command)


def out_of_memory(command: str) -> str:
    """The one-line error for a command that ran out of address space."""
    limit = address_space_limit()
    have = "unlimited" if limit is None else f"{limit / 1e9:.2f} GB ({limit // 1024} kB)"
    need = NEEDS.get(command)
    want = (f"; it was measured to need up to {need / 1e9:.1f} GB on the shipped traces "
            f"(ulimit -v {int(need) // 1024})" if need else "")
    return (f"pysched {command}: out of memory: the address-space limit (ulimit -v) is "
            f"{have}{want}")


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is how Python, numpy, Arrow or threads report exhausted memory."""
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't start new thread" in text
                                              or "Cannot allocate memory" in text)
