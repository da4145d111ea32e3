"""Execute notebooks/04-schedtask.ipynb on a trace shipped in data/ (as the other notebooks'
tests do): SchedTask's allocation table per epoch, migrations, steals and cache hit rates."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "04-schedtask.ipynb"
DATA = REPO / "data"
WORKLOAD = "oscp"


def test_schedtask_notebook_runs():
    if not (DATA / WORKLOAD / "manifest.json").is_file():
        pytest.skip(f"data/{WORKLOAD} is not shipped")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    saved = {k: os.environ.get(k) for k in ("PYSCHED_DATA", "PYSCHED_WORKLOAD")}
    os.environ.update(PYSCHED_DATA=str(DATA), PYSCHED_WORKLOAD=WORKLOAD)
    try:
        client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                         resources={"metadata": {"path": str(NOTEBOOK.parent)}})
        client.execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {})) for o in outputs)
    # the allocation table, TAlloc's similarity, the per-epoch migrations and the hit rates
    assert "cores per superFuncType after each epoch" in text
    assert "reallocated" in text and "steals" in text and "icache_os" in text
    for policy in ("linux", "schedtask", "selective-offload", "flexsc", "disaggregate-os",
                   "slicc"):
        assert policy in text
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2
