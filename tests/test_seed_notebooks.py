"""The notebooks of the other seeds (05 HRRS, ...) run from top to bottom (nbclient) on the
shipped traces they need, and show their figures."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_characterisation_notebooks import execute_notebook

ROOT = Path(__file__).resolve().parents[1]
#: notebook -> the shipped traces it reads (Makefile ``data-seeds``)
NEEDS = {"05-hrrs.ipynb": ["barrier"],
         "06-cache-fair.ipynb": ["chase-mid", "chase-large", "chase-small", "netserver-10b",
                                 "netserver-100kb", "netserver-1mb", "apache-short"],
         "07-dvfs.ipynb": ["netserver-10b", "netserver-100kb", "netserver-1mb", "apache-short"]}


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_seed_notebook_runs(name: str) -> None:
    missing = [t for t in NEEDS[name] if not (ROOT / "data" / t / "manifest.json").is_file()]
    if missing:
        pytest.skip(f"data/{missing[0]} is not there (make data-seeds)")
    outputs = execute_notebook(name)
    # the comparison with the paper is printed
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "(paper" in text
