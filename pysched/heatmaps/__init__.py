"""Page-heatmaps (seed 000, sections 3.2, 5.2 and 6.5): per superFuncType per epoch, the code
frames it executed, as exact sets and as Bloom filters with the paper's hash; the overlap
table; and how faithfully each filter size ranks overlaps (Kendall tau-b, Fig 11).

>>> from pysched.superfunctions import segment
>>> from pysched.heatmaps import PageHeatmaps, overlap_table
>>> heat = PageHeatmaps(segment("out/run1"))      # doctest: +SKIP
>>> overlap_table(heat.epoch(3)).head()           # doctest: +SKIP
"""
from __future__ import annotations

from pysched import _jitcache  # noqa: F401  (first: ties numba's kernel cache to the sources)

from .bloom import bloom_filters, overlap_matrix, unpack_bits
from .hashing import DEFAULT_BITS, SIZES, bloom_bit, page_hash
from .overlap import overlap_table, pair_mask
from .pagesets import EpochPages, PageHeatmaps
from .ranking import tau_per_type, tau_vs_size

__all__ = ["DEFAULT_BITS", "SIZES", "EpochPages", "PageHeatmaps", "bloom_bit", "bloom_filters",
           "overlap_matrix", "overlap_table", "page_hash", "pair_mask", "tau_per_type",
           "tau_vs_size", "unpack_bits"]
