"""A core's run queue: a list of :class:`~.simview.Work` that counts its interrupts and bottom
halves and its items of each superFuncType, so that "does an interrupt wait here?" and "is
work of these types queued here?" cost nothing however long the queue.

The engine asks the first at every scheduling point (``_async_preempts``) and the policies'
:meth:`~pysched.policies.base.Policy.interrupts_first` at every pick, SchedTask's steal the
second of every other core; scanning queues of thousands of threads (an OS core of a
core-split policy at 2X) for what is not there would make those the replay's cost. Policies
read queues and never modify them (:meth:`~.simview.SimView.queue`); the engine modifies them
only through the methods below, and the others raise.
"""
from __future__ import annotations

from pysched.superfunctions.functype import Category

_INTERRUPT = int(Category.INTERRUPT)


class RunQueue(list):
    """A list of work items, head first, that also keeps its hardware interrupts
    (:attr:`irq_items`) and bottom halves (:attr:`bh_items`) in queue order; :attr:`irqs` and
    :attr:`bhs` count them, and :attr:`type_count` counts the items of each type id (only types
    with items queued are keys); :attr:`version` grows with every change (a policy may keep
    what it computed from the queue until it does)."""

    __slots__ = ("irq_items", "bh_items", "type_count", "version")

    def __init__(self, items=()) -> None:
        super().__init__()
        self.irq_items: list = []
        self.bh_items: list = []
        self.type_count: dict[int, int] = {}
        self.version = 0
        for wk in items:
            self.append(wk)

    @property
    def irqs(self) -> int:
        return len(self.irq_items)

    @property
    def bhs(self) -> int:
        return len(self.bh_items)

    def _side(self, wk) -> list:
        return self.irq_items if wk.category == _INTERRUPT else self.bh_items

    def _added(self, wk) -> None:
        self.version += 1
        tc = self.type_count
        tc[wk.type_id] = tc.get(wk.type_id, 0) + 1

    def append(self, wk) -> None:
        super().append(wk)
        self._added(wk)
        if wk.is_async:
            self._side(wk).append(wk)

    def insert(self, idx: int, wk) -> None:
        if wk.is_async:
            side = self._side(wk)
            # its place among its kind: those before ``idx`` (the engine inserts at 0)
            before = 0 if idx == 0 else sum(1 for x in self[:idx] if x.is_async
                                            and self._side(x) is side)
            side.insert(before, wk)
        super().insert(idx, wk)
        self._added(wk)

    def _gone(self, wk) -> None:
        self.version += 1
        tc = self.type_count
        n = tc[wk.type_id] - 1
        if n:
            tc[wk.type_id] = n
        else:
            del tc[wk.type_id]
        if wk.is_async:
            self._side(wk).remove(wk)

    def pop(self, idx: int = -1):
        wk = super().pop(idx)
        self._gone(wk)
        return wk

    def remove(self, wk) -> None:
        super().remove(wk)
        self._gone(wk)

    def __delitem__(self, idx: int) -> None:
        if not isinstance(idx, int):
            raise TypeError("a run queue deletes one item at a time")
        wk = self[idx]
        super().__delitem__(idx)
        self._gone(wk)

    def first_async(self, bottom_halves: bool = True) -> int | None:
        """Index of the first hardware interrupt, else of the first bottom half (when
        ``bottom_halves``); None when there is none. A C-level search for a known item, not
        a Python loop over the queue."""
        if self.irq_items:
            return self.index(self.irq_items[0])
        if bottom_halves and self.bh_items:
            return self.index(self.bh_items[0])
        return None

    def _refuse(self, *args, **kwargs):
        raise TypeError("a run queue changes through append, insert, pop, remove and del only")

    extend = clear = __setitem__ = __iadd__ = sort = reverse = _refuse
