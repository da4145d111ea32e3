"""Session-wide test set-up: the cache of prepared traces lives in a temporary directory.

``prepare`` caches on disk (:mod:`pysched.evaluation.prepared_cache`); the tests, and the
commands they start as subprocesses (which inherit the environment), must neither read the
user's cache nor write to it.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_ENV = "PYSCHED_CACHE_DIR"
_saved: dict[str, str | None] = {}


def pytest_configure(config: pytest.Config) -> None:
    _saved["value"] = os.environ.get(_ENV)
    _saved["dir"] = tempfile.mkdtemp(prefix="pysched-test-cache-")
    os.environ[_ENV] = _saved["dir"]


def pytest_unconfigure(config: pytest.Config) -> None:
    if _saved.get("dir"):
        shutil.rmtree(_saved["dir"], ignore_errors=True)
    if _saved.get("value") is None:
        os.environ.pop(_ENV, None)
    else:
        os.environ[_ENV] = _saved["value"]
