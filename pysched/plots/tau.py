"""Kendall tau-b of Bloom-filter rankings against Page-heatmap size (the paper's Fig 11)."""
from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes

from ._axes import axes


def plot_tau(tau: pd.DataFrame, ax: Axes | None = None, label: str | None = None) -> Axes:
    """Mean tau-b (and its interquartile range) for each size, on a log2 size axis.

    Parameters
    ----------
    tau : pandas.DataFrame
        From :func:`pysched.heatmaps.tau_vs_size`.
    ax : matplotlib Axes, optional
    label : str, optional
        Legend label (a workload's name).

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = axes(ax, (5.0, 3.6))
    x = tau["bits"].to_numpy()
    ax.plot(x, tau["tau_mean"], marker="o", label=label)
    ax.fill_between(x, tau["tau_q25"], tau["tau_q75"], alpha=0.2)
    ax.set_xscale("log", base=2)
    ax.set_xticks(x, [str(int(b)) for b in x])
    ax.set_xlabel("Page-heatmap size (bits)")
    ax.set_ylabel(r"Kendall $\tau_B$ vs exact ranking")
    ax.set_title("Quality of the Bloom-filter ranking")
    if label is not None:
        ax.legend(frameon=False)
    return ax
