"""A single set-associative cache (e.g. an L1 on its own)."""
from __future__ import annotations

import numpy as np

from ..stats import SingleCacheStats
from . import ranks, simd, validate
from .config import CacheConfig
from .kernels import _run_cache
from .packed import Packed
from .policies import RANDOM, rng_state
from .policies.lru import INVALID
from .simd import PAD


class Cache(Packed):
    """One write-back, write-allocate set-associative cache whose state persists across runs.

    Parameters
    ----------
    config : CacheConfig
        Geometry and policy.
    classes : int
        Number of requester classes that statistics are kept for (``cls`` ids below it).
    seed : int
        Seed of the random policy's generator.

    Examples
    --------
    >>> c = Cache(CacheConfig(size=1024, ways=2, line=64))
    >>> c.run(np.array([0, 8, 64, 0], dtype=np.uint64)).tolist()
    [0, 1, 0, 1]
    """

    def __init__(self, config: CacheConfig, classes: int = 2, seed: int = 1) -> None:
        if not isinstance(config, CacheConfig):
            raise TypeError(f"config must be a CacheConfig, got {type(config).__name__}")
        if not isinstance(classes, int) or not 1 <= classes <= 65536:
            raise ValueError(f"classes must be an integer in 1..65536, got {classes!r}")
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.config = config
        self.classes = classes
        n = config.sets * config.ways
        # tags and stamps are read a whole set at a time: PAD spare elements, and sets that do
        # not straddle host cache lines (see simd)
        self.tags = simd.full(n + PAD, -1, np.int64)
        self.dirty = np.zeros(n, dtype=np.uint8)
        # replacement state of LRU and FIFO (see policies.lru) and the clock stamps come from
        self._stamp = simd.full(n + PAD, INVALID, np.int64)
        self._clock = np.zeros(1, dtype=np.int64)
        # 2 to 16 ways of LRU or FIFO keep their order as ranks instead (see ranks)
        self._ranked = 2 <= config.ways <= ranks.STRIDE and config.policy_code != RANDOM
        self._rank = ranks.initial(config.sets, config.ways) if self._ranked \
            else np.zeros(0, np.uint8)
        # xorshift must not start at 0
        self._rng = np.array([rng_state(seed)], dtype=np.uint64)
        self._counts = np.zeros((classes, 2, 2), dtype=np.int64)
        self._events = np.zeros(1, dtype=np.int64)
        self._hist = np.zeros(4 * classes * 4, dtype=np.int64)  # scratch of the kernel
        self._pack()

    @property
    def stats(self) -> SingleCacheStats:
        """Cumulative counters (a snapshot)."""
        return SingleCacheStats(self._counts.copy(), int(self._events[0]))

    def run(self, addr, store=None, cls=None) -> np.ndarray:
        """Access ``addr`` in order.

        Parameters
        ----------
        addr : array of uint64
            Byte addresses (the line is ``addr >> log2(line)``).
        store : array of bool/uint8, optional
            1 for a store (write-allocate, marks the line dirty); default all loads.
        cls : array of int, optional
            Requester class of each access (below ``classes``); default 0.

        Returns
        -------
        numpy.ndarray of uint8
            1 where the access hit.
        """
        addr, store, cls = validate.stream(addr, store, cls, self.classes, kinds=2)
        hit = np.empty(len(addr), dtype=np.uint8)
        head, tail = self._args       # packed once (see Packed)
        _run_cache(*head, addr, store, cls, hit, *tail)
        return hit

    def _pack(self) -> None:
        """The kernel's arguments before and after the accesses of a run."""
        cfg = self.config
        self._args = ((self.tags, self.dirty, self._stamp, self._rank, self._clock, self._rng,
                       cfg.sets - 1, cfg.ways, cfg.line_shift, cfg.policy_code),
                      (self._counts.reshape(-1), self._events, self._hist))

    def reset_stats(self) -> None:
        """Zero the counters, keeping the contents."""
        self._counts[:] = 0
        self._events[:] = 0

    def flush(self) -> None:
        """Invalidate every line (dirty lines are dropped, not counted)."""
        self.tags[:] = -1
        self.dirty[:] = 0
        self._stamp[:] = INVALID
        if self._ranked:
            self._rank[:] = ranks.initial(self.config.sets, self.config.ways)

    def contains(self, addr: int) -> bool:
        """Whether the line of byte address ``addr`` is cached."""
        cfg = self.config
        line = int(addr) >> cfg.line_shift
        base = (line & (cfg.sets - 1)) * cfg.ways
        return bool((self.tags[base:base + cfg.ways] == line).any())
