"""Instruction breakup bars (the paper's Fig 4)."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.axes import Axes

from pysched.characterisation import Breakup

from ._axes import axes

#: Category -> (legend label, colour); the paper's four first, then ours.
CATEGORY_STYLE = {
    "application": ("application", "#4C72B0"),
    "syscall": ("system call", "#DD8452"),
    "interrupt": ("interrupt", "#55A868"),
    "bottom_half": ("bottom half", "#C44E52"),
    "kernel_thread": ("kernel thread", "#8172B3"),
    "unknown": ("unknown", "#937860"),
    "scheduler": ("scheduler", "#999999"),
}


def plot_breakup(breakups: Mapping[str, Breakup | Mapping[str, float]],
                 ax: Axes | None = None, include_scheduler: bool = False,
                 hatched: tuple[str, ...] = ()) -> Axes:
    """Stacked bars of the fraction of instructions per category, one bar per workload.

    Parameters
    ----------
    breakups : mapping of str to Breakup or to fractions
        Workload name -> its breakup (or a dict of category fractions, e.g. values read off
        the paper's figure).
    ax : matplotlib Axes, optional
    include_scheduler : bool
        Show the scheduler's share as a category (the paper leaves it out).
    hatched : tuple of str
        Names of bars to hatch (e.g. the paper's, drawn beside ours).

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = axes(ax, (max(4.0, 1.1 * len(breakups) + 2.5), 4.0))
    names = list(breakups)
    fr = [b.fractions(include_scheduler) if isinstance(b, Breakup) else dict(b)
          for b in breakups.values()]
    cats = [c for c in CATEGORY_STYLE if any(f.get(c, 0) > 0 for f in fr)]
    bottom = np.zeros(len(names))
    x = np.arange(len(names))
    for c in cats:
        label, colour = CATEGORY_STYLE[c]
        h = np.array([100 * f.get(c, 0.0) for f in fr])
        bars = ax.bar(x, h, bottom=bottom, color=colour, label=label, width=0.7)
        for bar, name in zip(bars, names):
            if name in hatched:
                bar.set_hatch("//")
                bar.set_edgecolor("white")
        bottom += h
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("instructions (%)")
    ax.set_ylim(0, 100)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_title("Instruction breakup by SuperFunction category")
    return ax
