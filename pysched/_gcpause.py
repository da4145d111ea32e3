"""Python's cyclic garbage collector paused around a replay.

The sandbox's event loop makes and frees millions of small objects (heap events, work items,
run-queue entries), none of them in a reference cycle: reference counting frees every one.
The cyclic collector still runs after every 700 allocations and, now and then, walks every
object the process holds (a prepared workload's per-item tuples and lists among them). On
netserver-10b at 8 cores, 2X, turning it off made replays 2-15 % faster at the median
(as-traced, linux, disaggregate-os; one process, the modes alternated, 4 rounds twice), and
the slowest ones went: 1.17-1.24 s with the collector on against 0.87-0.93 s under
as-traced. No registered policy makes cyclic garbage during a replay (a collection at
every epoch's end found none, on netserver-10b and find under each of them), so nothing waits
for the collector meanwhile; a user's policy that does gets it collected once the replay ends.
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_inside = 0
_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """Turn the cyclic collector off for the ``with`` block, and back on when the last thread
    inside has left (only if it was on when the first came in)."""
    global _inside, _was_enabled
    with _lock:
        if _inside == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _was_enabled:
                gc.enable()
