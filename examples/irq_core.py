"""An example policy file: ``linux`` with every device interrupt sent to one core.

    pysched evaluate data/netserver-10b --policy-file examples/irq_core.py \
        --policies linux,irq-core,irq-core:core=1 --cores 2 --epochs 5 --out out/irq-core

``--policy-file`` registers every class below that derives from ``pysched.policies.Policy``
and has a ``name``; ``irq-core:core=1`` passes ``core=1`` to ``__init__``.
"""
from __future__ import annotations

from pysched.policies.linux import Linux


class IrqCore(Linux):
    """CFS as ``linux``; device interrupts go to ``core``, as an interrupt controller
    programmed with one fixed destination sends them.

    Parameters
    ----------
    core : int
        The core that handles every device interrupt (0 by default).
    """

    name = "irq-core"
    summary = "linux with every device interrupt sent to one core (examples/irq_core.py)"

    def __init__(self, core: int = 0) -> None:
        super().__init__()
        if not isinstance(core, int) or core < 0:
            raise ValueError(f"irq-core: core must be a whole number >= 0, got {core!r}")
        self.core = core

    def attach(self, sim) -> None:
        super().attach(sim)
        if self.core >= sim.ncores:
            raise ValueError(f"irq-core: core={self.core}, but the machine has "
                             f"{sim.ncores} cores")

    def route_interrupt(self, work, arrival_core: int) -> int:
        # per-CPU vectors (timer, IPIs, exceptions) and bottom halves run where they arrive
        return self.core if self.routable(work) else arrival_core
