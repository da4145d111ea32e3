"""``profile-dvfs``: OS components on dedicated cores, each OS core at the lowest DVFS level
that meets a performance target (seed 002: NEWTOS, "Scheduling of multiserver system
components on over-provisioned multicore systems").

What comes from seed 002:

* **Dedicated cores per component** (4.2, 4.5): the scheduler knows which process is a system
  server and of which stack, and "place[s] each component of the network stack on its own
  core". Here the components are the OS work kinds of ``disaggregate-os`` (system calls by
  subsystem: file system, network, memory, process, other; interrupts with bottom halves;
  kernel threads: :mod:`.subsystems`) on half the cores, the applications on the other half,
  placed as ``disaggregate-os`` places them (:mod:`.core_split`, dedicated by kind).
* **Frequency per core** (4.4, 4.5): each component's core is scaled independently ("drivers
  often do not need powerful cores"), while application cores keep "the voltage and frequency
  settings selected for the applications" (section 2): their configured level.
* **Profile-based choice** (4.5): the load readings are matched to a profile that gives the
  best setting. Approximation, written down here: the paper profiles expected workloads
  offline (bitrate, connections, request mix: 4.3) and picks the closest profile; here the
  reading is each OS core's busy cycles in the last epoch (what its components' traffic cost),
  and the setting is the lowest DVFS level at which those cycles fill at most ``target``
  (0.8) of an epoch -- the performance target: the core keeps up with its load with headroom,
  at least energy (static power and ``C * V**2`` fall with the level). Cycles are taken as
  independent of the frequency (the cache models' latencies are in cycles). Not modelled: the
  co-location of an idle stack's components on one core (4.2), trend checks (4.5).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

from .core_split import CoreSplit

if TYPE_CHECKING:  # pragma: no cover
    from pysched.sandbox.metrics import SandboxStats


def lowest_level(cycles: float, seconds: float, freqs_ghz: Sequence[float],
                 target: float) -> int:
    """Index of the slowest frequency at which ``cycles`` take at most ``target`` of
    ``seconds`` (``freqs_ghz`` slowest first); the fastest when none does."""
    for i, f in enumerate(freqs_ghz):
        if cycles <= target * f * 1e9 * seconds:
            return i
    return len(freqs_ghz) - 1


class ProfileDvfs(CoreSplit):
    """OS cores dedicated by kind as in ``disaggregate-os``, each set at every epoch end to the
    lowest DVFS level that meets the target.

    Parameters
    ----------
    target : float
        Largest share of an epoch that an OS core's last-epoch cycles may fill, in (0, 1].
    """

    name = "profile-dvfs"
    summary = ("seed 002: OS components on dedicated cores, each OS core at the lowest DVFS "
               "level meeting a utilisation target from the last epoch's load")
    source = "seed 002 (NEWTOS), sections 2, 4.2, 4.4, 4.5"
    by_kind = True

    def __init__(self, target: float = 0.8) -> None:
        super().__init__()
        target = float(target)
        if not (0 < target <= 1 and math.isfinite(target)):
            raise ValueError(f"profile-dvfs: target must be in (0, 1], got {target!r}")
        self.target = target
        #: (epoch, core, level) of every change.
        self.changes: list[tuple[int, int, int]] = []

    def epoch_end(self, epoch: int, stats: SandboxStats) -> None:
        sim = self.sim
        if stats.elapsed_s <= 0:
            return
        cycles = stats.cycles
        for c in self.os_cores_all:
            if c in self.app_cores:
                continue  # a one-core machine: the core is the applications'
            freqs = [lv.freq_ghz for lv in sim.core_config(c).dvfs]
            lv = lowest_level(float(cycles[c]), float(stats.elapsed_s), freqs, self.target)
            if lv != sim.level(c):
                sim.set_level(c, lv)
                self.changes.append((epoch, c, lv))
