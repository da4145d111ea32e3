"""``disaggregate-os``: DisAggregateOS (as SchedTask's Table 3 configures it: zero-cost
micro-scheduling).

OS services run on cores dedicated by kind: system calls by subsystem (file system, network,
memory, process; :mod:`.subsystems`), interrupts and bottom halves, kernel threads. Half the
cores run application code; the OS cores are dealt to the kinds round-robin (with fewer OS
cores than kinds, kinds share: :func:`.subsystems.kind_cores`). Within a kind's cores, the
least loaded (:mod:`.core_split`).
"""
from __future__ import annotations

from .core_split import CoreSplit


class DisAggregateOS(CoreSplit):
    name = "disaggregate-os"
    summary = "DisAggregateOS: OS services on cores dedicated by kind (fs, net, mm, irq, ...)"
    source = "SchedTask Table 3 and section 6.1 (DisAggregateOS)"
    by_kind = True
