"""A core's run queue: a list of :class:`~.simview.Work` that counts its interrupts and bottom
halves, so that "does an interrupt wait here?" costs nothing however long the queue.

The engine asks that question at every scheduling point (``_async_preempts``) and the
policies' :meth:`~pysched.policies.base.Policy.interrupts_first` at every pick; scanning a
queue of thousands of threads (an OS core of a core-split policy at 2X) for an interrupt that
is not there made those the replay's cost. Policies read queues and never modify them
(:meth:`~.simview.SimView.queue`); the engine modifies them only through the methods below, and the others raise.
"""
from __future__ import annotations

from pysched.superfunctions.functype import Category

_INTERRUPT = int(Category.INTERRUPT)


class RunQueue(list):
    """A list of work items, head first, with :attr:`irqs` and :attr:`bhs`: how many hardware
    interrupts and bottom halves (async items that are not interrupts) it holds."""

    __slots__ = ("irqs", "bhs")

    def __init__(self, items=()) -> None:
        super().__init__()
        self.irqs = 0
        self.bhs = 0
        for wk in items:
            self.append(wk)

    def _count(self, wk, step: int) -> None:
        if wk.is_async:
            if wk.category == _INTERRUPT:
                self.irqs += step
            else:
                self.bhs += step

    def append(self, wk) -> None:
        super().append(wk)
        self._count(wk, 1)

    def insert(self, idx: int, wk) -> None:
        super().insert(idx, wk)
        self._count(wk, 1)

    def pop(self, idx: int = -1):
        wk = super().pop(idx)
        self._count(wk, -1)
        return wk

    def remove(self, wk) -> None:
        super().remove(wk)
        self._count(wk, -1)

    def __delitem__(self, idx: int) -> None:
        if not isinstance(idx, int):
            raise TypeError("a run queue deletes one item at a time")
        self._count(self[idx], -1)
        super().__delitem__(idx)

    def _refuse(self, *args, **kwargs):
        raise TypeError("a run queue changes through append, insert, pop, remove and del only")

    extend = clear = __setitem__ = __iadd__ = sort = reverse = _refuse
