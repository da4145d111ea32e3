"""The one exception type of :mod:`pysched.trace`."""
from __future__ import annotations


class TraceError(ValueError):
    """A trace directory does not follow the contract of ``qemu-plugin/README.md``.

    The message names the offending file (and column, vCPU, row or block where that applies),
    so that it can be shown to a user as is.
    """
