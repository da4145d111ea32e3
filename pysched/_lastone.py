"""One result kept for the objects it was computed from, for the next call with the same
ones: a sweep's worker or a study replays one trace after another, and rebuilding what depends
only on the trace (item streams, the switch path's stream) each time costs 10 ms to 1 s."""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any


class LastOne:
    """A cache of one entry: the value :meth:`get` built last, with weak references to the
    objects it was built from (so the cache never keeps them alive) and a plain key."""

    def __init__(self) -> None:
        self._entry: tuple | None = None

    def get(self, objs: tuple, key: Any, build: Callable[[], Any]) -> Any:
        """``build()``'s value, or the kept one when it was built from the very objects
        ``objs`` (compared by identity) and an equal ``key``. The kept entry is dropped before
        a new one is built, so that two never live together; objects that take no weak
        references are not kept."""
        e = self._entry
        if e is not None and e[1] == key and all(r() is o for r, o in zip(e[0], objs)):
            return e[2]
        self._entry = None
        value = build()
        try:
            self._entry = (tuple(weakref.ref(o) for o in objs), key, value)
        except TypeError:
            pass
        return value
