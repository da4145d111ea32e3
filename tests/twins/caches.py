"""Slow, obviously-correct twins of the cache kernels (plain Python, one object per cache).

Each set is a Python list of ``[line, dirty]`` in the policy's order (index 0 first): LRU most
recent first, FIFO newest fill first, random in fill order until full, then replaced in place
by the same xorshift draws as the kernel. The hierarchy twin spells out the rules of
``pysched/models/caches/kernels.py``'s docstrings in straight-line code.
"""
from __future__ import annotations

M64 = (1 << 64) - 1


class XorShift:
    def __init__(self, state: int) -> None:
        self.x = state

    def next(self) -> int:
        x = self.x
        x ^= (x << 13) & M64
        x ^= x >> 7
        x ^= (x << 17) & M64
        self.x = x
        return x


def seed_state(seed: int) -> int:
    from pysched.models.caches.policies import rng_state
    return rng_state(seed)


class SlowCache:
    def __init__(self, sets: int, ways: int, policy: str, rng: XorShift) -> None:
        self.sets, self.ways, self.policy, self.rng = sets, ways, policy, rng
        self.data = [[] for _ in range(sets)]

    def _set(self, line: int) -> list:
        return self.data[line % self.sets]

    def find(self, line: int):
        for e in self._set(line):
            if e[0] == line:
                return e
        return None

    def touch(self, line: int) -> None:
        """A demand hit."""
        s = self._set(line)
        if self.policy == "lru":
            e = self.find(line)
            s.remove(e)
            s.insert(0, e)

    def fill(self, line: int, dirty: int):
        """Insert; return the evicted [line, dirty] or None."""
        s = self._set(line)
        if len(s) < self.ways:
            s.insert(0, [line, dirty])
            return None
        if self.policy == "random":
            j = self.rng.next() % self.ways
            old = s[j]
            s[j] = [line, dirty]
            return old
        old = s.pop()
        s.insert(0, [line, dirty])
        return old

    def remove(self, line: int):
        """Invalidate; return the removed entry or None."""
        e = self.find(line)
        if e is not None:
            self._set(line).remove(e)
        return e

    def lines(self) -> list[int]:
        return sorted(e[0] for s in self.data for e in s)


def slow_single(addr, store, sets, ways, line_size, policy, seed=1):
    """Single cache: (hits list, writebacks, cache)."""
    c = SlowCache(sets, ways, policy, XorShift(seed_state(seed)))
    hits, wb = [], 0
    for a, st in zip(addr, store):
        ln = int(a) // line_size
        e = c.find(ln)
        if e is not None:
            if st:
                e[1] = 1
            c.touch(ln)
            hits.append(1)
        else:
            old = c.fill(ln, 1 if st else 0)
            if old is not None and old[1]:
                wb += 1
            hits.append(0)
    return hits, wb, c


EV = {"wb_l1d": 0, "wb_l2": 1, "wb_l3": 2, "wbmiss_l2": 3, "wbmiss_l3": 4, "backinv": 5,
      "cohinv": 6, "cohwb": 7, "l3held": 8}


class SlowHierarchy:
    def __init__(self, cfg, classes: int) -> None:
        self.cfg = cfg
        self.rng = XorShift(seed_state(cfg.seed))
        mk = lambda c: SlowCache(c.sets, c.ways, c.policy, self.rng)  # noqa: E731
        self.priv = [[mk(cfg.l1i), mk(cfg.l1d), mk(cfg.l2)] for _ in range(cfg.cores)]
        self.l3 = mk(cfg.l3)
        self.served = [[[[0] * 4 for _ in range(3)] for _ in range(classes)]
                       for _ in range(cfg.cores)]
        self.events = [[0] * len(EV) for _ in range(cfg.cores)]

    def ev(self, c, name):
        self.events[c][EV[name]] += 1

    # write-backs and evictions
    def dropped_dirty(self, c, old, caches):
        """An entry a level evicted: with inclusion, remove its copies from ``caches``
        (back-invalidation); whether it or a copy was dirty."""
        dirty = old[1]
        if self.cfg.inclusive:
            for cache in caches:
                e = cache.remove(old[0])
                if e is not None:
                    self.ev(c, "backinv")
                    dirty = dirty or e[1]
        return dirty

    def l3_evicted(self, c, old):
        every_private = [cache for caches in self.priv for cache in caches]
        if old is not None and self.dropped_dirty(c, old, every_private):
            self.ev(c, "wb_l3")

    def l3_writeback(self, c, line):
        self.writeback(c, self.l3, line, "wbmiss_l3", self.l3_evicted)

    def l2_evicted(self, c, old):
        if old is not None and self.dropped_dirty(c, old, self.priv[c][:2]):
            self.ev(c, "wb_l2")
            self.l3_writeback(c, old[0])

    def l2_writeback(self, c, line):
        self.writeback(c, self.priv[c][2], line, "wbmiss_l2", self.l2_evicted)

    def writeback(self, c, cache, line, miss_event, evicted):
        """A dirty line arrives at ``cache``: a hit only marks it dirty, a miss allocates it
        dirty and ``evicted`` handles the victim."""
        e = cache.find(line)
        if e is not None:
            e[1] = 1
            return
        self.ev(c, miss_event)
        evicted(c, cache.fill(line, 1))

    def access(self, c, addr, kind, cls):
        line = int(addr) // self.cfg.line
        st = kind == 2
        l1 = self.priv[c][0 if kind == 0 else 1]
        l2 = self.priv[c][2]
        was_dirty = 0
        e = l1.find(line)
        if e is not None:
            if st:
                was_dirty = e[1]
                e[1] = 1
            l1.touch(line)
            served = 0
        else:
            if l2.find(line) is not None:
                l2.touch(line)
                served = 1
            else:
                if self.l3.find(line) is not None:
                    self.l3.touch(line)
                    served = 2
                else:
                    served = 3
                    if any(cache.find(line) is not None for o in range(self.cfg.cores)
                           if o != c for cache in self.priv[o]):
                        self.ev(c, "l3held")
                    self.l3_evicted(c, self.l3.fill(line, 0))
                if self.cfg.coherence and not st:
                    for o in range(self.cfg.cores):
                        if o == c:
                            continue
                        for cache in self.priv[o][1:]:
                            e2 = cache.find(line)
                            if e2 is not None and e2[1]:
                                e2[1] = 0
                                self.ev(c, "cohwb")
                                self.l3_writeback(c, line)
                self.l2_evicted(c, l2.fill(line, 0))
            old = l1.fill(line, 1 if st else 0)
            if old is not None and old[1]:
                self.ev(c, "wb_l1d")
                self.l2_writeback(c, old[0])
        if st and self.cfg.coherence and not was_dirty:
            for o in range(self.cfg.cores):
                if o == c:
                    continue
                for cache in self.priv[o]:
                    e2 = cache.remove(line)
                    if e2 is not None:
                        self.ev(c, "cohinv")
                        if e2[1]:
                            self.ev(c, "cohwb")
                            self.l3_writeback(c, line)
        self.served[c][cls][kind][served] += 1
        return served

    def run(self, c, addr, kind, cls):
        return [self.access(c, a, int(k), int(q)) for a, k, q in zip(addr, kind, cls)]


def slow_find(tags, base: int, ways: int, line: int) -> int:
    """Twin of ``simd.find``: flat index of ``line`` among the ways at ``base``, or -1."""
    for i in range(base, base + ways):
        if tags[i] == line:
            return i
    return -1


def slow_oldest(stamp, base: int, ways: int) -> int:
    """Twin of ``simd.oldest``: flat index of the first smallest stamp of the set."""
    ways_stamps = [int(stamp[i]) for i in range(base, base + ways)]
    return base + ways_stamps.index(min(ways_stamps))


def slow_victim(rank, base: int, ways: int) -> int:
    """Twin of ``ranks.victim``: the way of the set at ``base`` ranked ``ways - 1``."""
    return [int(r) for r in rank[base:base + ways]].index(ways - 1)


def slow_touch(rank, base: int, way: int) -> None:
    """Twin of ``ranks.touch``: ``way`` ranked 0, the ways ranked below it one older."""
    r = int(rank[base + way])
    for i in range(base, base + 16):
        if rank[i] < r:
            rank[i] += 1
    rank[base + way] = 0
