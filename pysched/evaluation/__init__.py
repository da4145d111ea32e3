"""Epoch-by-epoch evaluation of scheduling policies in the sandbox (``pysched evaluate``)."""
from __future__ import annotations

from .runner import PreparedTrace, evaluate, machine, performance, prepare

__all__ = ["PreparedTrace", "evaluate", "machine", "performance", "prepare"]
