"""``linux``: per-core run queues in the manner of CFS (Linux ``kernel/sched/fair.c``), with
nothing added: the model and where each of its rules comes from are in :mod:`.cfs`.
"""
from __future__ import annotations

from .cfs import CfsPolicy


class Linux(CfsPolicy):
    name = "linux"
    summary = ("CFS-like: per-core queues, affinity, least-vruntime pick, wake-up preemption, "
               "time slices, balancing")
    source = "Linux kernel/sched/fair.c (CFS), as the SchedTask paper's baseline (section 6.1)"
