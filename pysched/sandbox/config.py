"""What the sandbox simulates besides the workload and the policy: :class:`SandboxConfig`,
the model's rules as settings (each rule is described in :mod:`.engine`) and their defaults."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from pysched.constants import EPOCH_SECONDS
from pysched.models.machine import MachineConfig

from .device_loop import DEVICE_TIMINGS

#: Seconds from queuing work to an idle core acting on it: an IPI's delivery and the idle
#: core's wake-up. 2 us, our approximation: the order of an x86 IPI's send-to-handler time
#: between cores plus a wake-up from a shallow idle state (C1); deeper idle states are not
#: modelled. An ablation factor (``pysched ablate``) shows what it decides.
IPI_S = 2e-6
#: The simulated machine's tick: Linux's HZ (250 on Debian's kernels, CONFIG_HZ_250).
TICK_HZ = 250.0
#: ``SandboxConfig.kernel_data``: copies share the kernel data the trace shows shared, or
#: every copy's data is its own.
KERNEL_DATA = ("shared", "per-copy")
#: ``SandboxConfig.copy_phase``: copies start at seeded offsets, or all at time 0.
COPY_PHASES = ("offset", "in-phase")
#: ``SandboxConfig.ifetch_penalty``: an instruction fetch served beyond the L1 stalls for the
#: difference of its level's latency to the L1's (the L1 hit is in the base CPI), or for the
#: level's full latency.
IFETCH_PENALTIES = ("difference", "full")


@dataclass(frozen=True)
class SandboxConfig:
    """What to simulate besides the workload and the policy.

    Attributes
    ----------
    machine : MachineConfig
        Cores (timing, DVFS, migration cost) and the cache hierarchy.
    copies : int
        Copies of the workload replayed together (the paper's load kX on C cores is
        :func:`pysched.evaluation.runner.copies_for` copies, section 6.3).
    epoch_s : float
        Epoch length in simulated seconds (3 ms, section 4.4).
    switch_cycles : int or None
        Cost of switching a core to another thread: None runs the traced switch path through
        the caches (``simulate(switch_path=...)``, see :mod:`.engine`); an integer charges that
        many cycles (1,000, the default here, as a config alone has no trace: seed 001's
        context switch; 0).
    os_migration_cycles : int or None
        Extra cost of a thread the OS (the policy's queues) moved to another core, beyond the
        switch: None (default) charges the destination core's ``migration_cycles``. Hardware
        moves (:meth:`SimView.migrate_running`) always charge ``migration_cycles``.
    max_chunk : int
        Most instructions run between two looks at the core's queue.
    max_epochs : int or None
        Stop after this many epochs: a window of the replay's first ``max_epochs * epoch_s``
        simulated seconds, whose measures are the work done in it (the paper counts events
        in a span of system execution, section 6.1). None (default): run until every item of
        every copy is done.
    idle_retry : bool
        Idle cores look for work when work is queued elsewhere and at every tick (:mod:`.engine`).
        False: an idle core looks only when work is queued on it.
    tick_hz : float
        Ticks per simulated second at which idle cores retry (:data:`TICK_HZ`).
    ipi_s : float
        Delay from queuing work to an idle core acting on it (:data:`IPI_S`).
    kernel_data : str
        :data:`KERNEL_DATA`: ``"shared"`` (default) or ``"per-copy"`` (:mod:`.engine`, Load).
    copy_phase : str
        :data:`COPY_PHASES`: ``"offset"`` (default) or ``"in-phase"`` (:mod:`.engine`).
    phase_seed : int
        Seed of the copies' start offsets.
    ifetch_penalty : str
        :data:`IFETCH_PENALTIES`: ``"difference"`` (default) or ``"full"``.
    device_timing : str
        :data:`~.device_loop.DEVICE_TIMINGS`: ``"closed"`` (default: interrupts released by
        their traced requests) or ``"traced"`` (:mod:`.engine`, Devices in a closed loop).
    """

    machine: MachineConfig = field(default_factory=MachineConfig)
    copies: int = 1
    epoch_s: float = EPOCH_SECONDS
    switch_cycles: int | None = 1000
    os_migration_cycles: int | None = None
    max_chunk: int = 20_000
    max_epochs: int | None = None
    idle_retry: bool = True
    tick_hz: float = TICK_HZ
    ipi_s: float = IPI_S
    kernel_data: str = "shared"
    copy_phase: str = "offset"
    phase_seed: int = 0
    ifetch_penalty: str = "difference"
    device_timing: str = "closed"

    def __post_init__(self) -> None:
        if not isinstance(self.copies, int) or isinstance(self.copies, bool) or self.copies < 1:
            raise ValueError(f"copies must be a positive integer, got {self.copies!r}")
        for name in ("epoch_s", "tick_hz"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if not (isinstance(self.ipi_s, (int, float)) and math.isfinite(self.ipi_s)
                and self.ipi_s >= 0):
            raise ValueError(f"ipi_s must be a non-negative number of seconds, got "
                             f"{self.ipi_s!r}")
        if not isinstance(self.max_chunk, int) or self.max_chunk < 1:
            raise ValueError(f"max_chunk must be a positive integer, got {self.max_chunk!r}")
        if self.max_epochs is not None and (not isinstance(self.max_epochs, int)
                                            or isinstance(self.max_epochs, bool)
                                            or self.max_epochs < 1):
            raise ValueError(f"max_epochs must be a positive integer or None, got "
                             f"{self.max_epochs!r}")
        if self.switch_cycles is not None and (
                not isinstance(self.switch_cycles, int) or isinstance(self.switch_cycles, bool)
                or self.switch_cycles < 0):
            raise ValueError(f"switch_cycles must be a non-negative integer or None (the "
                             f"traced switch path), got {self.switch_cycles!r}")
        if self.os_migration_cycles is not None and (
                not isinstance(self.os_migration_cycles, int)
                or isinstance(self.os_migration_cycles, bool) or self.os_migration_cycles < 0):
            raise ValueError(f"os_migration_cycles must be a non-negative integer or None, "
                             f"got {self.os_migration_cycles!r}")
        if not isinstance(self.idle_retry, bool):
            raise ValueError(f"idle_retry must be True or False, got {self.idle_retry!r}")
        for name, choices in (("kernel_data", KERNEL_DATA), ("copy_phase", COPY_PHASES),
                              ("ifetch_penalty", IFETCH_PENALTIES),
                              ("device_timing", DEVICE_TIMINGS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, got "
                                 f"{getattr(self, name)!r}")
        if not isinstance(self.phase_seed, int) or isinstance(self.phase_seed, bool):
            raise ValueError(f"phase_seed must be an integer, got {self.phase_seed!r}")

    @property
    def ncores(self) -> int:
        return len(self.machine.cores)
