"""A study's grid of sandbox runs, each replayed through the one evaluate path.

A study declares its runs (:class:`Run`: trace, policy, cores, load and its unit, machine,
switch cost and model settings, and the study's own labels of the run) and its measure: a
:data:`~pysched.evaluation.runner.Measure` for what a run row lacks (a thread's completion, a
policy's counters) and a function from the rows to its table. :func:`run_grid` replays every
run with :func:`pysched.evaluation.runner.evaluate`, so a study gets the switch cost (``traced``
by default), the model's settings and the load rule of ``pysched evaluate`` unless it declares
otherwise. A long grid (the SchedTask paper's) runs as sweep points instead
(:mod:`pysched.studies.schedtask_paper.study`), which also go through ``evaluate``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pysched.constants import LOAD_COPIES
from pysched.evaluation.runner import Measure, PreparedTrace, evaluate
from pysched.models.machine import MachineConfig
from pysched.sandbox.switch_cost import TRACED
from pysched.superfunctions.functype import Category


@dataclass(frozen=True)
class Run:
    """One run of a study's grid.

    Attributes
    ----------
    labels : tuple of (str, value)
        The study's names of the run (e.g. ``(("config", "os-slow"),)``): the first columns
        of its row; none may be a column of ``evaluate``'s run rows.
    trace : str
        The key of the run's trace among the study's prepared traces.
    policy : str
        Policy spec (``name:key=value...``).
    cores : int
        Simulated cores (the machine's, when ``machine`` is given).
    load : int
        In ``load_unit``: copies of the trace replayed together by default (the seeds' papers
        run one instance of their program), or the paper's kX with
        :data:`~pysched.constants.LOAD_MACHINE`.
    load_unit : str
    machine : MachineConfig or None
        The whole machine when it has ``cores`` cores (an asymmetric or DVFS one is kept as
        it is: :func:`pysched.evaluation.runner.machine`); None: Table 2's.
    switch_cost : str
        :data:`~pysched.sandbox.switch_cost.SWITCH_COSTS`; ``traced`` as ``pysched evaluate``.
    model : tuple of (str, value)
        :class:`~pysched.sandbox.SandboxConfig` fields other than their defaults.
    """

    labels: tuple[tuple[str, Any], ...]
    trace: str
    policy: str
    cores: int
    load: int = 1
    load_unit: str = LOAD_COPIES
    machine: MachineConfig | None = None
    switch_cost: str = TRACED
    model: tuple[tuple[str, Any], ...] = ()


def run_grid(runs: Sequence[Run], traces: Mapping[str, PreparedTrace],
             measure: Measure | None = None) -> pd.DataFrame:
    """Replay every run through :func:`~pysched.evaluation.runner.evaluate`.

    Returns
    -------
    DataFrame
        One row per run, in order: its labels, then ``evaluate``'s run row (``policy``,
        ``switch_cost``, the model's settings, the totals, ...) with ``measure``'s columns.
    """
    rows = []
    for r in runs:
        _, row = evaluate([traces[r.trace]], [r.policy], [r.cores], [r.load], base=r.machine,
                          config=dict(r.model), load_unit=r.load_unit,
                          switch_cost=r.switch_cost, measure=measure)
        labels = dict(r.labels)
        if clash := sorted(set(labels) & set(row.columns)):
            raise ValueError(f"run labels {', '.join(clash)} are columns of evaluate's rows")
        rows.append(pd.concat([pd.DataFrame([labels]), row], axis=1))
    return pd.concat(rows, ignore_index=True)


def app_instructions(workload) -> np.ndarray:
    """Per thread (dense id): its application instructions (what a study calls a program's
    work, leaving out its system calls and the interrupts replayed beside it)."""
    w = workload
    app = np.zeros(w.ntasks)
    is_app = (w.category == int(Category.APPLICATION)) & (w.task >= 0)
    np.add.at(app, w.task[is_app], w.insns[is_app])
    return app


__all__ = ["Run", "app_instructions", "run_grid"]
