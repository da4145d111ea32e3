"""The overlap table of seed 000, section 5.2.

For each superFuncType, the other types in decreasing order of Page overlap. As in the paper,
no overlap is computed between an OS type and an application type (SchedTask never places one
where the other runs); a type is not listed against itself.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .hashing import DEFAULT_BITS
from .pagesets import EpochPages


def pair_mask(pages: EpochPages, os_app: bool = False) -> np.ndarray:
    """Which pairs of types an overlap table compares: not a type with itself and, unless
    ``os_app``, not an OS type with an application."""
    n = len(pages)
    ok = ~np.eye(n, dtype=bool)
    if not os_app:
        os_ = pages.is_os()
        ok &= os_[:, None] == os_[None, :]
    return ok


def overlap_table(pages: EpochPages, nbits: int | None = DEFAULT_BITS,
                  os_app: bool = False) -> pd.DataFrame:
    """The overlap table of one epoch.

    Parameters
    ----------
    pages : EpochPages
    nbits : int or None
        Page-heatmap size; None uses the exact page sets (common frames).
    os_app : bool
        Also list OS/application pairs (the paper leaves them out).

    Returns
    -------
    pandas.DataFrame
        ``type``, ``label``, ``other``, ``other_label``, ``overlap``, ``rank`` (1 = most
        overlap; ties share a rank), sorted by type and decreasing overlap.
    """
    m = pages.exact_overlap() if nbits is None else pages.bloom_overlap(nbits)
    ok = pair_mask(pages, os_app)
    i, j = np.nonzero(ok)
    df = pd.DataFrame({"type": pages.types[i], "label": np.array(pages.labels, dtype=object)[i],
                       "other": pages.types[j],
                       "other_label": np.array(pages.labels, dtype=object)[j],
                       "overlap": m[i, j]})
    df = df.sort_values(["type", "overlap", "other"], ascending=[True, False, True],
                        ignore_index=True)
    df["rank"] = df.groupby("type")["overlap"].rank(method="min", ascending=False).astype(int)
    return df
