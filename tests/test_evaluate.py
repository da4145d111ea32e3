"""``pysched evaluate``: bad input named before any long work, and a small real run written
completely (per-epoch Parquet, runs, summary, plot) from a shipped trace."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


def evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pysched.cli", "evaluate", *args],
                          capture_output=True, text=True, timeout=900)


def test_list_names_every_policy():
    r = evaluate("--list")
    assert r.returncode == 0
    for name in ("as-traced", "linux", "schedtask", "selective-offload", "flexsc",
                 "disaggregate-os", "slicc"):
        assert name in r.stdout


@pytest.mark.parametrize("args, message", [
    (["--policies", "nope"], "--policies: unknown policy 'nope'"),
    (["--policies", "schedtask:stealing=maybe"], "stealing must be one of"),
    (["--cores", "0"], "--cores: 0 is not a core count"),
    (["--cores", "x"], "--cores: expected integers"),
    (["--load", "0"], "--load: 0 is not a number of copies"),
    (["--epoch-ms", "nan"], "expected a positive finite number"),
])
def test_bad_arguments_are_named(tmp_path, args, message):
    r = evaluate(str(DATA / "dss-mem"), "--out", str(tmp_path / "o"), *args)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_missing_trace_and_busy_out_are_refused(tmp_path):
    r = evaluate(str(tmp_path / "none"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "not a trace directory" in r.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    r = evaluate(str(DATA / "dss-mem"), "--out", str(tmp_path / "full"))
    assert r.returncode == 2 and "exists and is not empty" in r.stderr


def test_a_small_evaluation_is_written_whole(tmp_path):
    out = tmp_path / "eval"
    r = evaluate(str(DATA / "dss-mem"), "--policies", "linux,schedtask", "--cores", "2",
                 "--load", "1,2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert {p.name for p in out.iterdir()} == {"epochs.parquet", "runs.csv", "summary.md",
                                                "epochs.png"}
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4 and set(runs["policy"]) == {"linux", "schedtask"}
    # every copy's every instruction ran: load 2 doubles the work
    by = runs.set_index(["policy", "load"])["instructions"]
    assert by["linux", 2] == 2 * by["linux", 1] == 2 * by["schedtask", 1]
    epochs = pd.read_parquet(out / "epochs.parquet")
    per_run = epochs.groupby(["policy", "load"])["instructions"].sum()
    assert per_run.sort_index().tolist() == \
        runs.set_index(["policy", "load"])["instructions"].sort_index().tolist()
    assert "2 cores, load 2X" in (out / "summary.md").read_text()
    assert not list(tmp_path.glob(".eval.partial-*"))
