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


def test_seeds_command_leaves_out_what_is_missing(tmp_path: Path, capsys) -> None:
    # make run's last step: a seed whose traces are not there is named, not failed
    from pysched.cli import main
    (tmp_path / "data").mkdir()
    assert main(["seeds", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    for seed, first in (("001", "barrier"), ("002", "netserver-10b"), ("003", "chase-mid")):
        assert f"## Seed {seed}\n\nLeft out: {tmp_path / 'data' / first} is not there" in text
    assert text in capsys.readouterr().out
