"""The overlap matrix of one epoch's superFuncTypes."""
from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes

from pysched.heatmaps import DEFAULT_BITS, EpochPages, pair_mask

from ._axes import axes


def plot_overlap(pages: EpochPages, nbits: int | None = DEFAULT_BITS, ax: Axes | None = None,
                 max_types: int | None = 30, os_app: bool = False) -> Axes:
    """Page overlap of every pair of types; pairs the overlap table leaves out are blank.

    Parameters
    ----------
    pages : EpochPages
    nbits : int or None
        Page-heatmap size; None: exact common frames.
    ax : matplotlib Axes, optional
    max_types : int or None
        Draw the types with the most frames only.
    os_app : bool
        Also show OS/application pairs.

    Returns
    -------
    matplotlib.axes.Axes
    """
    m = pages.exact_overlap() if nbits is None else pages.bloom_overlap(nbits)
    ok = pair_mask(pages, os_app) | np.eye(len(pages), dtype=bool)
    # OS types first, then applications; within each, most frames first.
    order = np.lexsort((-pages.sizes(), ~pages.is_os()))
    if max_types is not None:
        order = order[:max_types]
    shown = np.where(ok, m, np.nan)[np.ix_(order, order)].astype(float)
    ax = axes(ax, (7.0, 6.0))
    im = ax.imshow(shown, cmap="viridis", interpolation="nearest")
    labels = [pages.labels[i] for i in order]
    ax.set_xticks(np.arange(len(order)), labels, rotation=90, fontsize="x-small")
    ax.set_yticks(np.arange(len(order)), labels, fontsize="x-small")
    what = "common frames" if nbits is None else f"common bits ({nbits}-bit)"
    ax.figure.colorbar(im, ax=ax, label=what, shrink=0.8)
    when = "whole trace" if pages.epoch is None else f"epoch {pages.epoch}"
    ax.set_title(f"Page overlap, {when}")
    return ax
