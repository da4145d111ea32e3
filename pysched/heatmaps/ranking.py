"""How well Bloom-filter Page-heatmaps rank overlaps (seed 000, section 6.5 and Fig 11).

For each superFuncType, the other types (OS/application pairs left out, as in the overlap
table) are ranked by estimated overlap (popcount of the AND of Page-heatmaps of a given size)
and by exact overlap (common code frames). Kendall's tau-b between the two
(:func:`scipy.stats.kendalltau`, which handles ties as tau-b does) says how faithful the
estimate is: 1 when the orders agree. A Bloom filter without collisions counts common frames
exactly, so its tau-b is 1.

Ties: a type whose exact overlaps are all equal has no reference ranking, and is left out at
every size. A type whose exact overlaps differ but whose estimates are all equal (a filter so
full that every AND has the same weight) gets tau 0, not "undefined": the estimate then orders
no pair, neither concordantly nor discordantly, which is what tau's numerator counts. Leaving
such types out would drop exactly the failures of small filters, and average each size over a
different set of types.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from .hashing import SIZES
from .overlap import pair_mask
from .pagesets import EpochPages, PageHeatmaps


def tau_per_type(pages: EpochPages, nbits: int, os_app: bool = False,
                 exact: np.ndarray | None = None) -> pd.DataFrame:
    """Kendall tau-b of each type's Bloom ranking against its exact ranking, in one epoch.

    Parameters
    ----------
    pages : EpochPages
    nbits : int
        Page-heatmap size.
    os_app : bool
        Also rank OS types against applications.
    exact : numpy.ndarray, optional
        ``pages.exact_overlap()``, when already computed.

    Returns
    -------
    pandas.DataFrame
        ``type``, ``others`` (types ranked), ``tau``. A type with fewer than two others, or
        whose exact overlaps are all equal, has no reference ranking and is left out; one
        whose estimates are all equal (but exact overlaps are not) has tau 0 (module
        docstring).
    """
    exact = pages.exact_overlap() if exact is None else exact
    est = pages.bloom_overlap(nbits)
    ok = pair_mask(pages, os_app)
    rows = []
    for i in range(len(pages)):
        sel = ok[i]
        if sel.sum() < 2:
            continue
        a, b = exact[i, sel], est[i, sel]
        if np.all(a == a[0]):
            continue
        tau = 0.0 if np.all(b == b[0]) else kendalltau(b, a, variant="b").statistic
        rows.append((pages.types[i], int(sel.sum()), float(tau)))
    return pd.DataFrame(rows, columns=["type", "others", "tau"]).astype(
        {"type": np.uint64, "others": np.int64, "tau": np.float64})


def tau_vs_size(heat: PageHeatmaps, sizes: tuple[int, ...] = SIZES,
                epochs: list[int] | None = None, os_app: bool = False) -> pd.DataFrame:
    """Mean Kendall tau-b against Page-heatmap size (the paper's Fig 11).

    Parameters
    ----------
    heat : PageHeatmaps
    sizes : tuple of int
        Page-heatmap sizes in bits.
    epochs : list of int, optional
        Epochs to average over (default: all).
    os_app : bool
        Also rank OS types against applications.

    Returns
    -------
    pandas.DataFrame
        Per size: ``bits``, ``tau_mean``, ``tau_median``, ``tau_q25``, ``tau_q75``, ``n``
        (type-epochs with a defined tau).
    """
    ks = range(heat.nepochs) if epochs is None else epochs
    per: dict[int, list[float]] = {b: [] for b in sizes}
    for k in ks:
        pages = heat.epoch(k)
        exact = pages.exact_overlap()
        for b in sizes:
            per[b] += tau_per_type(pages, b, os_app, exact)["tau"].tolist()
    rows = []
    for b in sizes:
        t = np.array(per[b], dtype=float)
        q = np.quantile(t, [0.25, 0.5, 0.75]) if len(t) else [np.nan] * 3
        rows.append((b, float(t.mean()) if len(t) else np.nan, q[1], q[0], q[2], len(t)))
    return pd.DataFrame(rows, columns=["bits", "tau_mean", "tau_median", "tau_q25", "tau_q75",
                                       "n"])
