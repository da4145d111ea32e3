"""Core configurations: big out-of-order and small in-order cores (seed 001), DVFS levels and
the energy parameters.

Defaults (our choices where the seeds are silent, all documented here):

* Base CPI (cycles per instruction when every access hits the L1): 0.5 for the big core (a
  4-wide out-of-order core sustains about 2 IPC on OS-intensive code without misses), 1.0 for
  the small in-order core of the same width (seed 001 keeps width, frequency and caches equal
  and changes only the pipeline).
* Share of data-miss latency hidden: 0.5 for the out-of-order core (a 168-entry ROB, Table 2 of
  seed 000, covers L2 and part of L3 latency, not memory), 0 for the in-order core. Instruction
  fetch misses are never hidden: the front end stalls.
* DVFS levels (22 nm, Table 2 of seed 000): 1.0 GHz at 0.70 V, 1.6 GHz at 0.80 V, 2.2 GHz at
  0.90 V, 2.6 GHz at 1.00 V (2.6 GHz: seed 001's frequency).
* Energy: dynamic energy per cycle ``C_eff * V**2`` with C_eff 1.0 nF (big) and 0.4 nF (small),
  i.e. 1.0 nJ and 0.4 nJ per cycle at 1.0 V; static power 0.5 W (big) and 0.15 W (small) at
  1.0 V, scaling linearly with voltage, drawn whenever the core is on (busy or idle).
* Migration cost: 1,000 cycles (seed 001's context-switch penalty), added to the cold caches the
  thread finds on the new core.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..configio import ConfigError, Loadable, check_int, from_dict


@dataclass(frozen=True)
class DvfsLevel:
    """One operating point.

    Parameters
    ----------
    freq_ghz : float
        Clock frequency in GHz (> 0).
    voltage : float
        Supply voltage in volts (> 0).
    """

    freq_ghz: float
    voltage: float

    def __post_init__(self) -> None:
        if not self.freq_ghz > 0:
            raise ConfigError(f"freq_ghz must be positive, got {self.freq_ghz!r}")
        if not self.voltage > 0:
            raise ConfigError(f"voltage must be positive, got {self.voltage!r}")


DEFAULT_DVFS = (DvfsLevel(1.0, 0.70), DvfsLevel(1.6, 0.80), DvfsLevel(2.2, 0.90),
                DvfsLevel(2.6, 1.00))


@dataclass(frozen=True)
class CoreConfig(Loadable):
    """Timing and energy parameters of one core type.

    Parameters
    ----------
    name : str
        Label (``"big"``, ``"small"``...).
    out_of_order : bool
        Whether the core hides part of the data-miss latency.
    base_cpi : float
        Cycles per instruction with every access hitting the L1 (> 0).
    data_miss_hidden : float
        Share of the stall cycles of data misses (loads and stores) the core overlaps with
        other work, in [0, 1]; must be 0 for an in-order core.
    dvfs : tuple of DvfsLevel
        Operating points, slowest first.
    level : int
        Default operating point (index into ``dvfs``; default the fastest).
    capacitance_nf : float
        Effective switched capacitance per cycle in nF (dynamic energy ``C * V**2``).
    static_power_w : float
        Static (leakage) power at 1.0 V in W; scales linearly with voltage.
    migration_cycles : int
        Cycles a thread loses when it moves to this core (state transfer).

    Raises
    ------
    ConfigError
        On a non-positive CPI, a hidden share outside [0, 1] (or non-zero for an in-order
        core), no DVFS level, a level index out of range, negative energy parameters or a
        negative migration cost; the message names the parameter.
    """

    name: str = "big"
    out_of_order: bool = True
    base_cpi: float = 0.5
    data_miss_hidden: float = 0.5
    dvfs: tuple[DvfsLevel, ...] = DEFAULT_DVFS
    level: int = -1
    capacitance_nf: float = 1.0
    static_power_w: float = 0.5
    migration_cycles: int = 1000

    def __post_init__(self) -> None:
        if not self.base_cpi > 0:
            raise ConfigError(f"base_cpi must be positive, got {self.base_cpi!r}")
        if not 0.0 <= self.data_miss_hidden <= 1.0:
            raise ConfigError(f"data_miss_hidden must be in [0, 1], got "
                              f"{self.data_miss_hidden!r}")
        if not self.out_of_order and self.data_miss_hidden != 0:
            raise ConfigError(f"data_miss_hidden must be 0 for an in-order core "
                              f"(out_of_order=False), got {self.data_miss_hidden!r}")
        if not self.dvfs:
            raise ConfigError("dvfs must list at least one DvfsLevel")
        if not -len(self.dvfs) <= self.level < len(self.dvfs):
            raise ConfigError(f"level {self.level} out of range for {len(self.dvfs)} dvfs "
                              f"levels")
        if self.capacitance_nf < 0:
            raise ConfigError(f"capacitance_nf must not be negative, got "
                              f"{self.capacitance_nf!r}")
        if self.static_power_w < 0:
            raise ConfigError(f"static_power_w must not be negative, got "
                              f"{self.static_power_w!r}")
        check_int("migration_cycles", self.migration_cycles, 0)

    def operating_point(self, level: int | None = None) -> DvfsLevel:
        """The DVFS level ``level`` (default :attr:`level`)."""
        lv = self.level if level is None else level
        if not isinstance(lv, int) or not -len(self.dvfs) <= lv < len(self.dvfs):
            raise ValueError(f"level {lv!r} out of range for {len(self.dvfs)} dvfs levels")
        return self.dvfs[lv]


def big_core(**changes) -> CoreConfig:
    """The big out-of-order core (seed 001's large core)."""
    return from_dict(CoreConfig, {"name": "big", **changes})


def small_core(**changes) -> CoreConfig:
    """The small in-order core (seed 001's small core)."""
    base = {"name": "small", "out_of_order": False, "base_cpi": 1.0, "data_miss_hidden": 0.0,
            "capacitance_nf": 0.4, "static_power_w": 0.15}
    return from_dict(CoreConfig, {**base, **changes})
