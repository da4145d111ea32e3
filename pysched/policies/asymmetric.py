"""Seed 001's hardware level (:class:`HardwareSwapper`), the component that the
asymmetric-multicore policies ``hrrs`` and ``fairness`` hold below their OS, CFS as in ``linux``
(:mod:`.cfs`), which they leave unchanged: every hardware quantum it swaps the thread running
on a big core with one running on a small core.

What comes from seed 001 (Markovic et al., "Hardware Round-Robin Scheduling"):

* **Two levels** (section 3.1): the OS maps threads to logical cores at its own quantum and
  interrupts (here: CFS as in the ``linux`` policy, which does not look at core types, as an
  OS that is given "an abstracted homogeneous hardware view"); the hardware remaps the threads
  running on the logical cores onto the physical cores every hardware quantum (1 ms, section
  4.1).
* **Kernel mode** (section 3.2): when the big core is in kernel mode "HRRS scheduler will wait
  until it returns to user mode"; when the chosen small core is in kernel mode, the scheduler
  "will chose next small core". A core is in user mode when it runs a thread item of
  application code (category ``APPLICATION``); a system call, an interrupt, a bottom half or a
  kernel thread is kernel mode.
* **Swap cost** (section 4.2): 1,000 cycles per context swap plus the warming of the caches
  (the engine's hardware moves pay the destination's ``migration_cycles``, 1,000 by default, on
  top of the cold caches; see :mod:`pysched.sandbox.engine`).

Approximations, written down here:

* Waiting for user mode is polled every ``retry_us`` (10 us, about one engine chunk: the
  engine sees a core's state only at chunk ends anyway); the quantum restarts at the swap.
* A swap takes effect at the end of each core's running chunk (at most one chunk late).
* The hardware swaps running threads only; the OS's run queues stay with the physical cores
  (the Linux policy then sees the threads where they now run, as an OS would see its logical
  cores). With as many threads as cores, as in the paper's runs, queues are nearly empty.
* An idle small core is not a swap partner (the big core's thread would leave the big core
  idle); an idle big core takes the partner's thread without giving one back.
* Big cores are the cores of the highest nominal speed (frequency / base CPI); on a machine
  whose cores all have the same nominal speed there is nothing to swap and the policy is
  ``linux``.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from pysched.superfunctions.functype import Category

if TYPE_CHECKING:  # pragma: no cover
    from pysched.sandbox.engine import SimView

_APPLICATION = int(Category.APPLICATION)


def core_speed(core) -> float:
    """Nominal instructions per second of a core type: frequency / base CPI."""
    return core.operating_point().freq_ghz * 1e9 / core.base_cpi


class HardwareSwapper:
    """A hardware thread swapper below the OS; its owner chooses the partner.

    Parameters
    ----------
    policy : str
        Name of the owning policy (for messages).
    choose : callable
        ``choose(big, candidates) -> int | None``: the small core, one of ``candidates``
        (:meth:`partners`), whose thread goes to core ``big``; None: no swap this quantum.
    on_quantum : callable, optional
        Called at every quantum of a big core before ``choose`` (progress bookkeeping).
    quantum_ms : float
        Hardware quantum in milliseconds (seed 001: 1 ms; 4 ms is its software quantum).
    retry_us : float
        How often a swap deferred by a big core in kernel mode is tried again (microseconds).

    Raises
    ------
    ValueError
        When ``quantum_ms`` or ``retry_us`` is not a positive number.
    """

    def __init__(self, policy: str, choose: Callable[[int, list[int]], int | None],
                 on_quantum: Callable[[], None] | None = None, quantum_ms: float = 1.0,
                 retry_us: float = 10.0) -> None:
        quantum_ms, retry_us = float(quantum_ms), float(retry_us)
        if not (quantum_ms > 0 and math.isfinite(quantum_ms)):
            raise ValueError(f"{policy}: quantum_ms must be a positive number, got "
                             f"{quantum_ms!r}")
        if not (retry_us > 0 and math.isfinite(retry_us)):
            raise ValueError(f"{policy}: retry_us must be a positive number, got "
                             f"{retry_us!r}")
        self.choose = choose
        self.on_quantum = on_quantum or (lambda: None)
        self.quantum_s = quantum_ms / 1e3
        self.retry_s = retry_us / 1e6
        self.sim: SimView | None = None
        self.big: list[int] = []
        self.small: list[int] = []
        self.due_at: dict[int, float] = {}
        #: Counters: swaps done, one-way pulls onto an idle big core, ticks a swap waited for
        #: the big core's user mode, quanta without a partner.
        self.swaps = self.pulls = self.deferrals = self.no_partner = 0

    def attach(self, sim: SimView) -> None:
        """Find the big and small cores of ``sim``'s machine, before time 0."""
        self.sim = sim
        speed = [core_speed(sim.core_config(c)) for c in range(sim.ncores)]
        top = max(speed)
        self.big = [c for c in range(sim.ncores) if speed[c] == top]
        self.small = [c for c in range(sim.ncores) if speed[c] != top]
        if not self.small:
            self.big = []  # a symmetric machine: nothing to swap
        self.due_at = {b: self.quantum_s for b in self.big}

    def notes(self) -> list[str]:
        """Why the run's schedule is the OS's alone, when it is: a machine with no core faster
        than another, or a run in which no swap and no pull happened."""
        if not self.big:
            return ["no core of the machine is faster than another, so there was no big core "
                    "to swap threads onto (seed 001 assumes big and small cores: a `--machine` "
                    "file with core types of different speeds); it scheduled as `linux`"]
        if self.swaps + self.pulls == 0:
            return [f"no hardware swap in the run ({self.deferrals} waits for a big core's "
                    f"user mode, {self.no_partner} quanta without a small core in user "
                    f"mode); it scheduled as `linux`"]
        return []

    # --- what the hardware sees -----------------------------------------------------------------
    def user_mode(self, core: int) -> bool:
        """``core`` runs a thread item of application code (section 3.2's per-core bit)."""
        wk = self.sim.running(core)
        return wk is not None and not wk.is_async and wk.category == _APPLICATION

    def partners(self) -> list[int]:
        """Small cores whose running thread may be swapped: in user mode (section 3.2)."""
        return [c for c in self.small if self.user_mode(c)]

    # --- the hardware quantum ------------------------------------------------------------------
    def tick(self) -> float | None:
        """Swap where a big core's quantum is due; the seconds to the next call (the owning
        policy's ``tick``)."""
        sim = self.sim
        now = sim.now
        waiting = False
        for b in self.big:
            if now < self.due_at[b] - 1e-12:
                continue
            idle = sim.running(b) is None
            if not idle and not self.user_mode(b):
                # section 3.2: wait until the big core returns to user mode
                self.deferrals += 1
                waiting = True
                continue
            self.on_quantum()
            s = self.choose(b, self.partners())
            if s is None:
                self.no_partner += 1
            elif idle:
                if sim.queue_len(b) == 0 and sim.migrate_running(s, b):
                    self.pulls += 1
            elif sim.migrate_running(b, s) and sim.migrate_running(s, b):
                self.swaps += 1
            self.due_at[b] = now + self.quantum_s
        if waiting:
            return self.retry_s
        return max(min(self.due_at.values(), default=now + self.quantum_s) - now, self.retry_s)
