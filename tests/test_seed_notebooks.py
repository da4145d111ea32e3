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


def test_seeds_headline_quotes_an_ablation_or_says_how(tmp_path: Path, monkeypatch) -> None:
    import pandas as pd

    from pysched.cli import main
    from pysched.studies import seeds
    from pysched.sweep.spec import RESULT_VERSION

    def seed_001(data, prepare):
        return "## Seed 001\n\ntable", "- **Seed 001 (HRRS):** +1.0 % sooner.", {}

    monkeypatch.setattr(seeds, "SEEDS", {"001": seed_001})
    monkeypatch.setattr(seeds, "NEEDS", {"001": ()})
    (tmp_path / "data").mkdir()
    assert main(["seeds", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "a")]) == 0
    text = (tmp_path / "a" / "summary.md").read_text()
    assert "not measured in this run: `pysched ablate data/barrier --policy hrrs" in text
    abl = tmp_path / "abl"
    abl.mkdir()
    pd.DataFrame([{"trace": "barrier", "factor": f, "setting": s, "policy": "hrrs",
                   "baseline": "linux", "gain": g, "result_version": RESULT_VERSION}
                  for f, s, g in (("defaults", "-", 0.2), ("switch_cost", "zero", 0.3))]
                 ).to_csv(abl / "ablation.csv", index=False)
    assert main(["seeds", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "b"),
                 "--ablation", str(abl)]) == 0
    text = (tmp_path / "b" / "summary.md").read_text()
    assert "- **Seed 001 (HRRS):** +1.0 % sooner. Why: " in text and "switch_cost" in text
    assert "not measured in this run" not in text
    assert main(["seeds", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "c"),
                 "--ablation", str(tmp_path / "nowhere")]) == 2
    assert not (tmp_path / "c").exists()
