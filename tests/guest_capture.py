"""One real capture for a module of guest tests: ``pysched trace`` run once, skipped without a guest."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from pysched.capture.guest import GuestNotBuiltError


def capture(tmp_path_factory, name: str, locate: Callable[[], object], *args: str,
            timeout: float = 600) -> Path:
    """Trace into a fresh ``name`` directory with ``pysched trace ARGS --out DIR``.

    ``locate`` is the guest's finder (``locate_guest``, ``locate_debian_guest``): the calling
    test is skipped when that guest is not built. Returns the trace directory.
    """
    try:
        locate()
    except GuestNotBuiltError as e:
        pytest.skip(str(e))
    out = tmp_path_factory.mktemp(name) / "t"
    r = subprocess.run([sys.executable, "-m", "pysched.cli", "trace", *args, "--out", str(out)],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return out
