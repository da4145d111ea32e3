"""The scheduler sandbox: a trace's SuperFunctions replayed on simulated cores.

Pipeline: :func:`build_workload` (work items and their wake-up dependencies from a
segmentation) and :func:`build_footprint` (what each instruction touches), then
:func:`simulate` with a policy from :mod:`pysched.policies` on a :class:`SandboxConfig`,
giving per-epoch :class:`SandboxStats`.
"""
from __future__ import annotations

from pysched import _jitcache  # noqa: F401  (first: ties numba's kernel cache to the sources)

from .config import SandboxConfig
from .replay import RunResult, simulate
from .simview import SimView, Work
from .footprint import Footprint, build_footprint
from .metrics import SandboxStats
from .workload import Workload, build_workload

__all__ = ["Footprint", "RunResult", "SandboxConfig", "SandboxStats", "SimView", "Work",
           "Workload", "build_footprint", "build_workload", "simulate"]
