"""Independent pieces of one command (one trace of ``analyse``, one seed of ``seeds``) on
worker processes, so that a command uses every core of the machine it runs on.

Workers are started with ``spawn``: the parent has imported numpy, Arrow and numba and may
hold their threads, which a forked child must not inherit. They ignore Ctrl-C (the parent
handles it, and SIGTERM and SIGHUP, by terminating them) and leave when the parent's pipe
closes. With one job everything runs in this process as a plain loop (what tests that patch a
module use).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from typing import Callable, Iterator, Sequence, TypeVar

from pysched import _limits, _signals

T = TypeVar("T")
R = TypeVar("R")


def default_jobs(pieces: int, asked: int | None = None) -> int:
    """Worker processes for ``pieces``: ``asked`` (default one per core), never more than
    there are pieces, and at least one."""
    return max(1, min(asked or os.cpu_count() or 1, pieces))


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides, and terminates us
    _limits.lean_process()


def _call(job: tuple[Callable, int, object]) -> tuple[int, object]:
    fn, i, item = job
    return i, fn(item)


class Jobs:
    """A pool of ``jobs`` worker processes for one command (a context manager).

    Parameters
    ----------
    jobs : int
        Worker processes; 1 (or less) runs every piece in this process, in order.

    Notes
    -----
    An exception raised by a piece is raised by :meth:`run`; the workers are terminated on
    leaving the context, also on that exception, Ctrl-C, SIGTERM or SIGHUP.
    """

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, int(jobs))
        self._pool = None
        self._unwinding = None

    def __enter__(self) -> "Jobs":
        if self.jobs > 1:
            # SIGTERM and SIGHUP unwind like Ctrl-C: the workers are terminated on the way out
            self._unwinding = _signals.unwinding()
            self._unwinding.__enter__()
            try:
                self._pool = multiprocessing.get_context("spawn").Pool(
                    self.jobs, initializer=_worker_init)
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.terminate()
            with contextlib.suppress(Exception):
                self._pool.join()
            self._pool = None
        if self._unwinding is not None:
            self._unwinding.__exit__(None, None, None)
            self._unwinding = None

    def run(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        """``(index, fn(item))`` for every item, in the order they finish (``fn`` a
        module-level function and the items picklable: they go to the workers)."""
        if self._pool is None:
            for i, item in enumerate(items):
                yield i, fn(item)
            return
        yield from self._pool.imap_unordered(_call, [(fn, i, x) for i, x in enumerate(items)])


__all__ = ["Jobs", "default_jobs"]
