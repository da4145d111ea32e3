"""Cache geometry and hierarchy configurations, validated when built.

Defaults follow Table 2 of the SchedTask paper (seed 000): private 4-way 32 KB L1 i- and
d-caches at 3 cycles, a private 4-way 256 KB L2 at 8 cycles and a shared 8-way 8 MB NUCA L3 at
18 cycles on average. The paper gives no line size or memory latency; we use 64-byte lines
(x86) and 200 cycles from the core to DRAM (about 65 ns at 3 GHz: a loaded DDR access behind
an L3 miss).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..configio import ConfigError, Loadable, check_int
from .policies import FIFO, LRU, RANDOM

#: Replacement policies by name; the value is the code the kernels dispatch on.
POLICIES: dict[str, int] = {"lru": LRU, "fifo": FIFO, "random": RANDOM}


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class CacheConfig(Loadable):
    """One set-associative cache.

    Parameters
    ----------
    size : int
        Capacity in bytes.
    ways : int
        Associativity (1: direct mapped; ``size // line``: fully associative).
    line : int
        Line size in bytes, a power of two.
    latency : int
        Load-to-use cycles of an access this cache serves (for a shared NUCA cache, the
        average over its banks).
    policy : str
        Replacement: ``"lru"`` (default), ``"fifo"`` or ``"random"``.

    Raises
    ------
    ConfigError
        On a geometry that cannot be built (line not a power of two, size not a multiple of
        ``ways * line``, a number of sets that is not a power of two), a negative latency or an
        unknown policy; the message names the parameter.
    """

    size: int = 32 * 1024
    ways: int = 4
    line: int = 64
    latency: int = 3
    policy: str = "lru"

    def __post_init__(self) -> None:
        check_int("size", self.size, 1)
        check_int("ways", self.ways, 1)
        check_int("line", self.line, 1)
        check_int("latency", self.latency, 0)
        if not _is_pow2(self.line):
            raise ConfigError(f"line must be a power of two, got {self.line}")
        if self.size % (self.ways * self.line):
            raise ConfigError(f"size {self.size} is not a multiple of ways * line "
                              f"= {self.ways} * {self.line}")
        if not _is_pow2(self.sets):
            raise ConfigError(f"size / (ways * line) = {self.sets} sets is not a power of two "
                              f"(size={self.size}, ways={self.ways}, line={self.line})")
        if self.policy not in POLICIES:
            raise ConfigError(f"policy {self.policy!r} unknown; known: {', '.join(POLICIES)}")

    @property
    def sets(self) -> int:
        """Number of sets, ``size // (ways * line)``."""
        return self.size // (self.ways * self.line)

    @property
    def line_shift(self) -> int:
        """log2 of the line size."""
        return self.line.bit_length() - 1

    @property
    def policy_code(self) -> int:
        return POLICIES[self.policy]


def _default_l1d() -> CacheConfig:
    return CacheConfig(32 * 1024, 4, 64, 3)


def _default_l2() -> CacheConfig:
    return CacheConfig(256 * 1024, 4, 64, 8)


def _default_l3() -> CacheConfig:
    return CacheConfig(8 * 1024 * 1024, 8, 64, 18)


@dataclass(frozen=True)
class HierarchyConfig(Loadable):
    """Per core a private L1i, L1d and L2; one L3 shared by ``cores`` cores.

    Parameters
    ----------
    l1i, l1d, l2, l3 : CacheConfig
        The levels (Table 2 of seed 000 by default). All levels use one line size.
    memory_latency : int
        Load-to-use cycles of an access served by memory (default 200; not in Table 2).
    cores : int
        Number of cores sharing the L3.
    inclusive : bool
        False (default): non-inclusive, non-exclusive (a miss fills every level on its way, an
        eviction touches no other level except for write-backs). True: each L2 holds everything
        its core's L1s hold and the L3 everything every L2 holds; an eviction back-invalidates
        the copies above it.
    coherence : bool
        True: a simple MESI-like invalidation protocol between cores' private caches: a store
        to a line that is not already dirty in the storing core's L1d invalidates the other
        cores' copies, and a private miss cleans (writes back to the L3) another core's dirty
        copy. False (default): private caches are not kept coherent.
    seed : int
        Seed of the random replacement policy's generator.

    Raises
    ------
    ConfigError
        On a level with a different line size, a negative memory latency or fewer than one
        core; the message names the parameter.
    """

    l1i: CacheConfig = field(default_factory=_default_l1d)
    l1d: CacheConfig = field(default_factory=_default_l1d)
    l2: CacheConfig = field(default_factory=_default_l2)
    l3: CacheConfig = field(default_factory=_default_l3)
    memory_latency: int = 200
    cores: int = 1
    inclusive: bool = False
    coherence: bool = False
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("l1i", "l1d", "l2", "l3"):
            if not isinstance(getattr(self, name), CacheConfig):
                raise ConfigError(f"{name} must be a CacheConfig")
        for name in ("l1d", "l2", "l3"):
            if getattr(self, name).line != self.l1i.line:
                raise ConfigError(f"{name}.line is {getattr(self, name).line} but l1i.line is "
                                  f"{self.l1i.line}: all levels must use one line size")
        check_int("memory_latency", self.memory_latency, 0)
        check_int("cores", self.cores, 1)
        check_int("seed", self.seed, 0)

    @property
    def line(self) -> int:
        return self.l1i.line

    @property
    def levels(self) -> tuple[CacheConfig, CacheConfig, CacheConfig, CacheConfig]:
        """``(l1i, l1d, l2, l3)``."""
        return (self.l1i, self.l1d, self.l2, self.l3)

    def latencies(self, kind_l1: str = "l1d") -> tuple[int, int, int, int]:
        """Load-to-use cycles of an access served by L1 (``kind_l1``), L2, L3 and memory."""
        return (getattr(self, kind_l1).latency, self.l2.latency, self.l3.latency,
                self.memory_latency)

    def with_cores(self, cores: int) -> HierarchyConfig:
        """A copy for ``cores`` cores."""
        return replace(self, cores=cores)


#: Table 2 of seed 000 (one core; use :meth:`HierarchyConfig.with_cores`).
TABLE2 = HierarchyConfig()
