"""Execute notebooks/04-schedtask.ipynb on a trace shipped in data/ (as the other notebooks'
tests do), 4 epochs: SchedTask's allocation table per epoch, migrations, steals and cache hit
rates."""
from __future__ import annotations

from pathlib import Path

import pytest

from test_characterisation_notebooks import execute_notebook

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
WORKLOAD = "oscp"


def test_schedtask_notebook_runs(monkeypatch):
    if not (DATA / WORKLOAD / "manifest.json").is_file():
        pytest.skip(f"data/{WORKLOAD} is not shipped")
    monkeypatch.setenv("PYSCHED_DATA", str(DATA))
    monkeypatch.setenv("PYSCHED_WORKLOAD", WORKLOAD)
    monkeypatch.setenv("PYSCHED_EPOCHS", "4")  # TAlloc reallocates from the first epoch on
    outputs = execute_notebook("04-schedtask.ipynb")
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {})) for o in outputs)
    # the allocation table, TAlloc's similarity, the per-epoch migrations and the hit rates
    assert "cores per superFuncType after each epoch" in text
    assert "reallocated" in text and "steals" in text and "icache_os" in text
    for policy in ("linux", "schedtask", "selective-offload", "flexsc", "disaggregate-os",
                   "slicc"):
        assert policy in text
