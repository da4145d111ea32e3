"""``pysched analyse``: the pipeline on a shipped trace, written to a results directory."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pysched.cli import main
from pysched.report import AnalysisOptions, markdown, read_summary

ROOT = Path(__file__).resolve().parents[1]
DSS = ROOT / "data" / "dss"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (DSS / "manifest.json").is_file():
        pytest.fail(f"the shipped trace {DSS} is missing")
    out = tmp_path_factory.mktemp("results")
    assert main(["analyse", str(DSS), "--out", str(out), "--tau-epochs", "8"]) == 0
    return out


def test_results_layout(results: Path) -> None:
    for f in ("summary.json", "summary.md", "breakup.png", "similarity.png", "tau.png"):
        assert (results / f).stat().st_size > 0, f
    for f in ("instances.parquet", "pieces.parquet", "types.csv", "epoch-breakup.csv",
              "similarity.csv", "tau.csv", "overlap.csv", "heatmaps.png", "overlap.png"):
        assert (results / "dss" / f).stat().st_size > 0, f


def test_summary_agrees_with_the_tables(results: Path) -> None:
    s = json.loads((results / "summary.json").read_text())["traces"][0]
    assert s["trace"] == "dss" and s["vcpus"] == 2
    assert sum(s["breakup"].values()) == pytest.approx(1.0)
    assert sum(s["breakup_paper_categories"].values()) == pytest.approx(1.0)
    types = pd.read_csv(results / "dss" / "types.csv")
    # every instruction is in exactly one type: outside or inside scheduler code
    assert int(types["insns"].sum() + types["sched_insns"].sum()) == s["instructions"]
    pieces = pd.read_parquet(results / "dss" / "pieces.parquet")
    assert int((pieces["stop"] - pieces["start"]).sum()) == s["instructions"]
    epochs = pd.read_csv(results / "dss" / "epoch-breakup.csv", index_col="epoch")
    # dss: 5 complete epochs of the machine (measured on the 45 M-a-vCPU trace of
    # 2026-11-27; epochs of the machine end where the first vCPU stopped recording).
    assert len(epochs) == s["full_epochs"] >= 5
    # a full epoch holds epoch_len instructions per vCPU of the whole machine's (each vCPU's
    # share rounded to whole instructions), scheduler code left out, and the full epochs are
    # those the trace holds whole
    assert s["epoch_machine_insns"] == 2 * s["epoch_len"]
    assert s["full_epochs"] == s["machine_insns_covered"] // s["epoch_machine_insns"]
    assert (epochs.sum(axis=1) <= 2 * s["epoch_len"] + 2).all()
    assert (epochs.sum(axis=1) > 1.9 * s["epoch_len"]).all()
    tau = pd.read_csv(results / "dss" / "tau.csv")
    assert list(tau["bits"]) == [128, 256, 512, 1024, 2048]
    assert s["tau_b_mean"]["512"] == pytest.approx(float(tau.loc[2, "tau_mean"]))
    table = read_summary(results)
    assert table.loc["dss", "instructions"] == s["instructions"]


def test_markdown_names_every_trace(results: Path) -> None:
    text = (results / "summary.md").read_text()
    s = json.loads((results / "summary.json").read_text())["traces"][0]
    assert f"| dss | {s['instructions']:,} | 2 |" in text
    assert "application 80 %" in text          # the paper's stated DSS breakup beside ours
    # the headline first: the configuration, then each finding beside the paper
    assert text.index("## Headline") < text.index("## Instruction breakup")
    assert "- **Configuration:** 1 trace (dss); epochs of 6,000,000 instructions" in text
    assert f"{s['tau_b_mean']['512']:.3f}" in text.split("## Instruction breakup")[0]
    data = json.loads((results / "summary.json").read_text())
    assert markdown(data["traces"], AnalysisOptions(**data["options"])) == text


def test_bad_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    assert main(["analyse", str(missing), "--out", str(tmp_path / "r")]) == 2
    assert str(missing) in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyse", str(empty), "--out", str(tmp_path / "r")]) == 1
    assert str(empty) in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:  # argparse names the option
        main(["analyse", str(DSS), "--heatmap-bits", "500"])
    assert stop.value.code == 2 and "--heatmap-bits" in capsys.readouterr().err
    assert main(["analyse", "--data", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "no trace" in capsys.readouterr().err
    for bad in ("lots", "infM"):
        with pytest.raises(SystemExit):
            main(["analyse", str(DSS), "--epoch-insns", bad])
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["analyse", str(DSS), "--out", str(afile / "r")]) == 2
    assert "--out" in capsys.readouterr().err


def test_worker_processes_write_what_one_process_writes(tmp_path: Path) -> None:
    # two traces on two worker processes, the smaller one listed first (the larger goes first
    # to a worker): the same files and summary, in the order given, as in one process
    traces = [str(ROOT / "data" / n) for n in ("chase-small", "barrier")]
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["analyse", *traces, "--out", str(one), "--tau-epochs", "2",
                 "--workers", "1"]) == 0
    assert main(["analyse", *traces, "--out", str(two), "--tau-epochs", "2",
                 "--workers", "2"]) == 0
    files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(two) for p in two.rglob("*") if p.is_file())
    a, b = (json.loads((d / "summary.json").read_text()) for d in (one, two))
    for s in a["traces"] + b["traces"]:
        s.pop("seconds")
    assert [s["trace"] for s in b["traces"]] == ["chase-small", "barrier"]
    assert a == b
    assert (one / "summary.md").read_text() == (two / "summary.md").read_text()
    for f in files:
        if f.suffix in (".csv", ".parquet"):
            assert (one / f).read_bytes() == (two / f).read_bytes(), f


def test_a_broken_trace_stops_the_workers_before_any_analysis(tmp_path: Path, capsys) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{}")
    out = tmp_path / "r"
    assert main(["analyse", str(ROOT / "data" / "chase-small"), str(broken), "--out", str(out),
                 "--workers", "2"]) == 1
    assert str(broken) in capsys.readouterr().err
    assert not out.exists()
