"""Instruction breakup by SuperFunction category (seed 000, section 4.3 and Fig 4).

The paper leaves the Linux scheduler's own instructions out of the breakup; so do the
fractions here by default (they are counted apart, in ``scheduler``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd

from pysched.superfunctions import PAPER_CATEGORIES, Category, Segmentation

from .epochs import segmentation_epoch_counts

_FIELDS = {Category.APPLICATION: "application", Category.SYSCALL: "syscall",
           Category.INTERRUPT: "interrupt", Category.BOTTOM_HALF: "bottom_half",
           Category.KERNEL_THREAD: "kernel_thread", Category.UNKNOWN: "unknown"}


@dataclass(frozen=True)
class Breakup:
    """Instructions per category (scheduler code apart). A plain record: two breakups can be
    added, and subtracting a breakup from a later cumulative one gives the delta between.

    Attributes
    ----------
    application, syscall, interrupt, bottom_half, kernel_thread, unknown : int
        Instructions of each category outside the scheduler.
    scheduler : int
        Instructions of scheduler code (in any category's instance).
    """

    application: int = 0
    syscall: int = 0
    interrupt: int = 0
    bottom_half: int = 0
    kernel_thread: int = 0
    unknown: int = 0
    scheduler: int = 0

    def __add__(self, other: Breakup) -> Breakup:
        return Breakup(*(a + b for a, b in zip(self.astuple(), other.astuple())))

    def __sub__(self, other: Breakup) -> Breakup:
        return Breakup(*(a - b for a, b in zip(self.astuple(), other.astuple())))

    def astuple(self) -> tuple[int, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def get(self, category: Category) -> int:
        """Instructions of ``category`` (outside the scheduler)."""
        return getattr(self, _FIELDS[Category(category)])

    @property
    def total(self) -> int:
        """Instructions outside the scheduler."""
        return sum(self.astuple()) - self.scheduler

    def fractions(self, include_scheduler: bool = False) -> dict[str, float]:
        """Share of each category; they sum to 1. With ``include_scheduler``, the scheduler
        is a share of its own too."""
        d = asdict(self)
        if not include_scheduler:
            d.pop("scheduler")
        tot = sum(d.values())
        return {k: (v / tot if tot else 0.0) for k, v in d.items()}

    def paper_fractions(self) -> dict[str, float]:
        """Shares of Table 1's four categories only (Fig 4's bars); sum to 1."""
        d = {_FIELDS[c]: self.get(c) for c in PAPER_CATEGORIES}
        tot = sum(d.values())
        return {k: (v / tot if tot else 0.0) for k, v in d.items()}


def _pieces(seg: Segmentation, keep_harness: bool) -> tuple[pd.DataFrame, np.ndarray,
                                                             np.ndarray]:
    """The pieces counted (:meth:`Segmentation.counted_pieces`), their categories and
    scheduler flags."""
    pieces = seg.counted_pieces(keep_harness)
    cat = seg.instances["category"].to_numpy(np.int64)[pieces["instance"].to_numpy()]
    return pieces, cat, pieces["sched"].to_numpy(bool)


def instruction_breakup(seg: Segmentation, keep_harness: bool = False) -> Breakup:
    """Instructions per category in the whole trace (all vCPUs); the capture harness's own
    instructions only with ``keep_harness``."""
    pieces, cat, sched = _pieces(seg, keep_harness)
    n = (pieces["stop"] - pieces["start"]).to_numpy(np.int64)
    per = np.bincount(cat[~sched], weights=n[~sched], minlength=len(Category)).astype(np.int64)
    return Breakup(*(int(per[c]) for c in _FIELDS), scheduler=int(n[sched].sum()))


def epoch_breakups(seg: Segmentation, epoch_len: int | None = None,
                   keep_harness: bool = False) -> list[Breakup]:
    """:class:`Breakup` of each epoch (all vCPUs' instructions of that epoch; the capture
    harness's own only with ``keep_harness``)."""
    pieces, cat, sched = _pieces(seg, keep_harness)
    col = np.where(sched, len(Category), cat)
    counts = segmentation_epoch_counts(seg, pieces, col, len(Category) + 1, epoch_len)
    return [Breakup(*(int(row[c]) for c in _FIELDS), scheduler=int(row[-1])) for row in counts]
