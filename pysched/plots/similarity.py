"""Cosine similarity of consecutive epochs' breakups (the paper's section 4.4)."""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from matplotlib.axes import Axes

from ._axes import axes


def plot_similarity(similarity: pd.Series | Mapping[str, pd.Series], ax: Axes | None = None,
                    threshold: float | None = 0.995) -> Axes:
    """Similarity of each epoch's breakup vector with the previous epoch's.

    Parameters
    ----------
    similarity : pandas.Series or mapping of str to Series
        From :func:`pysched.characterisation.consecutive_similarity`, one per workload.
    ax : matplotlib Axes, optional
    threshold : float or None
        Draw the paper's steady-state level (> 0.995).

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = axes(ax)
    series = {"": similarity} if isinstance(similarity, pd.Series) else dict(similarity)
    for name, s in series.items():
        ax.plot(s.index, s.to_numpy(), marker=".", lw=1, label=name or None)
    if threshold is not None:
        ax.axhline(threshold, color="k", ls="--", lw=0.8, label=f"{threshold}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("cosine similarity with previous epoch")
    ax.set_ylim(-0.02, 1.02)
    if len(series) > 1 or threshold is not None:
        ax.legend(frameon=False, fontsize="small")
    ax.set_title("Breakup similarity of consecutive epochs")
    return ax
