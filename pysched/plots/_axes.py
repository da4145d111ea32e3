"""Shared helper: the axes to draw on."""
from __future__ import annotations

from matplotlib.axes import Axes


def axes(ax: Axes | None, size: tuple[float, float] = (6.4, 4.0)) -> Axes:
    """``ax``, or the axes of a new figure of ``size`` inches."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=size, layout="constrained")
    return new
