"""Page-heatmaps drawn as images: one row per superFuncType, one column per bit."""
from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes

from pysched.heatmaps import DEFAULT_BITS, EpochPages, unpack_bits

from ._axes import axes


def plot_heatmaps(pages: EpochPages, nbits: int = DEFAULT_BITS, ax: Axes | None = None,
                  max_types: int | None = 40) -> Axes:
    """The Page-heatmaps of one epoch's superFuncTypes as a black-and-white image.

    Parameters
    ----------
    pages : EpochPages
    nbits : int
        Page-heatmap size.
    ax : matplotlib Axes, optional
    max_types : int or None
        Draw at most this many types, those with the most frames.

    Returns
    -------
    matplotlib.axes.Axes
    """
    order = np.argsort(-pages.sizes(), kind="stable")
    if max_types is not None:
        order = order[:max_types]
    bits = unpack_bits(pages.bloom(nbits), nbits)[order]
    ax = axes(ax, (8.0, 0.18 * len(order) + 1.5))
    ax.imshow(bits, aspect="auto", cmap="Greys", interpolation="nearest", vmin=0, vmax=1)
    ax.set_yticks(np.arange(len(order)), [pages.labels[i] for i in order], fontsize="x-small")
    ax.set_xlabel(f"bit of the {nbits}-bit Page-heatmap")
    when = "whole trace" if pages.epoch is None else f"epoch {pages.epoch}"
    ax.set_title(f"Page-heatmaps, {when}")
    return ax
