"""Sensitivity sweeps: grids of sandbox runs on Dask distributed (``pysched sweep``).

:func:`load_spec` reads a sweep file into :class:`Point` s, :func:`run_sweep` runs them on a
local or existing Dask cluster and stores each as it finishes, :func:`read_results` reads a
results directory back (one row per run and epoch, every parameter a column).
"""
from __future__ import annotations

from .spec import Point, Sweep, SweepSpecError, load_spec, parse_spec
from .store import ResultStore, read_results
from .summary import summarise

__all__ = ["Point", "ResultStore", "Sweep", "SweepSpecError", "load_spec", "parse_spec",
           "read_results", "run_sweep", "summarise"]


def __getattr__(name: str):
    # dask is imported only when a sweep runs, not by `import pysched.sweep`
    if name == "run_sweep":
        from .run import run_sweep
        return run_sweep
    raise AttributeError(name)
