"""``pysched ablate`` (pysched.studies.ablation): factors, configurations, the defaults row
against a plain evaluation, and bad input named before any replay."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from pysched.cli import main
from pysched.sweep.spec import RESULT_VERSION
from pysched.studies.ablation import (FACTORS, AblationError, configurations, parse_factor,
                                      points, read_verdicts)

DATA = Path(__file__).resolve().parents[1] / "data"


def test_factors_parse_with_their_default_first():
    f = parse_factor("switch_cost=zero,traced", "schedtask", "linux")
    assert f.settings == ("traced", "zero")
    p = parse_factor("schedtask:steal=same,any", "schedtask", "linux")
    assert (p.name, p.settings) == ("schedtask:steal", ("same", "any"))
    assert parse_factor("idle_retry", "schedtask", "linux") is FACTORS["idle_retry"]


@pytest.mark.parametrize("spec, msg", [
    ("idle=on", "unknown factor 'idle'; factors: switch_cost"),
    ("switch_cost=free", "switch_cost has settings traced, flat, zero; got free"),
    ("schedtask:steals=same", "policy 'schedtask' has no parameter 'steals'"),
    ("schedtask:steal=same,most", "steal must be one of same, any"),
    ("hrrs:quantum_ms=1,4", "'hrrs' is neither a policy under study nor the baseline"),
    ("schedtask:steal", "a policy factor is NAME:param=v1,v2"),
])
def test_bad_factors_are_named_with_the_choices(spec, msg):
    with pytest.raises(AblationError, match=msg):
        parse_factor(spec, "schedtask", "linux")


def test_configurations_change_one_factor_at_a_time():
    factors = [FACTORS["switch_cost"], FACTORS["idle_retry"],
               parse_factor("schedtask:steal=same,any", "schedtask", "linux")]
    confs = configurations(factors, {"switch_cost": "flat", "kernel_data": "shared"})
    assert [(c.factor, c.setting) for c in confs] == [
        ("defaults", "-"), ("switch_cost", "flat"), ("switch_cost", "zero"),
        ("idle_retry", "off"), ("schedtask:steal", "any"), ("paper", "switch_cost=flat")]
    assert confs[-1].changes == (("switch_cost", "flat"),)


def test_the_defaults_row_is_a_plain_evaluation():
    from pysched.evaluation import evaluate
    from pysched.sweep.run import cached_trace, run_point
    trace = str(DATA / "iscp")
    factors = list(FACTORS.values())
    confs, pts = points([trace], "schedtask", "linux", 2, 1, 1, factors)
    point = pts[("schedtask", trace, 0, "policy")]
    _, runs = run_point(point)
    # the point's canonical spec is schedtask's defaults made explicit (heatmap_bits=512)
    _, plain = evaluate([cached_trace(point.trace)], [point.policy], [2], [1],
                        config={"max_epochs": 1})
    cols = [c for c in plain.columns if c not in ("wall_s", "trace")]
    pd.testing.assert_frame_equal(runs[cols].reset_index(drop=True),
                                  plain[cols].reset_index(drop=True), check_dtype=False)
    # each factor's runs differ from the defaults only in what that factor sets
    flat = pts[("schedtask", trace, [c.setting for c in confs["schedtask"]].index("flat"),
                "policy")]
    assert flat.switch_cost == "flat" and dict(flat.model)["os_migration_cycles"] == 0


def test_policies_share_the_baselines_runs_and_keep_their_own_factors():
    trace = str(DATA / "iscp")
    factors = [FACTORS["switch_cost"], parse_factor("schedtask:steal=same,any",
                                                    ["schedtask", "slicc"], "linux")]
    confs, pts = points([trace], ["schedtask", "slicc"], "linux", 2, 1, 1, factors)
    # slicc has no steal factor: its configurations leave it out
    assert ("schedtask:steal", "any") in [(c.factor, c.setting) for c in confs["schedtask"]]
    assert "schedtask:steal" not in [c.factor for c in confs["slicc"]]
    # the baseline's run at the defaults is one point for both policies
    assert pts[("schedtask", trace, 0, "baseline")] == pts[("slicc", trace, 0, "baseline")]
    assert len(set(pts.values())) < len(pts)


def test_ablate_refuses_bad_input_before_any_replay(tmp_path, capsys):
    out = tmp_path / "abl"
    assert main(["ablate", str(DATA / "iscp"), "--policy", "schedtask", "--factor",
                 "kernel=shared", "--out", str(out)]) == 2
    assert "unknown factor 'kernel'" in capsys.readouterr().err
    assert main(["ablate", str(DATA / "iscp"), "--policy", "schedtask:bits=3",
                 "--out", str(out)]) == 2
    assert "--policy" in capsys.readouterr().err
    assert not out.exists()


def test_ablate_writes_its_tables_and_resumes(tmp_path, capsys):
    out = tmp_path / "abl"
    args = ["ablate", str(DATA / "iscp"), "--policy", "schedtask", "--policy", "slicc",
            "--baseline", "linux", "--cores", "2", "--load", "1", "--epochs", "1",
            "--workers", "1", "--factor", "schedtask:steal=same,any", "--out", str(out)]
    assert main(args) == 0
    # the policies share the baseline's runs: each distinct point runs once
    _, pts = points([str(DATA / "iscp")], ["schedtask", "slicc"], "linux", 2, 1, 1,
                    [*FACTORS.values(), parse_factor("schedtask:steal=same,any",
                                                     ["schedtask", "slicc"], "linux")])
    n = len(set(pts.values()))
    assert n < len(pts) and f"{n} runs: {n} to run" in capsys.readouterr().err
    df = pd.read_csv(out / "ablation.csv")
    assert set(df["factor"]) == {"defaults", "paper", "schedtask:steal", *FACTORS}
    assert set(df.loc[df["study"] == "slicc", "factor"]) == {"defaults", "paper", *FACTORS}
    assert {"gain", "cores", "load", "epochs", "policy_idle_no_work", "baseline_idle_work_waiting",
            "policy_switch_share", "baseline_icache_os"} <= set(df.columns)
    assert set(df["result_version"]) == {RESULT_VERSION}
    text = (out / "ablation.md").read_text()
    assert text.startswith("# Ablation: schedtask, slicc against linux")
    assert "## schedtask against linux" in text and "## slicc against linux" in text
    # its one line per policy, for a study's headline, agrees with ablation.md's verdict
    why = read_verdicts([out])
    assert list(why) == ["schedtask", "slicc"]
    assert "over linux at the defaults (1 trace)" in why["schedtask"]
    part = text.split("## schedtask against linux")[1].split("## slicc against linux")[0]
    factor = part.split("The factor that moves it most: ")[1].split(" (")[0]
    assert f"the rule that moves it most: {factor} (" in why["schedtask"]
    with pytest.raises(AblationError, match=f"{tmp_path / 'none' / 'ablation.csv'}"):
        read_verdicts([tmp_path / "none"])
    capsys.readouterr()
    assert main(args) == 0  # a re-run resumes: nothing left to run
    assert "0 to run" in capsys.readouterr().err


def test_the_example_machine_file_is_seed_001s_machine():
    from pysched.studies.seed001_hrrs import acmp_machine
    from pysched.models.machine import MachineConfig
    root = Path(__file__).resolve().parents[1]
    assert MachineConfig.load(root / "machines" / "seed001-acmp.toml") == acmp_machine()


@pytest.mark.parametrize("name, want", [
    ("l3-1gib.toml", lambda h: {"l3": dataclasses.replace(h.l3, size=1 << 30, ways=16)}),
    ("coherent.toml", lambda h: {"inclusive": True, "coherence": True})])
def test_an_example_machine_file_is_the_default_machine_but_what_it_says(name, want):
    from pysched.evaluation.runner import machine
    from pysched.models.machine import MachineConfig
    root = Path(__file__).resolve().parents[1]
    default = machine(8)
    m = machine(8, MachineConfig.load(root / "machines" / name))
    assert m.hierarchy == dataclasses.replace(default.hierarchy, **want(default.hierarchy))
    assert m.cores == default.cores


def _csv(d: Path, rows: list[tuple]) -> Path:
    d.mkdir()
    pd.DataFrame(rows, columns=["study", "trace", "factor", "setting", "policy", "baseline",
                                "gain"]).to_csv(d / "ablation.csv", index=False)
    return d


def test_the_ablations_table_sets_each_policys_gain_per_rule_side_by_side(tmp_path):
    from pysched.studies.ablation import gains_markdown, read_tables
    d = _csv(tmp_path / "abl", [
        ("schedtask", "a", "defaults", "-", "schedtask", "linux", 0.21),
        ("schedtask", "b", "defaults", "-", "schedtask", "linux", -0.01),
        ("schedtask", "a", "switch_cost", "zero", "schedtask", "linux", 0.44),
        ("schedtask", "b", "switch_cost", "zero", "schedtask", "linux", 0.0),
        ("schedtask", "a", "schedtask:steal", "any", "schedtask:steal=any", "linux", 0.1),
        ("schedtask", "b", "schedtask:steal", "any", "schedtask:steal=any", "linux", 0.1),
        ("schedtask", "a", "paper", "switch_cost=zero", "schedtask", "linux", 0.44),
        ("schedtask", "b", "paper", "switch_cost=zero", "schedtask", "linux", 0.0),
        ("slicc", "a", "defaults", "-", "slicc", "linux", -0.5),
        ("slicc", "b", "defaults", "-", "slicc", "linux", -0.5),
        ("slicc", "a", "switch_cost", "zero", "slicc", "linux", 0.0),
        ("slicc", "b", "switch_cost", "zero", "slicc", "linux", 0.0),
    ])
    text = gains_markdown(read_tables([d]))
    # geometric means of 1 + gain: sqrt(1.21 * 0.99) - 1 = +9.4 %, sqrt(1.44) - 1 = +20 %
    assert "| factor | setting | schedtask over linux | slicc over linux |" in text
    assert "| defaults | - | +9.4 % | -50.0 % |" in text
    assert "| switch_cost | zero | +20.0 % | +0.0 % |" in text
    assert "| schedtask:steal | any | +10.0 % | - |" in text  # no such rule for slicc
    assert "| paper | each policy's stated assumptions | +20.0 % | - |" in text
    assert text.startswith("Ablation: the gain") and "geometric mean over 2 traces" in text
    at = gains_markdown(read_tables([d]).assign(cores=8, load=2, epochs=5))
    assert at.startswith("Ablation at 8 cores at 2X, the first 5 epochs: the gain")
    assert gains_markdown(read_tables([])) == ""
    # a table written before --policy was repeatable has no study column: the policy's name
    old = _csv(tmp_path / "old", [("x", "a", "defaults", "-", "schedtask:steal=any", "linux",
                                   0.1)]).joinpath("ablation.csv")
    pd.read_csv(old).drop(columns=["study"]).to_csv(old, index=False)
    assert set(read_tables([old.parent])["study"]) == {"schedtask"}


def test_an_ablation_of_another_model_or_setting_is_left_out_with_why(tmp_path):
    from pysched.studies.ablation import usable
    rows = [("schedtask", "a", "defaults", "-", "schedtask", "linux", 0.1)]
    now = _csv(tmp_path / "now", rows)
    pd.read_csv(now / "ablation.csv").assign(
        result_version=RESULT_VERSION, cores=8, load=2, epochs=5).to_csv(
        now / "ablation.csv", index=False)
    older = _csv(tmp_path / "older", rows)  # no result_version: written before it was kept
    other = _csv(tmp_path / "other", rows)
    pd.read_csv(other / "ablation.csv").assign(
        result_version=RESULT_VERSION - 1, cores=8, load=2, epochs=5).to_csv(
        other / "ablation.csv", index=False)
    keep, notes = usable([now, older, other])
    assert keep == [now] and len(notes) == 2
    assert notes[0].startswith(f"{older}: made by a pysched that did not record")
    assert f"{other}: made by result version {RESULT_VERSION - 1}" in notes[1]
    # a study at another setting does not quote it; at its own it does
    assert usable([now], 8, (1, 2, 4), 5) == ([now], [])
    keep, notes = usable([now], 32, (2,), 5)
    assert keep == [] and notes == [f"{now}: made at 8 cores, load 2, 5 epochs, not at this "
                                    "study's 32 cores, load 2, 5 epochs"]
    assert usable([now], 8, (2,), None)[1][0].endswith("8 cores, load 2, whole replays")


def test_a_trace_without_events_is_named_and_does_not_decide_the_verdict(tmp_path):
    from pysched.studies.ablation import gains_markdown, read_tables, verdict
    d = _csv(tmp_path / "abl", [
        ("slicc", "a", "defaults", "-", "slicc", "linux", -0.5),
        ("slicc", "b", "defaults", "-", "slicc", "linux", -0.5),
        ("slicc", "a", "switch_cost", "zero", "slicc", "linux", 0.0),
        ("slicc", "b", "switch_cost", "zero", "slicc", "linux", 0.0),
        # no event in the window on a: the geometric mean is -100 % whatever b says
        ("slicc", "a", "kernel_data", "per-copy", "slicc", "linux", -1.0),
        ("slicc", "b", "kernel_data", "per-copy", "slicc", "linux", 0.2),
    ])
    df = read_tables([d])
    why = verdict(df)
    assert "the rule that moves it most: switch_cost = zero (+0.0 %, +50.0 points)" in why
    assert why.endswith("no event in the window under kernel_data = per-copy (a)")
    assert "| kernel_data | per-copy | -100.0 % (no event on a) |" in gains_markdown(df)
