"""The end of the pipeline: run the analysis on traces and write its tables, figures and a
summary (``pysched analyse``; ``make run`` does it on the shipped traces).

>>> from pysched.report import analyse_trace
>>> a = analyse_trace("data/dss")                 # doctest: +SKIP
>>> a.breakup.paper_fractions()                   # doctest: +SKIP
"""
from __future__ import annotations

from .analyse import AnalysisOptions, TraceAnalysis, TraceOverview, analyse_trace
from .write import markdown, read_summary, write_overview, write_trace

__all__ = ["AnalysisOptions", "TraceAnalysis", "TraceOverview", "analyse_trace", "markdown",
           "read_summary", "write_overview", "write_trace"]
