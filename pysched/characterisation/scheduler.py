"""How much of a trace the traced Linux kernel spent in its scheduler.

The evidence behind the sandbox's ``traced`` switch cost (:mod:`pysched.sandbox.switch_cost`)
and the figure SchedTask compares TMigrate with: "around 3.2 % ... roughly the same amount of
time that the baseline Linux system spends executing its scheduler" (section 6.1 (1)).

Counting is by instruction address: an executed instruction belongs to the function whose
``System.map`` range holds it (exclusive counts: a callee's instructions are the callee's).
Every exec row of every vCPU counts, each instruction once per execution; a row cut short by
an exception counts the instructions it retired. Time is not measured: a share of
instructions stands for a share of time (the scheduler's own IPC is not known).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pysched.superfunctions.symbols import (
    LINUX_SCHEDULER_FUNCTIONS,
    SCHEDULER_FUNCTIONS,
    KernelSymbols,
    base_name,
    trace_symbols,
)
from pysched.trace import Trace, TraceError, block_index, exec_chunks

#: Instructions outside every ``System.map`` range (user code, modules).
OUTSIDE = "(outside System.map)"


def instruction_counts(trace: Trace) -> np.ndarray:
    """Executions of each instruction of the block index (int64, in ``insn_*`` order)."""
    idx = block_index(trace)
    cnt = np.zeros(len(idx.insn_vaddr), dtype=np.int64)
    for v in trace.vcpus:
        for ch in exec_chunks(trace, v):
            pos = ch.pos
            full = ch.sizes == idx.ninsn[pos]
            runs = np.bincount(pos[full], minlength=len(idx.ids))
            cnt += np.repeat(runs, idx.count)
            for p, k in zip(pos[~full].tolist(), ch.sizes[~full].tolist()):
                cnt[idx.start[p]:idx.start[p] + k] += 1  # truncated: its first k retired
    return cnt


def function_instructions(trace: Trace, symbols: KernelSymbols | None = None) -> pd.Series:
    """Instructions the trace executed in each kernel function (base names, clone suffixes
    dropped), and :data:`OUTSIDE` for the rest; sorted, largest first."""
    sym = symbols if symbols is not None else trace_symbols(trace)
    idx = block_index(trace)
    cnt = instruction_counts(trace)
    pc = idx.insn_vaddr.astype(np.uint64)
    k = np.searchsorted(sym.addr, pc, side="right") - 1
    inside = (k >= 0) & (pc < sym.end[np.maximum(k, 0)])
    names = np.array([base_name(n) for n in sym.names] + [OUTSIDE], dtype=object)
    label = names[np.where(inside, k, len(sym.names))]
    return pd.Series(cnt).groupby(label).sum().sort_values(ascending=False)


@dataclass(frozen=True)
class SchedulerShare:
    """A trace's scheduler instructions.

    Attributes
    ----------
    instructions : int
        All instructions of the trace (every vCPU).
    switches : int
        Context switches (rows of the ``switches`` table: the traced ``__switch_to`` calls).
    switch_path : int
        Instructions in :data:`SCHEDULER_FUNCTIONS`: the context-switch path that the
        segmentation leaves out of every SuperFunction.
    scheduler : int
        Instructions in :data:`LINUX_SCHEDULER_FUNCTIONS`: the whole scheduler.
    """

    instructions: int
    switches: int
    switch_path: int
    scheduler: int

    def per_switch(self, what: str = "switch_path") -> float:
        """``switch_path`` or ``scheduler`` instructions per context switch."""
        if what not in ("switch_path", "scheduler"):
            raise ValueError(f"what must be 'switch_path' or 'scheduler', got {what!r}")
        if self.switches == 0:
            raise ValueError("the trace has no context switch to divide by")
        return getattr(self, what) / self.switches

    def share(self, what: str = "scheduler") -> float:
        """``switch_path`` or ``scheduler`` instructions as a fraction of all instructions."""
        if what not in ("switch_path", "scheduler"):
            raise ValueError(f"what must be 'switch_path' or 'scheduler', got {what!r}")
        return getattr(self, what) / self.instructions if self.instructions else float("nan")


def context_switches(trace: Trace) -> int:
    """Rows of the trace's ``switches`` table over every vCPU.

    Raises
    ------
    TraceError
        When the trace has no ``switches`` table (recorded without ``sysmap``).
    """
    if not trace.parts("switches"):
        raise TraceError(f"{trace.path}: no switches table: the trace was recorded without "
                         f"the kernel's System.map, so its context switches are unknown")
    return sum(trace.num_rows("switches", v) for v in trace.vcpus)


def scheduler_share(trace: Trace, symbols: KernelSymbols | None = None) -> SchedulerShare:
    """Count the trace's context switches and its scheduler's instructions."""
    per_fn = function_instructions(trace, symbols)
    return SchedulerShare(
        instructions=int(per_fn.sum()), switches=context_switches(trace),
        switch_path=int(per_fn[per_fn.index.isin(SCHEDULER_FUNCTIONS)].sum()),
        scheduler=int(per_fn[per_fn.index.isin(LINUX_SCHEDULER_FUNCTIONS)].sum()))
