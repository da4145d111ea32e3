"""Figures of the analysis with matplotlib: breakup bars (Fig 4), epoch similarity (4.4),
Page-heatmaps as images, the overlap matrix (5.2) and tau-b against size (Fig 11). Each
function draws on the given axes (or a new figure) and returns the axes."""
from __future__ import annotations

from .breakup import CATEGORY_STYLE, plot_breakup
from .heatmap import plot_heatmaps
from .overlap import plot_overlap
from .similarity import plot_similarity
from .tau import plot_tau

__all__ = ["CATEGORY_STYLE", "plot_breakup", "plot_heatmaps", "plot_overlap",
           "plot_similarity", "plot_tau"]
