"""Figures of a sandbox evaluation: per-epoch throughput, idleness and i-cache hit rates (the
SchedTask paper study draws its own: :mod:`pysched.studies.schedtask_paper.plots`)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from pysched.labels import load_label


def plot_epochs(epochs: pd.DataFrame, path: str | Path) -> None:
    """One row of panels per (trace, cores, load and its unit): throughput, idle fraction and OS i-cache
    hit rate per epoch, one line per policy."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = list(epochs.groupby(["trace", "cores", "load_unit", "load"]))
    n = max(1, len(groups))
    fig, axes = plt.subplots(n, 3, figsize=(12, 2.6 * n), squeeze=False)
    for row, ((trace, cores, unit, load), g) in enumerate(groups):
        for pol, p in g.groupby("policy"):
            axes[row, 0].plot(p["epoch"], p["throughput"] / 1e9, label=pol)
            axes[row, 1].plot(p["epoch"], 100 * p["idle_fraction"], label=pol)
            axes[row, 2].plot(p["epoch"], p["icache_os"], label=pol)
        axes[row, 0].set_ylabel(f"{trace}\n{cores} cores, {load_label(load, unit)}")
        for ax, t in zip(axes[row], ("Ginsn/s", "idle %", "OS i-cache hit rate")):
            ax.set_title(t, fontsize=9)
            ax.set_xlabel("epoch")
        axes[row, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
