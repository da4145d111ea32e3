"""Per-core private L1i, L1d and L2 and a shared L3, with statistics per core and class."""
from __future__ import annotations

import numpy as np

from ..codes import NEVENTS, NKINDS, NLEVELS
from ..stats import CacheStats
from . import ranks, sharers, simd, validate
from .config import HierarchyConfig
from .kernels import G_MASK, G_POLICY, G_WAYS, _run_hierarchy
from .levelwise import BLOCK, FILTER_ABOVE, TOUCH_BITS, _run_levelwise
from .packed import Packed
from .policies import RANDOM, rng_state
from .policies.lru import INVALID
from .simd import PAD


class Hierarchy(Packed):
    """The cache hierarchy of a multicore, whose state persists across runs (epochs).

    Each core has a private L1i, L1d and L2; all cores share the L3. Instruction fetches go to
    the L1i, loads and stores to the L1d; a miss continues down and fills every level on its
    way back. Running a thread's accesses on another core finds that core's caches as they are:
    there is no per-thread state.

    Parameters
    ----------
    config : HierarchyConfig
        Levels, memory latency, core count, inclusion and coherence.
    classes : int
        Number of requester classes kept apart in the statistics (e.g. 2 for application and
        OS, or the number of superFuncType ids).

    Notes
    -----
    A non-inclusive, non-coherent hierarchy of LRU and FIFO levels (the default, Table 2) is
    run one level at a time over blocks of accesses (:mod:`.levelwise`), any other access by
    access (:mod:`.kernels`); both give the same results.

    Attributes
    ----------
    stats : CacheStats
        Cumulative counters (a snapshot each time it is read); subtract two snapshots for the
        delta of an epoch.
    """

    def __init__(self, config: HierarchyConfig | None = None, classes: int = 2) -> None:
        config = HierarchyConfig() if config is None else config
        if not isinstance(config, HierarchyConfig):
            raise TypeError(f"config must be a HierarchyConfig, got {type(config).__name__}")
        if not isinstance(classes, int) or not 1 <= classes <= 65536:
            raise ValueError(f"classes must be an integer in 1..65536, got {classes!r}")
        self.config = config
        self.classes = classes
        cores = config.cores
        levels = config.levels
        # Instances: level p (0 L1i, 1 L1d, 2 L2) of core c is p * cores + c; the L3 last.
        sizes = [levels[p].sets * levels[p].ways for p in range(3) for _ in range(cores)]
        sizes.append(levels[3].sets * levels[3].ways)
        self._off = np.zeros(len(sizes), dtype=np.int64)
        np.cumsum(sizes[:-1], out=self._off[1:])
        total = int(sum(sizes))
        self._geo = np.zeros((4, 3), dtype=np.int64)
        for p, lv in enumerate(levels):
            self._geo[p, G_MASK] = lv.sets - 1
            self._geo[p, G_WAYS] = lv.ways
            self._geo[p, G_POLICY] = lv.policy_code
        # tags and stamps are read a whole set at a time: PAD spare elements, and sets that do
        # not straddle host cache lines (see simd)
        self.tags = simd.full(total + PAD, -1, np.int64)
        self.dirty = np.zeros(total, dtype=np.uint8)
        # replacement state of LRU and FIFO (see policies.lru) and the clock stamps come from
        self._stamp = simd.full(total + PAD, INVALID, np.int64)
        self._clock = np.zeros(1, dtype=np.int64)
        self._rng = np.array([rng_state(config.seed)], dtype=np.uint64)
        self._served = np.zeros((cores, classes, NKINDS, NLEVELS), dtype=np.int64)
        self._events = np.zeros((cores, NEVENTS), dtype=np.int64)
        # One level at a time when no level reaches into another (see levelwise): the same
        # results, with an L1 loop that does nothing else
        self._levelwise = (not config.inclusive and not config.coherence
                           and all(lv.policy_code != RANDOM for lv in levels)
                           and max(config.l1i.ways, config.l1d.ways) <= simd.LANES)
        # The level-at-a-time L1s keep their order as ranks (see ranks): L1i of each core, then
        # L1d of each core
        l1_sets = [levels[p].sets for p in range(2) for _ in range(cores)]
        self._roff = np.zeros(2 * cores, dtype=np.int64)
        np.cumsum([n * ranks.STRIDE for n in l1_sets[:-1]], out=self._roff[1:])
        self._rank = np.concatenate([ranks.initial(levels[p].sets, levels[p].ways)
                                     for p in range(2) for _ in range(cores)]) \
            if self._levelwise else np.zeros(0, np.uint8)
        if self._levelwise:
            self._scratch = (np.empty(2 * BLOCK, np.int64), np.empty(2 * BLOCK, np.int64),
                             np.empty(4 * BLOCK, np.int64), np.empty(4 * BLOCK, np.int64),
                             np.zeros(4 * classes * NKINDS, np.int64))
            # whether direct-mapped L1s take the next block branch-free (see levelwise):
            # yes for cold caches
            self._l1_mode = np.ones(1, np.uint8)
            # the private caches' fingerprints, each set's ways of every core side by side
            # (levelwise._held_mirror): level p's set s of core c at _fo[p] + (s * cores + c) *
            # ways; 0 is an empty way
            fsizes = [levels[p].sets * cores * levels[p].ways for p in range(3)]
            self._fo = np.zeros(3, dtype=np.int64)
            np.cumsum(fsizes[:-1], out=self._fo[1:])
            self._fpr = np.zeros(sum(fsizes) + simd.PRINT_LANES, dtype=np.uint16)
            # the cores that asked the L3 for a line of each region (levelwise._held_among),
            # kept above FILTER_ABOVE cores only
            self._touch = np.zeros(1 << TOUCH_BITS if cores > FILTER_ABOVE else 1, np.uint64)
        # the cores that may hold each line, for the access-at-a-time kernel (see sharers)
        self._sharers = sharers.table(1 if self._levelwise else cores, total - sizes[-1],
                                      sizes[-1])
        self._pack()

    @property
    def cores(self) -> int:
        return self.config.cores

    @property
    def stats(self) -> CacheStats:
        return CacheStats(self._served.copy(), self._events.copy())

    def run(self, core: int, addr, kind, cls=None) -> np.ndarray:
        """Run accesses of ``core`` in order.

        Parameters
        ----------
        core : int
            Core index, ``0 <= core < config.cores``.
        addr : array of uint64
            Physical byte addresses (unknown addresses must be removed first).
        kind : array of uint8
            0 instruction fetch, 1 load, 2 store (see :mod:`pysched.models.codes`).
        cls : array of int, optional
            Requester class id of each access (below ``classes``); default 0.

        Returns
        -------
        numpy.ndarray of uint8
            The level that served each access: 0 L1, 1 L2, 2 L3, 3 memory.

        Raises
        ------
        ValueError
            On a core out of range, arrays of different lengths, or kind/class ids out of
            range; the message names the argument.
        """
        if isinstance(core, bool) or not isinstance(core, (int, np.integer)) \
                or not 0 <= core < self.cores:
            raise ValueError(f"core must be an integer in 0..{self.cores - 1}, got {core!r}")
        if kind is None:
            raise ValueError("kind is required: 0 instruction fetch, 1 load, 2 store")
        addr, kind, cls = validate.stream(addr, kind, cls, self.classes)
        served = np.empty(len(addr), dtype=np.uint8)
        # the kernel's other arguments are packed once (_pack): a short run (a sandbox chunk)
        # paid more for looking them up than for its accesses
        head, tail = self._args[self._levelwise]
        if self._levelwise:
            _run_levelwise(*head, int(core), addr, kind, cls, served, *tail)
        else:
            _run_hierarchy(*head, int(core), addr, kind, cls, served, *tail)
        return served

    def _pack(self) -> None:
        """The arguments of each kernel before and after the accesses of a run, by whether it
        is the level-at-a-time one."""
        cfg = self.config
        flat = self._served.reshape(-1)      # a view: the kernel counts into _served
        self._args = {False: ((self.tags, self.dirty, self._stamp, self._clock, self._off,
                               self._geo, cfg.cores, cfg.inclusive, cfg.coherence, self._rng,
                               cfg.l1i.line_shift), (flat, self._events, self._sharers))}
        if self._levelwise:
            self._args[True] = ((self.tags, self.dirty, self._stamp, self._rank, self._clock,
                                 self._off, self._roff, self._geo, cfg.cores,
                                 cfg.l1i.line_shift),
                                (flat, self._events, *self._scratch, self._l1_mode,
                                 self._fpr, self._fo, self._touch))

    def reset_stats(self) -> None:
        """Zero the counters, keeping the cache contents."""
        self._served[:] = 0
        self._events[:] = 0

    def flush(self, core: int | None = None) -> None:
        """Invalidate the private caches of ``core`` (None: every cache, the L3 too).

        Dirty lines are dropped without write-back counts (a cold start, not an eviction).
        """
        if core is None:
            self.tags[:] = -1
            self.dirty[:] = 0
            self._stamp[:] = INVALID
            for c in range(self.cores):
                self._reset_l1(c)
            self._sharers[:] = 0
            if self._levelwise:
                self._fpr[:] = 0
                self._touch[:] = 0
            return
        if not 0 <= core < self.cores:
            raise ValueError(f"core must be in 0..{self.cores - 1}, got {core!r}")
        for p in range(3):
            inst = p * self.cores + core
            lo = int(self._off[inst])
            hi = lo + self.config.levels[p].sets * self.config.levels[p].ways
            self.tags[lo:hi] = -1
            self.dirty[lo:hi] = 0
            self._stamp[lo:hi] = INVALID
            if self._levelwise:
                lv = self.config.levels[p]
                mirror = self._fpr[self._fo[p]:self._fo[p] + lv.sets * self.cores * lv.ways]
                mirror.reshape(lv.sets, self.cores, lv.ways)[:, core] = 0
        self._reset_l1(core)

    def _reset_l1(self, core: int) -> None:
        """Empty-set ranks for the L1i and L1d of ``core``, whose next block starts as from cold
        caches (level at a time only)."""
        if not self._levelwise:
            return
        self._l1_mode[0] = 1
        for p in range(2):
            lv = self.config.levels[p]
            lo = int(self._roff[p * self.cores + core])
            self._rank[lo:lo + lv.sets * ranks.STRIDE] = ranks.initial(lv.sets, lv.ways)

    def _slice(self, level: int, core: int) -> slice:
        inst = level * self.cores + core if level < 3 else 3 * self.cores
        lo = int(self._off[inst])
        lv = self.config.levels[level]
        return slice(lo, lo + lv.sets * lv.ways)

    def lines(self, level: str, core: int = 0) -> np.ndarray:
        """Sorted valid line numbers held by ``level`` (``"l1i"``, ``"l1d"``, ``"l2"`` of
        ``core``, or ``"l3"``)."""
        names = ("l1i", "l1d", "l2", "l3")
        if level not in names:
            raise ValueError(f"level must be one of {names}, got {level!r}")
        t = self.tags[self._slice(names.index(level), core)]
        return np.sort(t[t >= 0])
