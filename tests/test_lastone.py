"""pysched._lastone: one result kept for the objects it was built from."""
from __future__ import annotations

import gc

from pysched._lastone import LastOne


class Obj:
    pass


def test_kept_for_the_same_objects_and_key_only():
    cache, a, b = LastOne(), Obj(), Obj()
    built = []

    def build():
        built.append(1)
        return object()

    v = cache.get((a,), 1, build)
    assert cache.get((a,), 1, build) is v and len(built) == 1
    assert cache.get((b,), 1, build) is not v and len(built) == 2
    w = cache.get((b,), 2, build)
    assert len(built) == 3 and cache.get((b,), 2, build) is w


def test_it_keeps_no_object_alive_and_skips_what_takes_no_weak_reference():
    cache, a = LastOne(), Obj()
    cache.get((a,), None, object)
    del a
    gc.collect()
    assert cache._entry[0][0]() is None
    n = []
    cache.get(((1, 2),), None, lambda: n.append(1))  # a tuple takes no weak reference
    cache.get(((1, 2),), None, lambda: n.append(1))
    assert n == [1, 1]
