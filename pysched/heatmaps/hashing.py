"""The Page-heatmap hash of seed 000, section 3.2.

``hash(pf) = pf + (pf >> 9) + (pf >> 18) + (pf >> 27) + (pf >> 36) + (pf >> 45)``, and the bit
a frame sets in an ``n``-bit Page-heatmap is ``hash(pf) mod n``. The shifts fold all 52 bits of
a frame number into the low 9 that index a 512-bit register.
"""
from __future__ import annotations

import numpy as np

SHIFTS = (0, 9, 18, 27, 36, 45)
#: Page-heatmap sizes of the paper's Fig 11, and its default.
SIZES = (128, 256, 512, 1024, 2048)
DEFAULT_BITS = 512


def page_hash(pfn: np.ndarray | int) -> np.ndarray | int:
    """The paper's hash of frame numbers (uint64 arithmetic, wrapping like a register).

    Parameters
    ----------
    pfn : int or array of int
        Guest-physical frame numbers (``paddr >> 12``).

    Returns
    -------
    int or numpy.ndarray of uint64
    """
    scalar = np.isscalar(pfn)
    pf = np.asarray(pfn, dtype=np.uint64)
    h = np.zeros_like(pf)
    with np.errstate(over="ignore"):
        for s in SHIFTS:
            h = h + (pf >> np.uint64(s))
    return int(h) if scalar else h


def bloom_bit(pfn: np.ndarray | int, nbits: int = DEFAULT_BITS) -> np.ndarray | int:
    """Bit of an ``nbits``-bit Page-heatmap that frame(s) ``pfn`` set."""
    if int(nbits) <= 0:
        raise ValueError(f"nbits must be positive, got {nbits}")
    h = page_hash(pfn)
    if isinstance(h, int):
        return h % int(nbits)
    return (h % np.uint64(nbits)).astype(np.int64)
