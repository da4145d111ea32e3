"""Characterisation of a trace's SuperFunctions (seed 000, sections 4.3 and 4.4): instruction
breakup by category, per-epoch breakups by superFuncType, and their similarity across epochs.
"""
from __future__ import annotations

from pysched import _jitcache  # noqa: F401  (first: ties numba's kernel cache to the sources)

from .breakup import Breakup, epoch_breakups, instruction_breakup
from .epochs import consecutive_similarity, cosine_similarity, epoch_breakup, steady_state
from .functions import function_profiles
from .kernels import epoch_counts

__all__ = ["Breakup", "consecutive_similarity", "cosine_similarity", "epoch_breakup",
           "epoch_breakups", "epoch_counts", "function_profiles", "instruction_breakup",
           "steady_state"]
