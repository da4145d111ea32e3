"""The analysis notebooks run from top to bottom (nbclient), on data/ or a trace they record."""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from pysched.capture.qemu import default_plugin_path
from pysched.superfunctions.symbols import GUEST_SYSTEM_MAP

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def _have_traces() -> bool:
    data = ROOT / "data"
    shipped = data.is_dir() and any((p / "manifest.json").is_file() for p in data.iterdir())
    recordable = (default_plugin_path().is_file() and GUEST_SYSTEM_MAP.is_file()
                  and shutil.which("qemu-system-x86_64") is not None)
    return shipped or recordable or (ROOT / "out" / "notebook-trace" / "manifest.json").is_file()


@pytest.mark.skipif(not _have_traces(), reason="no trace in data/ and no guest to record one")
@pytest.mark.parametrize("name", ["01-characterisation.ipynb", "02-page-heatmaps.ipynb"])
def test_notebook_runs(name: str) -> None:
    execute_notebook(name)


def execute_notebook(name: str, min_figures: int = 2) -> list:
    """Run ``notebooks/name`` top to bottom; check it raised nothing and drew at least
    ``min_figures`` figures; return its code cells' outputs."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, timeout=1800, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.data]
    assert len(figures) >= min_figures
    return outputs
