"""Exact page sets and Page-heatmaps per superFuncType per epoch, from a segmentation's heat.

``Segmentation.heat`` lists, per epoch, which code frames each superFuncType executed
(scheduler code left out). Here they become, for one epoch (or the whole trace): the list of
types, their exact frame sets, their Bloom-filter Page-heatmaps of any size, and the overlap
of every pair of types, exact (common frames) or estimated (common bits).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pysched.superfunctions import Category, Segmentation

from .bloom import bloom_filters, overlap_matrix
from .hashing import DEFAULT_BITS

_OS = (Category.SYSCALL, Category.INTERRUPT, Category.BOTTOM_HALF, Category.KERNEL_THREAD,
       Category.UNKNOWN)


@dataclass(frozen=True)
class EpochPages:
    """The frames each superFuncType executed in one epoch (or several merged).

    Attributes
    ----------
    epoch : int or None
        The epoch; None for a union over epochs.
    types : numpy.ndarray of uint64
        superFuncTypes that executed code, ascending.
    category : numpy.ndarray of int8
        :class:`Category` of each type.
    labels : list of str
    group : numpy.ndarray of int64
        For each (type, frame) pair: index into ``types``.
    pfn : numpy.ndarray of uint64
        For each pair: the frame.
    """

    epoch: int | None
    types: np.ndarray
    category: np.ndarray
    labels: list[str]
    group: np.ndarray
    pfn: np.ndarray

    def __len__(self) -> int:
        return len(self.types)

    def pages(self, i: int) -> np.ndarray:
        """Sorted frames of type ``types[i]``."""
        return np.sort(self.pfn[self.group == i])

    def sizes(self) -> np.ndarray:
        """Frames per type."""
        return np.bincount(self.group, minlength=len(self.types))

    def bloom(self, nbits: int = DEFAULT_BITS) -> np.ndarray:
        """Page-heatmaps of every type, ``(len(types), ceil(nbits / 64))`` uint64 words."""
        return bloom_filters(self.group, self.pfn, len(self.types), nbits)

    def exact_overlap(self) -> np.ndarray:
        """Common frames of every pair of types (diagonal: each type's frame count)."""
        n = len(self.types)
        if n == 0:
            return np.zeros((0, 0), dtype=np.int64)
        # Frames as columns of a sparse incidence matrix; its Gram matrix counts common frames.
        uniq, col = np.unique(self.pfn, return_inverse=True)
        inc = np.zeros((n, len(uniq)), dtype=np.float32)
        inc[self.group, col] = 1.0
        return np.rint(inc @ inc.T).astype(np.int64)

    def bloom_overlap(self, nbits: int = DEFAULT_BITS) -> np.ndarray:
        """Page overlap estimated as in the paper: popcount of the AND of Page-heatmaps."""
        return overlap_matrix(self.bloom(nbits))

    def is_os(self) -> np.ndarray:
        """Whether each type is OS code (everything but applications)."""
        return np.isin(self.category, [int(c) for c in _OS])


class PageHeatmaps:
    """Per-epoch page sets of a :class:`~pysched.superfunctions.Segmentation`.

    Parameters
    ----------
    seg : Segmentation
    """

    def __init__(self, seg: Segmentation) -> None:
        self.seg = seg
        heat = seg.heat
        self._epoch = heat["epoch"].to_numpy(np.int64)
        self._type = heat["type"].to_numpy(np.uint64)
        self._pfn = heat["pfn"].to_numpy(np.uint64)
        t = seg.types
        self._cat = dict(zip(t["type"].to_numpy(np.uint64).tolist(),
                             t["category"].to_numpy().tolist()))
        self._label = dict(zip(t["type"].to_numpy(np.uint64).tolist(), t["label"].tolist()))
        self._bounds = np.searchsorted(self._epoch, np.arange(self.nepochs + 1))

    @property
    def nepochs(self) -> int:
        return int(self._epoch.max()) + 1 if len(self._epoch) else 0

    def epoch(self, k: int | None = None) -> EpochPages:
        """Page sets of epoch ``k``; None merges all epochs (the whole trace)."""
        if k is None:
            sel = slice(None)
        else:
            if not 0 <= k < self.nepochs:
                raise IndexError(f"epoch {k} out of range [0, {self.nepochs})")
            sel = slice(self._bounds[k], self._bounds[k + 1])
        typ, pfn = self._type[sel], self._pfn[sel]
        if k is None:
            both = np.unique(np.stack([typ, pfn]), axis=1) if len(typ) else np.zeros((2, 0),
                                                                                       np.uint64)
            typ, pfn = both[0], both[1]
        types, group = np.unique(typ, return_inverse=True)
        cat = np.array([self._cat.get(int(x), int(Category.UNKNOWN)) for x in types.tolist()],
                       dtype=np.int8)
        labels = [self._label.get(int(x), str(int(x))) for x in types.tolist()]
        return EpochPages(k, types, cat, labels, group.astype(np.int64), pfn)

    def epoch_sizes(self) -> pd.DataFrame:
        """Frames per (epoch, type): how much code each type touched each epoch."""
        df = pd.DataFrame({"epoch": self._epoch, "type": self._type})
        return df.groupby(["epoch", "type"]).size().rename("pages").reset_index()
