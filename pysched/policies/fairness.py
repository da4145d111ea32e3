"""``fairness``: the equal-progress Fairness scheduler that seed 001 compares HRRS with
(Van Craeynest et al., PACT 2013, seed 001's reference [18]), in its hardware form.

Seed 001 (section 3.1, "The Fundamental Difference"): both swap the big core's thread with a
small core's after a quantum, but Fairness "strives at achieving fairness by guaranteeing even
progress using specific heuristic for each software thread" and "prefers to leave threads to
run on the same physical core", where HRRS always rotates. Here, at every hardware quantum
(1 ms, as seed 001 section 4.1 uses for both):

* each thread's **progress** is its big-core-equivalent execution time: seconds on a big core
  plus seconds on a small core times the small/big speed ratio -- [18]'s equal progress. [18]
  estimates the ratio per thread with its performance-impact estimation model; here it is
  measured machine-wide, all threads' instructions per second on small cores over that on big
  cores (the nominal ``core_speed`` ratio until both have run). Per-thread measured ratios were
  tried and rejected: a thread's first stint runs on cold caches and biases its ratio for
  the rest of the run (a thread that started on the big core then got a third of its share);
* the least-progressed thread running in user mode on a small core swaps with the big core's
  thread when it has made less progress than that thread (else nobody moves: the big core's
  thread is itself the laggard).

Kernel-mode rules, swap cost and the OS above (CFS as in ``linux``) are those of
:mod:`.asymmetric`, so that HRRS and Fairness differ only in the choice of the partner.
Approximation: a thread's progress since the last quantum is credited to the core type it is
on at the quantum (threads move only at quanta here, and at the OS's wake-up placements and
balancing in between).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .asymmetric import HardwareSwapper, core_speed
from .cfs import CfsPolicy

if TYPE_CHECKING:  # pragma: no cover
    from pysched.sandbox.engine import SimView


class Fairness(CfsPolicy):
    """CFS above, :class:`~.asymmetric.HardwareSwapper` below swapping in the thread that lags.

    Parameters
    ----------
    quantum_ms : float
        Hardware quantum in milliseconds (1 ms: seed 001 section 4.1 runs it at HRRS's).
    retry_us : float
        Microseconds between tries of a swap that waits for the big core's user mode.
    """

    name = "fairness"
    summary = ("Fairness [18] of seed 001: linux above; every hardware quantum the least-"
               "progressed small-core thread swaps onto the big core if it lags its thread")
    source = "seed 001, section 3.1 and reference [18] (equal-progress scheduling)"

    def __init__(self, quantum_ms: float = 1.0, retry_us: float = 10.0) -> None:
        super().__init__()
        self.set_hardware(HardwareSwapper(self.name, self.choose, self.on_quantum,
                                          quantum_ms=quantum_ms, retry_us=retry_us))

    def attach(self, sim: SimView) -> None:
        super().attach(sim)
        n = sim.workload.ntasks * sim.copies
        # per thread and core type (0 big, 1 small): instructions and seconds so far
        self.insns = np.zeros((n, 2))
        self.secs = np.zeros((n, 2))
        self.seen_insns = np.zeros(n)
        self.seen_secs = np.zeros(n)
        big = [core_speed(sim.core_config(c)) for c in self.hw.big]
        small = [core_speed(sim.core_config(c)) for c in self.hw.small]
        self.nominal_ratio = (min(small) / max(big)) if big and small else 1.0

    def on_quantum(self) -> None:
        """Credit each thread's instructions and seconds since the last quantum to the core
        type it is on now."""
        sim = self.sim
        big = self.hw.big
        for t in range(len(self.seen_insns)):
            ins, sec = sim.task_insns(t), sim.task_runtime(t)
            d_ins, d_sec = ins - self.seen_insns[t], sec - self.seen_secs[t]
            if d_sec <= 0:
                continue
            kind = 0 if sim.last_core(t) in big else 1
            self.insns[t, kind] += d_ins
            self.secs[t, kind] += d_sec
            self.seen_insns[t], self.seen_secs[t] = ins, sec

    def ratio(self) -> float:
        """Small/big speed ratio: measured over all threads (see the module)."""
        tot_i, tot_s = self.insns.sum(axis=0), self.secs.sum(axis=0)
        if tot_s[0] > 0 and tot_s[1] > 0 and tot_i[0] > 0:
            return float((tot_i[1] / tot_s[1]) / (tot_i[0] / tot_s[0]))
        return self.nominal_ratio

    def progress(self, t: int) -> float:
        """Big-core-equivalent seconds thread ``t`` has executed."""
        return float(self.secs[t, 0] + self.secs[t, 1] * self.ratio())

    def choose(self, big: int, candidates: list[int]) -> int | None:
        """The least-progressed thread's core among ``candidates`` when that thread lags the
        one on core ``big`` (None: no swap)."""
        if not candidates:
            return None
        sim = self.sim
        lag = min(candidates, key=lambda c: (self.progress(sim.running(c).task), c))
        on_big = sim.running(big)
        if on_big is not None and \
                self.progress(sim.running(lag).task) >= self.progress(on_big.task):
            return None  # the big core already runs the least-progressed thread
        return lag
