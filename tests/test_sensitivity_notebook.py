"""Execute notebooks/08-sensitivity.ipynb: a small sweep on the shipped data/dss-mem trace run
on a two-worker local Dask cluster, our curves beside the paper's appendix and Fig 11."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "08-sensitivity.ipynb"


@pytest.mark.skipif(not (REPO / "data" / "dss-mem" / "manifest.json").is_file(),
                    reason="needs the shipped trace data/dss-mem")
def test_sensitivity_notebook_runs(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # a fresh results directory, so that the sweep really runs (a re-run would skip it all)
    monkeypatch.setenv("PYSCHED_SWEEP_OUT", str(tmp_path / "sweep"))
    monkeypatch.setenv("PYSCHED_SWEEP_TRACES", "data/dss-mem")
    monkeypatch.setenv("PYSCHED_SWEEP_WORKERS", "2")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=1800, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "\n".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                     for o in outputs)
    assert "ran 20, skipped 0 already finished, failed 0" in text
    assert "paper_pct" in text and "22.79" in text  # the comparison table, paper beside ours
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2
    # every point stored: one runs file per point
    assert len(list((tmp_path / "sweep" / "runs").glob("*.parquet"))) == 20
