"""How summaries, tables and figures name a sandbox load (``pysched evaluate``, ``pysched
sweep``)."""
from __future__ import annotations

from pysched.constants import LOAD_COPIES


def load_label(load: int, load_unit: str) -> str:
    """A load as the summaries name it.

    Parameters
    ----------
    load : int
        The load, in ``load_unit``.
    load_unit : str
        One of :data:`pysched.constants.LOAD_UNITS`.

    Returns
    -------
    str
        ``2 copies`` (``1 copy``) for :data:`~pysched.constants.LOAD_COPIES`, else the paper's
        ``load 2X``.
    """
    if load_unit == LOAD_COPIES:
        return f"{load} cop{'y' if load == 1 else 'ies'}"
    return f"load {load}X"


__all__ = ["load_label"]
