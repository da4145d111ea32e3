"""The study beside the SchedTask paper (seed 000, section 6 and its appendix):
``pysched study schedtask-paper`` and ``make evaluate-paper``.

Grid (:class:`Grid`, :func:`points`), on each of the paper's eight workloads (section 4.2;
``DATA/<workload>``, :data:`~.comparison.WORKLOADS`):

* every technique of Table 3 and ``linux`` (:data:`POLICIES`, with SchedTask's two readings of
  stealing across the application/OS split) at 2X: Fig 7, Fig 8, Fig 10 and the overheads of
  section 6.1;
* SchedTask's stealing variants (Fig 9) and Page-heatmap sizes (Fig 11) at 2X
  (:data:`VARIANTS`);
* every policy of :data:`POLICIES` at the other loads of Table 4 (1X, 4X, 8X);

on ``cores`` simulated cores (8 by default, the appendix's smallest machine; the paper's main
figures are at 32), loads relative to the machine (kX on C cores: ``copies_for(k, C, vCPUs)``
copies of a trace), with ``pysched evaluate``'s switch cost (``traced``) and model settings, a
window of the first ``epochs`` epochs or whole replays. Points are submitted in that order (all
workloads at 2X first), so an interrupted study has Fig 7 first.

Measure (:func:`summarise`): ``pysched evaluate``'s summary of all runs
(:func:`pysched.evaluation.report.write`) opening with :func:`~.comparison.headline_markdown`
(each technique's gain at 2X beside the paper's Fig 7) and with
:func:`~.comparison.comparison_markdown` as its last section (Fig 7-11, Table 4, the
overheads, why ours may differ), and
``paper-<cores>cores.png`` (:func:`~.plots.plot_paper`).

The runs are points of the sweep machinery (:mod:`pysched.sweep`; each through
:func:`pysched.sweep.run.run_point`, i.e. :func:`pysched.evaluation.runner.evaluate`), on Dask,
stored as they finish under ``OUT/points``; a re-run into the same ``OUT`` runs only what is
not stored, and the summary is written when every point is.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from pysched.constants import LOAD_MACHINE
from pysched.evaluation.report import write
from pysched.models.machine import MachineConfig
from pysched.sandbox.switch_cost import TRACED
from pysched.sweep.geometry import base_machine
from pysched.sweep.spec import Point, canonical_policy
from pysched.sweep.store import ResultStore

from ..ablation import gains_markdown
from .comparison import (WORKLOADS, comparison_markdown, headline_markdown, paper_loads,
                         with_changes)
from .plots import plot_paper

#: Table 3's techniques and the baseline, SchedTask in both readings of stealing across the
#: application/OS split (``steal=same``, section 5.2 read literally, is its default).
POLICIES = ("linux", "schedtask", "schedtask:steal=any", "selective-offload", "flexsc",
            "disaggregate-os", "slicc")
#: SchedTask's variants at 2X: stealing (Fig 9, section 6.4) and Page-heatmap bits (Fig 11,
#: section 6.5; 512 is the default).
VARIANTS = ("schedtask:stealing=none", "schedtask:stealing=same", "schedtask:heatmap_bits=128",
            "schedtask:heatmap_bits=256", "schedtask:heatmap_bits=1024",
            "schedtask:heatmap_bits=2048")
#: Table 4's loads; 2X (section 6.1) is also the figures'.
LOADS = (1, 2, 4, 8)
#: The load of the figures (section 6.1).
FIGURES_LOAD = 2


@dataclass(frozen=True)
class Grid:
    """What the study runs (see the module).

    Attributes
    ----------
    traces : tuple of str
        Trace directories (the paper's eight workloads in ``data/`` by default: :func:`traces`).
    cores : int
    loads : tuple of int
        The paper's loads kX; the variants run at 2X when it is among them.
    policies, variants : tuple of str
        Policy specs (``name:key=value``).
    epochs : int or None
        A window of each run's first epochs (None: whole replays).
    epoch_ms : float
    switch_cost : str
    machine : MachineConfig or None
        A base machine (its hierarchy and first core type at every core count); None: Table 2.
    """

    traces: tuple[str, ...]
    cores: int = 8
    loads: tuple[int, ...] = LOADS
    policies: tuple[str, ...] = POLICIES
    variants: tuple[str, ...] = VARIANTS
    epochs: int | None = None
    epoch_ms: float = 3.0
    switch_cost: str = TRACED
    machine: MachineConfig | None = None


def traces(data: str | Path, workloads: Sequence[str] = tuple(WORKLOADS)) -> tuple[str, ...]:
    """The trace directories of ``workloads`` in ``data``."""
    return tuple(str(Path(data) / w) for w in workloads)


def points(grid: Grid) -> dict[Point, str]:
    """The study's sweep points, in the order to run them, each with the policy spec it was
    asked as (the points carry canonical specs, e.g. ``schedtask:heatmap_bits=512``; the
    summary names runs as asked). A point asked twice is run once."""
    m = grid.machine if grid.machine is not None else base_machine(32, 3)
    l1i = m.hierarchy.l1i.size // 1024
    at_2x = [FIGURES_LOAD] if FIGURES_LOAD in grid.loads else []
    # all workloads at 2X, then the variants, then the other loads (the Makefile's old order)
    phases = [(at_2x, grid.policies), (at_2x, grid.variants),
              ([k for k in grid.loads if k != FIGURES_LOAD], grid.policies)]
    out: dict[Point, str] = {}
    for loads, specs in phases:
        for t in grid.traces:
            for k in loads:
                for spec in specs:
                    pol, bits = canonical_policy(spec, "--policies")
                    p = Point(str(Path(t).resolve()), pol, grid.cores, k, LOAD_MACHINE, l1i, 3,
                              bits, grid.epoch_ms, m, grid.switch_cost, (), grid.epochs)
                    out.setdefault(p, spec)
    return out


def run(grid: Grid, out: str | Path, scheduler: str | None = None,
        workers: int | None = None,
        on_start: Callable[[int, int, str | None], None] | None = None,
        on_done: Callable[[Point, str | None], None] | None = None):
    """Run the grid's points not yet stored under ``out/points`` (:func:`pysched.sweep.run.
    run_sweep`: on ``scheduler``, or a local cluster of ``workers``); returns its
    :class:`~pysched.sweep.run.SweepOutcome`."""
    from pysched.sweep.run import run_sweep
    return run_sweep(list(points(grid)), Path(out) / "points", scheduler=scheduler,
                     workers=workers, on_start=on_start, on_done=on_done)


def results(grid: Grid, out: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The stored (epochs, runs) of the grid's finished points, each run's ``policy`` the spec
    it was asked as."""
    pts = points(grid)
    asked = {p.key: spec for p, spec in pts.items()}
    store = ResultStore(Path(out) / "points")
    frames = []
    for kind in ("epochs", "runs"):
        f = store.read(list(pts), kind=kind)
        if len(f):
            f = f.assign(policy=f["point"].map(asked))
        frames.append(f)
    return frames[0], frames[1]


def summarise(grid: Grid, out: str | Path, baseline: str = "linux",
              reasons: Mapping[str, str] | None = None,
              ablation: pd.DataFrame | None = None, left_out: Sequence[str] = ()) -> str:
    """Write the study's results into ``out`` (``epochs.parquet``, ``runs.csv``, ``summary.md``
    with the paper beside ours, ``epochs.png``, ``paper-<cores>cores.png``) from its stored
    points; returns the summary. ``reasons`` are the ablations' one-line verdicts by policy
    name (:func:`pysched.studies.ablation.read_verdicts`), quoted in the headline;
    ``ablation`` their tables (:func:`pysched.studies.ablation.read_tables`), set beside the
    paper comparison; ``left_out`` says which ablations were given but not quoted, and why
    (:func:`pysched.studies.ablation.usable`)."""
    out = Path(out)
    epochs, runs = results(grid, out)
    if runs.empty:
        raise ValueError(f"{out}: no finished point of the study")
    sections = [comparison_markdown]
    if ablation is not None and len(ablation):
        table = gains_markdown(ablation)
        sections.append(lambda runs, baseline: "## What decides each result (ablation)\n\n"
                        + table)
    write(out, epochs, runs, baseline, sections=sections,
          headline=partial(headline_markdown, reasons=reasons, left_out=left_out))
    at_paper = paper_loads(runs)
    if baseline in set(at_paper["policy"]):
        r = with_changes(at_paper, baseline)
        for cores in sorted(set(r["cores"])):  # Fig 7 and Table 4 beside the paper's
            plot_paper(r, out / f"paper-{cores}cores.png", cores)
    return (out / "summary.md").read_text()


__all__ = ["FIGURES_LOAD", "Grid", "LOADS", "POLICIES", "VARIANTS", "points", "results", "run",
           "summarise", "traces"]
