"""Each shared constant is defined once (issue 12): a second definition anywhere in the package
would let two values drift apart, so this scans the sources for them."""
from __future__ import annotations

import re
from pathlib import Path

import pysched
from pysched import constants
from pysched.models.caches import config, policies

PKG = Path(pysched.__file__).parent

# (pattern of a definition or of the literal value, the one file allowed to hold it)
ONCE = [
    (r"^\s*CLOCK_HZ\s*=", "constants.py"),
    (r"^\s*IPC\s*=", "constants.py"),
    (r"^\s*EPOCH_SECONDS\s*=", "constants.py"),
    (r"^\s*DEFAULT_EPOCH\s*=", "constants.py"),
    (r"^\s*LOAD_(MACHINE|COPIES|UNITS)\s*=", "constants.py"),
    (r"0x[fF]{4}_?8000_?0000_?0000|1\s*<<\s*63", "constants.py"),
    (r"2654435761", "models/caches/policies/__init__.py"),
    (r"^\s*LRU\s*,\s*FIFO\s*,\s*RANDOM\s*=", "models/caches/policies/__init__.py"),
]


def test_each_constant_is_defined_in_one_place():
    for pattern, home in ONCE:
        rx = re.compile(pattern, re.M)
        where = sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
                       if rx.search(p.read_text()))
        assert where == [home], f"{pattern!r} found in {where}, expected only {home}"


def test_values_agree_where_they_are_used():
    from pysched.models.caches.streams import KERNEL_SPACE
    from pysched.superfunctions.segment import DEFAULT_EPOCH
    assert int(KERNEL_SPACE) == constants.KERNEL_SPACE
    assert DEFAULT_EPOCH == constants.DEFAULT_EPOCH == 6_000_000
    assert config.POLICIES == {"lru": policies.LRU, "fifo": policies.FIFO,
                               "random": policies.RANDOM}
    assert policies.rng_state(0) != 0
