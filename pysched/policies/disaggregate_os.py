"""``disaggregate-os``: DisAggregateOS (as SchedTask's Table 3 configures it: zero-cost
micro-scheduling).

OS services run on cores dedicated by kind: system calls by subsystem (file system, network,
memory, process; :mod:`.subsystems`), interrupts and bottom halves, kernel threads. Half the
cores run application code; the OS cores are dealt to the kinds round-robin (with fewer OS
cores than kinds, kinds share). Within a kind's cores, the least loaded.
"""
from __future__ import annotations

from pysched.superfunctions.functype import Category

from .core_split import CoreSplit
from .subsystems import KINDS, subsystem

_ORDER = ("irq",) + KINDS + ("kthread",)


def kind_cores(cores: list[int]) -> dict[str, list[int]]:
    """The OS ``cores`` dealt to the kinds (``irq``: interrupts and bottom halves; the
    subsystems of system calls; ``kthread``) round-robin; with fewer cores than kinds, kind
    ``i`` shares core ``i mod len(cores)``."""
    return {k: [c for j, c in enumerate(cores) if j % len(_ORDER) == i]
            or [cores[i % len(cores)]] for i, k in enumerate(_ORDER)}


class DisAggregateOS(CoreSplit):
    name = "disaggregate-os"
    summary = "DisAggregateOS: OS services on cores dedicated by kind (fs, net, mm, irq, ...)"
    source = "SchedTask Table 3 and section 6.1 (DisAggregateOS)"

    def split(self, n_os: int) -> None:
        super().split(n_os)
        self._kind_cores = kind_cores(self.os_cores_all)

    def _kind(self, work) -> str:
        if work.category in (int(Category.INTERRUPT), int(Category.BOTTOM_HALF)):
            return "irq"
        if work.category == int(Category.KERNEL_THREAD):
            return "kthread"
        return subsystem(work.number)

    def os_cores(self, work) -> list[int]:
        return self._kind_cores[self._kind(work)]

    def route_interrupt(self, work, arrival_core: int) -> int:
        return self._least(self.os_cores(work))
