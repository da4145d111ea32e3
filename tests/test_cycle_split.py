"""The measured split of busy cycles per instruction (:mod:`pysched.studies.schedtask_paper.
cycle_split`), on hand-made runs whose differences are known."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pysched.studies.schedtask_paper.comparison import cycles_lines
from pysched.studies.schedtask_paper.cycle_split import CAUSES, per_instruction, split_lines


def _run(policy: str, workload: str, **cycles: float) -> dict:
    parts = {c: cycles.get(c, 0.0) for c in CAUSES}
    return {"trace": workload, "workload": workload, "policy": policy, "cores": 8, "load": 2,
            "load_unit": "machine", "copies": 8, "instructions": 1000, **parts,
            "cycles": sum(parts.values())}


def runs() -> pd.DataFrame:
    return pd.DataFrame([
        _run("linux", "a", base_cycles=1000, ifetch_stall_cycles=300, data_stall_cycles=200,
             switch_cycles=50),
        _run("linux", "b", base_cycles=1000, ifetch_stall_cycles=100, data_stall_cycles=400,
             switch_cycles=50),
        # fewer fetch stalls, more data stalls and switches, routines of its own
        _run("schedtask", "a", base_cycles=1000, ifetch_stall_cycles=100,
             data_stall_cycles=500, switch_cycles=150, policy_cycles=50),
        _run("schedtask", "b", base_cycles=1000, ifetch_stall_cycles=100,
             data_stall_cycles=400, switch_cycles=50),
    ])


def test_per_instruction_sums_to_the_runs_cycles():
    r = runs()
    cpi = per_instruction(r)
    assert cpi["total"].tolist() == pytest.approx((r["cycles"] / 1000).tolist())
    assert cpi[list(CAUSES.values())].sum(axis=1).tolist() == pytest.approx(
        cpi["total"].tolist())


def test_the_table_gives_each_causes_difference_from_the_baseline():
    lines = split_lines(runs(), 8, ["schedtask"])
    text = "\n".join(lines)
    # linux: base 1, fetch (0.3 + 0.1) / 2, data (0.2 + 0.4) / 2, switches 0.05, total 1.55
    assert "| linux | 1.000 | 0.200 | 0.300 | 0.050 | 0.000 | 0.000 | 1.550 |  |" in text
    # schedtask - linux, means over a and b: fetch (-0.2 + 0) / 2, data (+0.3 + 0) / 2,
    # switches (+0.1 + 0) / 2, routines +0.025; a: 1.55 / 1.8, b: 1.55 / 1.55
    gm = ((1.55 / 1.8) * 1.0) ** 0.5 - 1
    assert (f"| schedtask | +0.000 | -0.100 | +0.150 | +0.050 | +0.000 | +0.025 | +0.125 | "
            f"{100 * gm:+.1f} % |") in text


def test_runs_without_the_split_get_no_table():
    r = runs().drop(columns=["ifetch_stall_cycles"])
    assert split_lines(r, 8, ["schedtask"]) == [] and cycles_lines(r, 8) == []
    assert cycles_lines(runs(), 32) == []  # no run at that core count


def test_the_study_summary_has_the_table_for_every_policy_that_ran():
    r = pd.concat([runs(), runs().query("policy == 'schedtask'").assign(
        policy="schedtask:steal=any")], ignore_index=True)
    text = "\n".join(cycles_lines(r, 8))
    assert "| schedtask |" in text and "| schedtask:steal=any |" in text
    assert text.index("| schedtask |") < text.index("| schedtask:steal=any |")


def test_the_headline_says_what_was_measured_behind_each_policy():
    from test_schedtask_paper_study import paper_runs

    from pysched.studies.schedtask_paper.comparison import headline_markdown
    r = paper_runs({"schedtask": {"apache": 0.1, "find": 0.1}}, loads=(2,))
    st = r["policy"] == "schedtask"
    # per 10**9 instructions: linux fetch 0.2, data 0.1; schedtask fetch 0.1, data 0.3
    r = r.assign(base_cycles=5e8, ifetch_stall_cycles=np.where(st, 1e8, 2e8),
                 data_stall_cycles=np.where(st, 3e8, 1e8), policy_cycles=0.0,
                 idle_work_waiting=np.where(st, 0.2, 0.01))
    r["cycles"] = r[list(CAUSES)].sum(axis=1)
    head = headline_markdown(r)
    # switches 4e6 vs 2e6 and moves 4e6 vs 4e5 per 1e9 instructions: +0.002, +0.0036
    assert ("- SchedTask: +10.0 % (paper +22.79 %); measured: idle with work queued 20.0 % of "
            "core time (linux 1.0 %); cycles per instruction +0.106 (data stall +0.200, fetch "
            "stall -0.100, OS moves +0.004, switches +0.002)") in head
    assert "Measured in these runs, means over the workloads" in head
    # runs without the measures: the verdict alone
    plain = headline_markdown(paper_runs({"schedtask": {"apache": 0.1, "find": 0.1}}))
    assert "- SchedTask: +10.0 % (paper +22.79 %)\n" in plain and "; measured:" not in plain
    assert "Measured in these runs" not in plain


def test_the_data_stall_is_split_by_the_level_that_served_it():
    from test_schedtask_paper_study import paper_runs

    from pysched.studies.schedtask_paper.comparison import headline_markdown
    from pysched.studies.schedtask_paper.cycle_split import level_lines
    r = paper_runs({"schedtask": {"apache": 0.1, "find": 0.1}}, loads=(2,))
    st = r["policy"] == "schedtask"
    # per 10**9 instructions: linux L2 0.05, L3 0.03, memory 0.02 (data 0.1); schedtask L2
    # 0.05, L3 0.2, memory 0.05 (data 0.3)
    r = r.assign(base_cycles=5e8, ifetch_stall_cycles=np.where(st, 1e8, 2e8),
                 data_stall_l2_cycles=5e7, data_stall_l3_cycles=np.where(st, 2e8, 3e7),
                 data_stall_memory_cycles=np.where(st, 5e7, 2e7), policy_cycles=0.0)
    r["data_stall_cycles"] = r[["data_stall_l2_cycles", "data_stall_l3_cycles",
                                "data_stall_memory_cycles"]].sum(axis=1)
    r["cycles"] = r[list(CAUSES)].sum(axis=1)
    text = "\n".join(level_lines(r, ["schedtask"]))
    assert "| linux | 0.050 | 0.030 | 0.020 | 0.100 |" in text
    assert "| schedtask | +0.000 | +0.170 | +0.030 | +0.200 |" in text
    # the headline gives the data stall's change and its split, largest first (the L2's
    # zero change left out)
    assert "data stall +0.200 [L3 +0.170, memory +0.030]" in headline_markdown(r)
    # and the share of the L3's misses whose line another core held, beside the baseline's
    held = headline_markdown(r.assign(l3_miss_held_share=np.where(st, 0.25, 0.05)))
    assert "L3 misses of lines another core held 25.0 % (linux 5.0 %)" in held
    assert "L3 misses of lines another core held" not in headline_markdown(r)
    # runs stored before the split: no table, and the headline without brackets
    old = r.drop(columns=["data_stall_l3_cycles"])
    assert level_lines(old, ["schedtask"]) == []
    head = headline_markdown(old)
    assert "data stall +0.200" in head and "[L3" not in head
