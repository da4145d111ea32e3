"""Where pysched caches what it derives from traces: prepared traces
(:mod:`pysched.evaluation.prepared_cache`) and the passing verdicts of the full check
(:mod:`pysched.trace.checker.verdicts`, in its ``.checked`` subdirectory)."""
from __future__ import annotations

import os
from pathlib import Path

#: The environment variable naming the cache directory.
ENV_DIR = "PYSCHED_CACHE_DIR"


def cache_dir() -> Path:
    """The cache directory: ``$PYSCHED_CACHE_DIR``, else ``$XDG_CACHE_HOME/pysched/prepared``,
    else ``~/.cache/pysched/prepared`` (it need not exist yet)."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "pysched" / "prepared"


__all__ = ["ENV_DIR", "cache_dir"]
