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

from bisect import bisect_left
from operator import attrgetter

from pysched.superfunctions.functype import Category

_INTERRUPT = int(Category.INTERRUPT)
_QKEY = attrgetter("qkey")
# Below this length a C-level scan finds an item faster than a bisection on its order key.
_SCAN_LEN = 48


class RunQueue(list):
    """A list of work items, head first, that also keeps its hardware interrupts
    (:attr:`irq_items`) and bottom halves (:attr:`bh_items`) in queue order; :attr:`irqs` and
    :attr:`bhs` count them, and :attr:`type_count` counts the items of each type id (only types
    with items queued are keys); :attr:`version` grows with every change (a policy may keep
    what it computed from the queue until it does).

    Each item queued gets an order key (``Work.qkey``): one more than the last at the tail,
    one less than the first at the head. The engine only appends and inserts at the head, so
    the keys grow along the queue and an item's place is a bisection of :attr:`_keys` (the
    keys in queue order, a list of ints: no item is read), checked by identity (a scan when
    the check fails or the queue was ever inserted into elsewhere).

    ``tally[slot]`` counts the queued items that are not interrupts or bottom halves (its
    threads); the engine gives each core's queue its slot of one list (by default a queue
    has a tally of its own)."""

    __slots__ = ("irq_items", "bh_items", "type_count", "version", "_head", "_tail", "_ordered",
                 "_keys", "_tally", "_slot")

    def __init__(self, items=(), tally: list[int] | None = None, slot: int = 0) -> None:
        super().__init__()
        self._tally = [0] if tally is None else tally
        self._slot = slot
        self.irq_items: list = []
        self.bh_items: list = []
        self.type_count: dict[int, int] = {}
        self.version = 0
        self._head = 0
        self._tail = 0
        self._ordered = True
        self._keys: list[int] = []
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
        wk.qkey = self._tail
        self._tail += 1
        list.append(self, wk)
        self._keys.append(wk.qkey)
        self._added(wk)
        if wk.is_async:
            self._side(wk).append(wk)
        else:
            self._tally[self._slot] += 1

    def insert(self, idx: int, wk) -> None:
        if wk.is_async:
            side = self._side(wk)
            # its place among its kind: those before ``idx`` (the engine inserts at 0)
            before = 0 if idx == 0 else sum(1 for x in self[:idx] if x.is_async
                                            and self._side(x) is side)
            side.insert(before, wk)
        else:
            self._tally[self._slot] += 1
        if idx == 0:
            self._head -= 1
            wk.qkey = self._head
        else:
            self._ordered = False
            wk.qkey = 0  # unordered from now on: keys no longer place items
        super().insert(idx, wk)
        self._keys.insert(idx, wk.qkey)
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
            side = self._side(wk)
            # in queue order too: a long one finds its place by the order keys (position)
            i = (bisect_left(side, wk.qkey, key=_QKEY)
                 if self._ordered and len(side) > _SCAN_LEN else -1)
            if 0 <= i < len(side) and side[i] is wk:
                del side[i]
            else:
                side.remove(wk)
        else:
            self._tally[self._slot] -= 1

    @property
    def threads(self) -> int:
        """Queued items that are neither interrupts nor bottom halves."""
        return self._tally[self._slot]

    def pop(self, idx: int = -1):
        wk = list.pop(self, idx)
        del self._keys[idx]
        self._gone(wk)
        return wk

    def remove(self, wk) -> None:
        del self[self.index(wk)]

    def __delitem__(self, idx: int) -> None:
        if not isinstance(idx, int):
            raise TypeError("a run queue deletes one item at a time")
        wk = self[idx]
        super().__delitem__(idx)
        del self._keys[idx]
        self._gone(wk)

    def first_async(self, bottom_halves: bool = True) -> int | None:
        """Index of the first hardware interrupt, else of the first bottom half (when
        ``bottom_halves``); None when there is none. A C-level search for a known item, not
        a Python loop over the queue."""
        if self.irq_items:
            return self.position(self.irq_items[0])
        if bottom_halves and self.bh_items:
            return self.position(self.bh_items[0])
        return None

    def position(self, wk) -> int:
        """Index of ``wk``, which is queued here: a bisection on the order keys, checked."""
        if self._ordered and len(self) > _SCAN_LEN:
            i = bisect_left(self._keys, wk.qkey)
            if i < len(self) and self[i] is wk:
                return i
        return self.index(wk)

    def _refuse(self, *args, **kwargs):
        raise TypeError("a run queue changes through append, insert, pop, remove and del only")

    extend = clear = __setitem__ = __iadd__ = sort = reverse = _refuse
