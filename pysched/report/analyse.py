"""One trace through the analysis pipeline: SuperFunctions, breakups, epoch similarity, page
heatmaps and the Bloom-filter ranking test, gathered into one record.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pysched.characterisation import (
    Breakup,
    consecutive_similarity,
    epoch_breakup,
    instruction_breakup,
    steady_state,
)
from pysched.heatmaps import SIZES, EpochPages, PageHeatmaps, tau_vs_size
from pysched.superfunctions import DEFAULT_EPOCH, Segmentation, segment
from pysched.trace import Trace, open_trace


@dataclass
class AnalysisOptions:
    """What :func:`analyse_trace` computes.

    Attributes
    ----------
    epoch_len : int
        Instructions per vCPU per epoch: an epoch is ``epoch_len * nvcpus`` machine-wide
        instructions (:mod:`pysched.trace.clock`).
    bloom_bits : int
        Page-heatmap size of the drawn heatmaps and the overlap table.
    tau_epochs : int
        At most this many epochs (evenly spaced) enter the tau-b test; it costs one exact
        overlap matrix per epoch.
    warmup : int
        Epochs of start-up left out of the steady-state similarity figures.
    keep_harness : bool
        Count the capture harness's own work inside the region (left out by default:
        :mod:`pysched.superfunctions.harness`).
    """

    epoch_len: int = DEFAULT_EPOCH
    bloom_bits: int = 512
    tau_epochs: int = 60
    warmup: int = 5
    keep_harness: bool = False

    def __post_init__(self) -> None:
        for name in ("epoch_len", "bloom_bits", "tau_epochs"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.bloom_bits not in SIZES:
            raise ValueError(f"bloom_bits must be one of {SIZES}, got {self.bloom_bits}")
        if int(self.warmup) < 0:
            raise ValueError(f"warmup must be 0 or more epochs, got {self.warmup}")


@dataclass
class TraceAnalysis:
    """Everything :func:`analyse_trace` found in one trace.

    Attributes
    ----------
    name : str
        The trace directory's name.
    seg : Segmentation
    breakup : Breakup
        Instructions per category over the whole trace (Fig 4).
    epochs : pandas.DataFrame
        Instructions per superFuncType in each complete epoch
        (:attr:`Segmentation.complete_epochs`).
    similarity : pandas.Series
        Cosine similarity of consecutive epochs (section 4.4).
    heat : PageHeatmaps
    epoch : int or None
        The representative epoch whose heatmaps are drawn (None: the trace has no epoch with
        heat).
    pages : EpochPages or None
        That epoch's code pages per superFuncType.
    tau : pandas.DataFrame
        Kendall tau-b per Page-heatmap size (Fig 11).
    seconds : dict of str to float
        Wall time of each stage.
    manifest : dict
        The trace's manifest (empty when it has none).
    note : str or None
        What was analysed when it was not the whole trace (an incomplete trace's prefix).
    """

    name: str
    seg: Segmentation
    breakup: Breakup
    epochs: pd.DataFrame
    similarity: pd.Series
    heat: PageHeatmaps
    epoch: int | None
    pages: EpochPages | None
    tau: pd.DataFrame
    seconds: dict[str, float] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    note: str | None = None

    def summary(self, opts: AnalysisOptions) -> dict[str, Any]:
        """The headline numbers as plain JSON-able values."""
        sim = self.similarity
        after = sim.loc[opts.warmup:] if len(sim) else sim
        tau = self.tau.set_index("bits")
        man = self.manifest
        return {
            "trace": self.name,
            "note": self.note,
            "path": str(self.seg.path),
            "workload": man.get("workload") or man.get("command"),
            "vcpus": len(self.seg.vcpu_insns),
            "instructions": int(self.seg.total_insns),
            "instructions_per_vcpu": {str(v): int(n) for v, n in self.seg.vcpu_insns.items()},
            "epoch_len": int(self.seg.epoch_len),
            "epoch_machine_insns": int(self.seg.clock.epoch_insns(self.seg.epoch_len)),
            "machine_insns_covered": int(self.seg.clock.covered),
            "full_epochs": int(len(self.epochs)),
            "instances": int(len(self.seg.instances)),
            "superfunctypes": int(len(self.seg.types)),
            # The capture harness's own work inside the region (pysched.superfunctions.harness)
            "harness_insns": int(self.seg.instances.loc[self.seg.instances["harness"],
                                                        "insns"].sum()),
            "harness_counted": bool(opts.keep_harness),
            "breakup": self.breakup.fractions(),
            "breakup_paper_categories": self.breakup.paper_fractions(),
            "scheduler_share": (self.breakup.scheduler / (self.breakup.total
                                                          + self.breakup.scheduler)
                                if self.breakup.total else 0.0),
            "similarity": {
                "warmup_epochs": int(opts.warmup),
                "epochs_after_warmup": int(len(after)),
                "median_after_warmup": _num(after.median()) if len(after) else None,
                "share_above_0.995": _num((after > 0.995).mean()) if len(after) else None,
                "share_above_0.98": _num((after > 0.98).mean()) if len(after) else None,
                "steady_from_epoch": steady_state(sim, 0.995, window=5),
            },
            "tau_b_mean": {str(int(b)): _num(tau.loc[b, "tau_mean"]) for b in tau.index},
            "heatmap_epoch": self.epoch,
            "warnings": [{k: w[k] for k in ("code", "severity", "count", "text", "where")}
                         for w in self.seg.warnings],
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
        }


    def overview(self, opts: AnalysisOptions) -> "TraceOverview":
        """What the side-by-side figures and the summaries need of this analysis."""
        return TraceOverview(self.name, self.breakup, self.similarity, self.tau,
                             self.summary(opts))


@dataclass(frozen=True)
class TraceOverview:
    """One trace's part of the side-by-side figures and the summaries: small enough to come
    back from a worker process (:func:`pysched.report.write.write_overview`).

    Attributes
    ----------
    name : str
    breakup : Breakup
    similarity : pandas.Series
    tau : pandas.DataFrame
    summary : dict
        :meth:`TraceAnalysis.summary`.
    """

    name: str
    breakup: Breakup
    similarity: pd.Series
    tau: pd.DataFrame
    summary: dict[str, Any]


def _num(x: Any) -> float | None:
    """A float for JSON, None for NaN."""
    x = float(x)
    return None if np.isnan(x) else x


def full_epochs(seg: Segmentation, matrix: pd.DataFrame) -> pd.DataFrame:
    """Keep the epochs whose whole work the trace holds (:attr:`Segmentation.complete_epochs`):
    past the end of a vCPU that stopped recording early the mix would shift only because its
    work is missing."""
    return matrix.iloc[:seg.complete_epochs]


def representative_epoch(heat: PageHeatmaps) -> int | None:
    """The middle epoch among those with the most superFuncTypes (a steady-state one)."""
    sizes = heat.epoch_sizes()
    if sizes.empty:
        return None
    types = sizes.groupby("epoch")["type"].size()
    busy = types[types >= types.quantile(0.75)]
    return int(busy.index[len(busy) // 2])


def analyse_trace(path: str | Path, opts: AnalysisOptions | None = None, *,
                  trace: Trace | None = None, note: str | None = None) -> TraceAnalysis:
    """Run the analysis pipeline on one trace directory.

    Parameters
    ----------
    path : str or Path
        A trace directory (as written by ``pysched trace``).
    opts : AnalysisOptions, optional
    trace : Trace, optional
        ``path`` already opened (e.g. by :func:`pysched.trace.preflight`, or the view of an
        incomplete trace's prefix).
    note : str, optional
        Said in the summary (what was analysed when it is not the whole trace).

    Returns
    -------
    TraceAnalysis

    Raises
    ------
    pysched.trace.TraceError
        When the directory is not a trace the segmentation can follow (the message names
        the file or table).
    """
    opts = opts or AnalysisOptions()
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    trace = trace if trace is not None else open_trace(path)
    seg = segment(trace, epoch_len=opts.epoch_len)
    seconds["segment"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    breakup = instruction_breakup(seg, keep_harness=opts.keep_harness)
    epochs = full_epochs(seg, epoch_breakup(seg, keep_harness=opts.keep_harness))
    similarity = consecutive_similarity(epochs)
    seconds["characterise"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    heat = PageHeatmaps(seg)
    k = representative_epoch(heat)
    pages = heat.epoch(k) if k is not None else None
    ks = list(range(heat.nepochs))
    if len(ks) > opts.tau_epochs:
        ks = ks[::-(-len(ks) // opts.tau_epochs)]
    tau = tau_vs_size(heat, SIZES, epochs=ks)
    seconds["heatmaps"] = time.perf_counter() - t0
    return TraceAnalysis(name=Path(path).name, seg=seg, breakup=breakup, epochs=epochs,
                         similarity=similarity, heat=heat, epoch=k, pages=pages, tau=tau,
                         seconds=seconds, manifest=dict(trace.manifest or {}), note=note)
