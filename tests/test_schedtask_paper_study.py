"""The study beside the SchedTask paper (pysched.studies.schedtask_paper): the paper's figures
beside ours, the study's grid as sweep points, its summary from the stored points, and a small
study run on Dask that a re-run resumes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pysched.cli import main
from pysched.studies.schedtask_paper.comparison import (arrival_bound, comparison_markdown,
                                                        geomean_change)
from pysched.studies.schedtask_paper.study import Grid, points, summarise

DATA = Path(__file__).resolve().parents[1] / "data"


def paper_runs(changes: dict[str, dict[str, float]], loads=(1, 2), cores: int = 8) -> pd.DataFrame:
    """Synthetic run rows: per policy, its throughput ratio to linux per workload."""
    rows = []
    for load in loads:
        for wl in ("apache", "find"):
            for pol, ch in {"linux": {"apache": 0.0, "find": 0.0}, **changes}.items():
                ratio = 1 + ch[wl]
                rows.append({"trace": wl, "workload": wl, "policy": pol, "cores": cores,
                             "load": load, "load_unit": "machine", "copies": 4 * load,
                             "has_events": True, "events": 100,
                             "events_per_s": 1000.0 * ratio, "throughput": 2e9 * ratio,
                             "instructions": 10**9, "migrations": 50 if pol == "linux" else 500,
                             "cycles": 4e7, "migration_cycles": 4e5 if pol == "linux" else 4e6,
                             "switches": 2000 if pol == "linux" else 4000,
                             "switch_cycles": 2e6 if pol == "linux" else 4e6,
                             "idle_fraction": 0.1, "icache_app": 0.9, "icache_os": 0.8,
                             "dcache_app": 0.95, "dcache_os": 0.9, "fairness": 0.9,
                             "irq_latency_mean_s": 1e-6, "elapsed_s": 0.01, "wall_s": 1.0,
                             "busy_s": 0.04 / ratio})
    return pd.DataFrame(rows)


def test_geomean_change_is_the_geometric_mean_of_ratios():
    assert geomean_change([0.1, -0.1]) == pytest.approx((1.1 * 0.9) ** 0.5 - 1)
    assert geomean_change([0.21, 0.21]) == pytest.approx(0.21)
    assert np.isnan(geomean_change([])) and np.isnan(geomean_change([0.5, -1.0]))


def test_the_summary_sets_ours_beside_the_papers_figures():
    from pysched.evaluation.report import summary_markdown
    runs = paper_runs({"schedtask": {"apache": 0.21, "find": 0.21},
                  "slicc": {"apache": 0.1, "find": -0.1},
                  "schedtask:stealing=none": {"apache": 0.0, "find": 0.0},
                  "schedtask:heatmap_bits=128": {"apache": 0.05, "find": 0.05}})
    md = comparison_markdown(runs)
    # the study's section of the evaluation's summary, which has none of its own
    assert md in summary_markdown(runs, sections=[comparison_markdown])
    assert "Beside the paper" not in summary_markdown(runs)
    fig7 = md.split("### Fig 7")[1].split("###")[0]
    # ours (geomean of the two workloads) beside the paper's Fig 7 geomeans
    assert "| schedtask | +21.0 | +22.8 |" in fig7
    assert f"| slicc | {100 * ((1.1 * 0.9) ** 0.5 - 1):+.1f} | +11.4 |" in fig7
    # and per busy core-second (same instructions in 1/ratio of the busy time)
    assert fig7.count("| schedtask | +21.0 | +21.0 | +21.0 |") == 2 and "busy core-second" in fig7
    # Table 4 at 2X: ours, then the paper's row for the same workloads (Apache 39, Find 8)
    t4 = md.split("### Table 4, 2X, 8 cores")[1].split("###")[0]
    assert "| schedtask | +21.0 | +21.0 | +21.0 |" in t4
    assert "| paper: SchedTask | +8.0 | +39.0 | +23.0 |" in t4
    assert "| paper: SLICC | 5.0 | 5.0 | 5.0 |" in t4  # idle: Find 5, Apache 5, mean 5
    assert "Appendix" not in t4 and "appendix's Table 4 at 8 cores" in t4
    assert "### Fig 9" in md and "`schedtask:stealing=none` | +0.0" in md
    assert "### Fig 11" in md and "+15.87 %" in md
    # migrations per million instructions (Fig 10), the unit of the rest: 500 per 10**9
    assert "| schedtask | 0.5 | 0.5 | 0.5 |" in md.split("### Fig 10")[1]
    assert "Why ours may differ" in md
    # the traces' own scale, when the runs say it (runs.csv before the columns: without it)
    assert "ours are traces of a few vCPUs and threads" in md
    sized = comparison_markdown(runs.assign(vcpus=np.where(runs["trace"] == "find", 4, 2),
                                            threads=np.where(runs["trace"] == "find", 30, 7)))
    assert "ours are traces of 2 and 4 vCPUs (7 to 30 threads each, here)" in sized
    # fairness among the copies of each traced thread, when the runs have it
    assert "among the copies of each traced thread 0" not in md
    both = comparison_markdown(runs.assign(copy_fairness=np.where(
        runs["policy"] == "schedtask", 0.97, 0.85)))
    assert "among the copies of each traced thread 0.970 (linux 0.850" in both
    # Fig 8 names the traces without data accesses, whose d-cache figures are missing
    assert "No d-cache figure" not in md
    fig8 = comparison_markdown(runs.assign(dcache_os=np.where(runs["trace"] == "find", np.nan,
                                                              0.9))).split("### Fig 8")[1]
    assert "No d-cache figure for find: their traces hold no data accesses" in fig8
    # without the baseline there is nothing to set beside the paper
    assert comparison_markdown(runs[runs["policy"] != "linux"]) == ""


def test_the_summary_opens_with_the_verdict_beside_the_paper():
    from pysched.evaluation.report import summary_markdown
    from pysched.studies.schedtask_paper.comparison import headline_markdown
    runs = paper_runs({"schedtask": {"apache": 0.21, "find": 0.21},
                       "schedtask:steal=any": {"apache": 0.1, "find": 0.1},
                       "schedtask:stealing=none": {"apache": 0.0, "find": 0.0}})
    md = summary_markdown(runs.assign(dcache_app=np.nan, dcache_os=np.nan),
                          sections=[comparison_markdown], headline=headline_markdown)
    head = md.split("## Headline")[1].split("## 8 cores")[0]
    assert "- **Configuration:** 2 traces (apache, find); 8 simulated cores" in head
    assert "- **Measured over:** whole replays." in head
    assert "- SchedTask: +21.0 % (paper +22.79 %)" in head
    assert "- SchedTask (`steal=any`): +10.0 % (paper +22.79 %)" in head
    assert "stealing=none" not in head  # a variant of Fig 9, not a reading of 5.2
    # the headline comes first, the host's timings last and apart
    assert md.index("## Headline") < md.index("## 8 cores") < md.index("## Host timings")
    assert "wall s" not in md.split("## Host timings")[0]
    # no empty table: the missing d-cache figures are said once
    assert md.count("No d-cache figure") == 1 and "d$ app" not in md
    assert "OS d-cache hit rate % per workload" not in md
    # a window is said in the headline, once
    window = summary_markdown(runs.assign(complete=False, epochs=5), headline=headline_markdown)
    assert window.count("the first 5 epochs of each replay") == 1
    # the ablation's reason beside the policy it ablated; without one, how to get it, once
    assert head.count("Which rule of the model decides each result is not measured in this "
                      "run") == 1
    why = headline_markdown(runs, reasons={"schedtask": "+2.0 % over linux (x)"})
    assert "- SchedTask: +21.0 % (paper +22.79 %). Why: +2.0 % over linux (x)" in why
    assert "(`steal=any`): +10.0 % (paper +22.79 %)\n" in why and "not measured" not in why
    # an ablation given and not quoted (another model or setting) is said, with why
    stale = headline_markdown(runs, left_out=["abl: made at 32 cores"])
    assert "Ablations given and not quoted, as they explain another result: abl: made at 32 " \
           "cores." in stale and "Why:" not in stale


def test_the_grid_is_every_policy_at_every_load_and_the_variants_at_2x():
    grid = Grid(("data/apache", "data/find"), cores=8, loads=(1, 2),
                policies=("linux", "schedtask", "schedtask:heatmap_bits=512"),
                variants=("schedtask:stealing=none", "linux"))
    pts = points(grid)
    asked = [(Path(p.trace).name, p.load, spec) for p, spec in pts.items()]
    # 2X first over every workload, then the variants, then the other loads; a point asked
    # twice (schedtask is schedtask:heatmap_bits=512; linux among the variants) runs once
    assert asked == [("apache", 2, "linux"), ("apache", 2, "schedtask"),
                     ("find", 2, "linux"), ("find", 2, "schedtask"),
                     ("apache", 2, "schedtask:stealing=none"),
                     ("find", 2, "schedtask:stealing=none"),
                     ("apache", 1, "linux"), ("apache", 1, "schedtask"),
                     ("find", 1, "linux"), ("find", 1, "schedtask")]
    p = next(iter(pts))
    # pysched evaluate's defaults: loads relative to the machine, the traced switch cost
    assert (p.cores, p.load_unit, p.switch_cost, p.model, p.epochs) == \
        (8, "machine", "traced", (), None)
    assert {q.policy for q in pts} >= {"schedtask:heatmap_bits=512:stealing=none"}
    # without 2X among the loads there is no variant
    assert all(q.load == 1 for q in points(Grid(("data/find",), loads=(1,))))


def test_the_summary_is_written_from_the_stored_points(tmp_path):
    from pysched.sweep.store import ResultStore
    grid = Grid(("apache", "find"), cores=8, loads=(1, 2), policies=("linux", "schedtask"),
                variants=("schedtask:stealing=none",))
    rows = paper_runs({"schedtask": {"apache": 0.2, "find": 0.1},
                       "schedtask:stealing=none": {"apache": 0.0, "find": 0.0}})
    store = ResultStore(tmp_path / "points")
    pts = points(grid)
    for p, spec in list(pts.items())[:-1]:  # the last point is not finished yet
        r = rows[(rows["trace"] == Path(p.trace).name) & (rows["load"] == p.load)
                 & (rows["policy"] == spec)]
        # as run_point stores them: the point's columns (its canonical policy) first
        r = pd.concat([pd.DataFrame([p.columns()]),
                       r.drop(columns=["policy", "cores", "load", "load_unit"])
                       .reset_index(drop=True)], axis=1)
        store.write(p, r.assign(epoch=0), r)
    text = summarise(grid, tmp_path)
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == len(pts) - 1
    # the runs are named as asked, so the paper's tables find them
    assert set(runs["policy"]) == {"linux", "schedtask", "schedtask:stealing=none"}
    assert "| schedtask | +10.0 | +20.0 |" in text  # Fig 7, the paper's order: Find, Apache
    assert "### Fig 9" in text and (tmp_path / "paper-8cores.png").stat().st_size > 0
    assert {"epochs.parquet", "summary.md", "epochs.png"} <= {f.name for f in tmp_path.iterdir()}
    assert "What decides each result" not in text
    # an ablation's table goes after the paper comparison
    abl = pd.DataFrame({"study": "schedtask", "trace": ["apache", "find"],
                        "factor": "defaults", "setting": "-", "policy": "schedtask",
                        "baseline": "linux", "gain": [0.1, 0.1], "dir": "abl"})
    text = summarise(grid, tmp_path, ablation=abl)
    part = text.split("## What decides each result (ablation)")[1]
    assert text.index("## Beside the paper") < text.index("## What decides each result")
    assert "| defaults | - | +10.0 % |" in part
    with pytest.raises(ValueError, match="no finished point"):
        summarise(grid, tmp_path / "none")


def test_the_study_refuses_bad_input_before_any_run(tmp_path, capsys):
    out = tmp_path / "paper"
    base = ["study", "schedtask-paper", "--data", str(DATA), "--out", str(out)]
    assert main([*base, "--workloads", "nope"]) == 2
    assert "nope: not a trace directory" in capsys.readouterr().err
    assert main([*base, "--variants", "schedtask:bits=3"]) == 2
    assert "--policies" in capsys.readouterr().err
    assert main([*base, "--load", "0"]) == 2
    assert "--load: 0 is not a load factor" in capsys.readouterr().err
    assert not out.exists()
    # the whole grid of two workloads, nothing run or written
    assert main([*base, "--workloads", "iscp,oscp", "--dry-run"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 2 * (7 + 6 + 7 * 3) and all(" to run " in x for x in listed)
    assert not out.exists()


def test_a_small_study_runs_on_dask_and_resumes(tmp_path, capsys):
    out = tmp_path / "paper"
    args = ["study", "schedtask-paper", "--data", str(DATA), "--workloads", "iscp",
            "--cores", "2", "--load", "2", "--policies", "linux,schedtask",
            "--variants", "schedtask:stealing=none", "--epochs", "1", "--workers", "1",
            "--out", str(out)]
    assert main(args) == 0
    assert "3 runs: 3 to run, 0 finished before" in capsys.readouterr().err
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(runs["policy"]) == ["linux", "schedtask", "schedtask:stealing=none"]
    # each through evaluate: pysched evaluate's switch cost and model columns, a 1-epoch window
    assert set(runs["switch_cost"]) == {"traced"} and runs["idle_retry"].all()
    assert (runs["epochs"] == 1).all() and (runs["copies"] == 2).all()
    text = (out / "summary.md").read_text()
    assert "## Beside the paper" in text and "### Fig 9" in text
    assert len(list((out / "points" / "runs").glob("*.parquet"))) == 3
    assert main(args) == 0  # a re-run resumes: nothing left to run, the summary again
    assert "3 runs: 0 to run, 3 finished before" in capsys.readouterr().err


def test_arrival_bound_traces_are_named():
    from pysched.trace.clock import last_interrupt_s
    runs = paper_runs({"schedtask": {"apache": 0.0, "find": -0.1}})
    runs["last_irq_s"] = np.where(runs["trace"] == "find", 0.00999, 0.005)
    assert arrival_bound(runs) == ["find"]  # linux's 10 ms run ends with find's last arrival
    assert "**Arrival-bound traces (measured here).** find:" in comparison_markdown(runs)
    assert arrival_bound(runs.drop(columns="last_irq_s")) == []
    # copies that start late end their traced arrivals late: the run's last arrival counts
    late = runs.assign(last_arrival_s=np.where(runs["trace"] == "apache", 0.00995, 0.005))
    assert arrival_bound(late) == ["apache"]
    from pysched.evaluation.report import summary_markdown
    md = summary_markdown(late)
    assert "## Arrival-bound runs" in md
    assert ("apache at 8 cores, load 1X (10.00 ms, last arrival 9.95 ms); apache at 8 cores, "
            "load 2X (10.00 ms, last arrival 9.95 ms)") in md
    assert "## Arrival-bound runs" not in summary_markdown(runs.assign(last_irq_s=0.005))
    # the last interrupt of a shipped trace lies within its region (its bound of instructions
    # a vCPU at 2 G instructions per second), late in it
    bound = json.loads((DATA / "oscp" / "manifest.json").read_text())["roi_bound"]
    region_s = bound["insns_per_vcpu"] / 2e9
    assert 0.75 * region_s < last_interrupt_s(DATA / "oscp") <= region_s
