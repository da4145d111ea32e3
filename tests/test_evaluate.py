"""``pysched evaluate``: bad input named before any long work, and a small real run written
completely (per-epoch Parquet, runs, summary, plot) from a shipped trace."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
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
    (["--load", "0"], "--load: 0 is not a load factor (kX) in 1..64"),
    (["--load", "0", "--load-unit", "copies"], "--load: 0 is not a number of copies"),
    (["--load-unit", "cores"], "argument --load-unit: invalid choice: 'cores'"),
    (["--epoch-ms", "nan"], "expected a positive finite number"),
    (["--epoch-ms", "1e-9"], "--epoch-ms: expected a number from 0.1 to 1000"),
    (["--epoch-ms", "1e6"], "--epoch-ms: expected a number from 0.1 to 1000"),
    (["--policies", ","], "--policies: no policy given"),
    (["--policies", "linux,linux"], "--policies: linux given twice"),
    (["--cores", "2,2"], "--cores: 2 given twice"),
    (["--policies", "linux:"], "policy 'linux': parameter '' is not key=value"),
    (["--policies", "schedtask:threshold=0.5:threshold=0.9"], "'threshold' given twice"),
    (["--policies", "schedtask:threshold=abc"], "threshold='abc' is not a number"),
    (["--policies", "slicc:max_queue=-5"], "policy 'slicc' (max_queue=-5): max_queue must be"),
])
def test_bad_arguments_are_named(tmp_path, args, message):
    r = evaluate(str(DATA / "dss-mem"), "--out", str(tmp_path / "o"), *args)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_missing_trace_and_busy_out_are_refused(tmp_path):
    r = evaluate(str(tmp_path / "none"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "not a trace directory" in r.stderr
    r = evaluate(str(DATA / "dss-mem"), str(DATA / "dss-mem") + "/", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "two traces have the same name" in r.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    r = evaluate(str(DATA / "dss-mem"), "--out", str(tmp_path / "full"))
    assert r.returncode == 2 and "exists and is not empty" in r.stderr


def test_a_small_evaluation_is_written_whole(tmp_path):
    out = tmp_path / "eval"
    r = evaluate(str(DATA / "dss-mem"), "--policies", "linux,schedtask", "--cores", "2",
                 "--load", "1,2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    # the generic evaluation: the paper beside it is the SchedTask paper study's
    assert {p.name for p in out.iterdir()} == {"epochs.parquet", "runs.csv", "summary.md",
                                                "epochs.png"}
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4 and set(runs["policy"]) == {"linux", "schedtask"}
    # 2 cores of a 2-vCPU trace: 1X is one copy, 2X two (one traced vCPU's work per core)
    assert (runs["copies"] == runs["load"]).all() and set(runs["load_unit"]) == {"machine"}
    # every copy's every instruction ran: load 2 doubles the work
    by = runs.set_index(["policy", "load"])["instructions"]
    assert by["linux", 2] == 2 * by["linux", 1] == 2 * by["schedtask", 1]
    epochs = pd.read_parquet(out / "epochs.parquet")
    per_run = epochs.groupby(["policy", "load"])["instructions"].sum()
    assert per_run.sort_index().tolist() == \
        runs.set_index(["policy", "load"])["instructions"].sort_index().tolist()
    assert "2 cores, load 2X" in (out / "summary.md").read_text()
    assert not list(tmp_path.glob(".eval.partial-*"))


@pytest.mark.parametrize("load, cores, vcpus, copies", [
    (1, 8, 2, 4),    # 1X: one traced vCPU's work per core (section 4.2)
    (2, 8, 2, 8),    # 2X doubles it (section 6.1)
    (8, 32, 2, 128),
    (1, 3, 2, 2),    # 3 vCPUs' work rounded up to whole copies: 4 vCPUs' on 3 cores
    (2, 3, 4, 2),    # 6 of 4 vCPUs: 2 copies
    (1, 1, 4, 1),    # a trace wider than the machine: one copy, never none
    (3, 7, 1, 21),   # a 1-vCPU trace: one copy per core and load unit
])
def test_copies_for_is_k_traced_vcpus_per_core_rounded_up(load, cores, vcpus, copies):
    from pysched.evaluation.runner import copies_for
    assert copies_for(load, cores, vcpus) == copies


@pytest.mark.parametrize("args", [(0, 8, 2), (1, 0, 2), (1, 8, 0), (1.5, 8, 2), (True, 8, 2)])
def test_copies_for_refuses_what_is_not_a_positive_integer(args):
    from pysched.evaluation.runner import copies_for
    with pytest.raises(ValueError, match="copies_for: (load|cores|vcpus) must be a positive"):
        copies_for(*args)


def test_the_load_unit_sets_the_copies_a_run_replays():
    from pysched.evaluation import evaluate, prepare
    t = prepare(DATA / "dss-mem")
    assert len(t.workload.vcpus) == 2
    _, m = evaluate([t], ["linux"], cores=[3], loads=[1])  # default: relative to the machine
    _, c = evaluate([t], ["linux"], cores=[3], loads=[1], load_unit="copies")
    assert (m["load_unit"].item(), m["copies"].item()) == ("machine", 2)
    assert (c["load_unit"].item(), c["copies"].item()) == ("copies", 1)
    # every instruction of each copy ran
    assert m["instructions"].item() == 2 * c["instructions"].item() == 2 * t.insns
    with pytest.raises(ValueError, match="--load-unit: 'cores' is not one of machine, copies"):
        evaluate([t], ["linux"], cores=[3], loads=[1], load_unit="cores")


def test_a_measure_adds_its_columns_to_every_run_row():
    from sandbox_factory import FIRST, START, prepared
    from test_sandbox import machine

    from pysched.evaluation import evaluate
    t = prepared([[(0, 400, 0, FIRST)] + [(0, 3000, 1, START), (0, 400, 0, START)] * 5
                  for _ in range(3)], ntypes=2)
    watched = []

    class Ends:
        """Each run's last thread end, and the policy it watched before the replay."""

        def watch(self, policy, trace):
            watched.append((policy.name, trace.name, getattr(policy, "sim", None)))

        def __call__(self, res, policy, trace):
            return {"last_end_s": float(res.task_end_s.max()), "watched": policy.name}

    run = dict(cores=[2], loads=[1], base=machine(2), switch_cost="flat")
    _, runs = evaluate([t], ["linux", "schedtask"], measure=Ends(), **run)
    # watched before the replay (not attached yet), measured after it, one row each
    assert watched == [("linux", "tiny", None), ("schedtask", "tiny", None)]
    assert runs["watched"].tolist() == ["linux", "schedtask"]
    assert (runs["last_end_s"] > 0).all()
    assert np.allclose(runs["last_end_s"], runs["elapsed_s"])
    # without a measure the rows are as before; a measure may not replace the runner's columns
    _, plain = evaluate([t], ["linux"], **run)
    assert set(runs.columns) - set(plain.columns) == {"last_end_s", "watched"}
    with pytest.raises(ValueError, match="measure: copies, instructions are columns"):
        evaluate([t], ["linux"], measure=lambda res, pol, tr: {"instructions": 0, "copies": 0},
                 **run)


def test_the_summary_says_where_the_core_time_went():
    from test_schedtask_paper_study import paper_runs

    from pysched.evaluation.report import core_time, summary_markdown
    runs = paper_runs({"schedtask": {"apache": 0.2, "find": 0.0}})
    runs.loc[(runs["policy"] == "schedtask") & (runs["trace"] == "find"), "idle_fraction"] = 0.3
    t = core_time(runs).set_index(["load", "policy"])
    assert list(t.index) == [(1, "linux"), (1, "schedtask"), (2, "linux"), (2, "schedtask")]
    st = t.loc[(2, "schedtask")]
    assert st["traces"] == 2 and st["idle"] == pytest.approx(0.2)  # (0.1 + 0.3) / 2
    assert st["migr_cycle_share"] == pytest.approx(0.1)  # 4e6 of 4e7 busy cycles
    assert st["migr_per_minsn"] == pytest.approx(0.5)  # 500 per 1e9 instructions
    assert t.loc[(2, "linux"), "migr_cycle_share"] == pytest.approx(0.01)
    part = summary_markdown(runs).split("## 8 cores, load 2X")[1]
    assert "Where the core time went (mean over 2 traces):" in part
    assert st["switch_cycle_share"] == pytest.approx(0.1)  # 4e6 of 4e7 busy cycles
    assert st["switch_per_minsn"] == pytest.approx(4.0)  # 4,000 per 1e9 instructions
    # runs without the idle split and policy cycles (written before they existed) show "-"
    assert "| linux | 10.0 | - | - | 5.00 | 2.00 | 1.00 | 0.05 | - | 90.0 | 80.0 |" in part
    assert "| schedtask | 20.0 | - | - | 10.00 | 4.00 | 10.00 | 0.50 | - | 90.0 | 80.0 |" in part
    split = summary_markdown(runs.assign(idle_no_work=runs["idle_fraction"] / 4,
                                         idle_work_waiting=runs["idle_fraction"] * 3 / 4,
                                         policy_cycles=runs["cycles"] / 50))
    assert "| linux | 10.0 | 2.5 | 7.5 | 5.00 | 2.00 | 1.00 | 0.05 | 2.00 | 90.0 | 80.0 |" in split
    # runs written before the switch columns existed
    old = summary_markdown(runs.drop(columns=["switches", "switch_cycles"]))
    assert "| linux | 10.0 | - | - | - | - | 1.00 | 0.05 | - | 90.0 | 80.0 |" in old
    # a load counted in copies is named so, and not set beside the paper's loads
    from pysched.studies.schedtask_paper.comparison import comparison_markdown
    md = summary_markdown(runs.assign(load_unit="copies"), sections=[comparison_markdown])
    assert "## 8 cores, 2 copies" in md and "Beside the paper" not in md


def test_the_summary_gives_the_policies_notes():
    from test_schedtask_paper_study import paper_runs

    from pysched.evaluation.report import summary_markdown
    runs = paper_runs({"schedtask": {"apache": 0.2, "find": 0.0}})
    assert "## Policy notes" not in summary_markdown(runs)
    said = (runs["policy"] == "schedtask") & (runs["load"] == 2)
    # read back from runs.csv, a run without a note has NaN
    md = summary_markdown(runs.assign(policy_note=pd.Series("it did nothing", index=runs.index)
                                      .where(said)))
    notes = md.split("## Policy notes\n\n")[1].split("\n\n")[0]
    assert notes == ("- **schedtask** (apache at 8 cores, load 2X; find at 8 cores, load 2X): "
                     "it did nothing.")
    # runs.csv read back without any note: a column of NaN
    assert "## Policy notes" not in summary_markdown(runs.assign(policy_note=np.nan,
                                                                 note=np.nan))


def test_evaluate_collects_what_schedtask_decided():
    from pysched.evaluation import evaluate, prepare
    t = prepare(DATA / "dss-mem")
    decided: list[pd.DataFrame] = []
    epochs, runs = evaluate([t], ["linux", "schedtask"], cores=[2], loads=[1],
                            decisions=decided)
    assert len(decided) == 1  # linux keeps no record
    d = decided[0]
    assert set(d["policy"]) == {"schedtask"} and set(d["trace"]) == {"dss-mem"}
    assert {"epoch", "label", "cores", "first_core", "last_core", "reallocated"} <= set(d)
    # every epoch's allocation covers the machine's cores and no more
    n_epochs = int(runs.set_index("policy")["epochs"]["schedtask"])
    assert d["epoch"].max() < n_epochs
    assert d["first_core"].min() >= 0 and d["last_core"].max() <= 1
    for _, g in d.groupby("epoch"):
        assert set(range(2)) <= set(range(g["first_core"].min(), g["last_core"].max() + 1))


def test_a_window_is_the_first_epochs_of_the_whole_run():
    from sandbox_factory import FIRST, START, tiny
    from test_sandbox import machine

    from pysched.policies import get_policy
    from pysched.sandbox import SandboxConfig, simulate
    threads = [[(0, 40, 0, FIRST)] + [(0, 3000, 1 + t % 2, START), (0, 40, 0, START)] * 40
               for t in range(4)]
    w, fp = tiny(threads, ntypes=3)
    cfg = dict(machine=machine(2), epoch_s=2e-5, max_chunk=1000)
    whole = simulate(w, fp, get_policy("schedtask"), SandboxConfig(**cfg))
    part = simulate(w, fp, get_policy("schedtask"), SandboxConfig(**cfg, max_epochs=3))
    assert whole.complete and not part.complete and len(whole.epochs) > 3
    assert len(part.epochs) == 3
    for a, b in zip(part.epochs, whole.epochs):  # the same replay, stopped
        assert a.instructions.tolist() == b.instructions.tolist()
        assert a.elapsed_s == b.elapsed_s and a.migrations.tolist() == b.migrations.tolist()
    assert part.total.instructions.sum() < whole.total.instructions.sum()
    with pytest.raises(ValueError, match="max_epochs"):
        SandboxConfig(**cfg, max_epochs=0)


def test_bad_epochs_is_named(tmp_path):
    r = evaluate(str(DATA / "dss-mem"), "--out", str(tmp_path / "o"), "--epochs", "0")
    assert r.returncode == 2 and "--epochs" in r.stderr and "positive" in r.stderr
