"""The studies (pysched.studies) replay through the one evaluate path: each run of a seed's grid
is one ``evaluate`` replay with its switch cost, load and model settings, on hand-made
workloads; no study calls the engine itself."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sandbox_factory import FIRST, START, prepared
from test_asymmetric import acmp, four_compute_threads
from test_sandbox import machine

import pysched
from pysched.sandbox.switch_cost import TracedSwitch

STUDIES = Path(pysched.__file__).parent / "studies"


def test_no_study_replays_by_itself():
    for path in STUDIES.rglob("*.py"):
        text = path.read_text()
        assert "simulate(" not in text and "Engine(" not in text, path


@pytest.fixture
def replays(monkeypatch):
    """The configs of every replay ``evaluate`` runs (the engine's entry, wrapped)."""
    import pysched.evaluation.runner as runner
    seen = []
    real = runner.simulate

    def counted(workload, footprint, policy, config, *args, **kw):
        seen.append((policy.name, config))
        return real(workload, footprint, policy, config, *args, **kw)

    monkeypatch.setattr(runner, "simulate", counted)
    return seen


def test_seed_001_runs_once_each_at_the_papers_switch_cost(replays):
    from pysched.studies import seed001_hrrs as s1
    t = prepared(four_compute_threads(50_000), vcpus=(0, 1, 2, 3), ntypes=2)
    runs = s1.run_policies(t, {"linux": "linux", "hrrs": "hrrs:quantum_ms=0.01"}, acmp())
    assert [p for p, _ in replays] == ["linux", "hrrs"]
    # one copy of the program, seed 001's 1,000 cycles a switch (hrrs's paper_model)
    assert s1.SWITCH_COST == "flat" and set(runs["switch_cost"]) == {"flat"}
    assert all(c.copies == 1 and c.switch_cycles == 1000 for _, c in replays)
    assert runs.loc["hrrs", "swaps"] > 0 and runs.loc["linux", "swaps"] == 0
    # the program is the four threads (each of them has application code)
    assert s1.program_threads(t.workload).tolist() == [0, 1, 2, 3]
    assert (runs["completion_ms"] > 0).all() and np.isfinite(runs["completion_ms"]).all()
    assert runs.loc["linux", "spec"] == "linux" and 0 < runs.loc["hrrs", "big_core_insn_share"]
    replays.clear()
    s1.run_policies(t, {"linux": "linux"}, acmp(), switch_cost="zero")
    assert replays[0][1].switch_cycles == 0


def test_seed_002_runs_each_configuration_on_its_machine(replays):
    from pysched.studies import seed002_dvfs as s2
    threads = [[(v, 2000, 0, FIRST)] + [(v, 3000, 1, START), (v, 2000, 0, START)] * 4
               for v in (0, 1)]
    t = prepared(threads, vcpus=(0, 1), ntypes=2)
    table = s2.run_configs(t, cores=4, switch_cost="flat")
    assert [p for p, _ in replays] == [spec for spec, _ in s2.CONFIGS.values()]
    # the configuration's levels are the replayed machine's, one copy each
    ghz = {k: [c.operating_point().freq_ghz for c in cfg.machine.cores]
           for k, (_, cfg) in zip(s2.CONFIGS, replays)}
    assert ghz["os-slow"] == [2.6, 2.6, 1.0, 1.0] and ghz["all-slow"] == [1.0] * 4
    assert all(c.copies == 1 for _, c in replays)
    assert set(table["switch_cost"]) == {"flat"} and table.loc["all-fast", "os_ghz"] == "2.6 2.6"
    assert table.loc["all-slow", "slowdown_vs_all_fast"] > 0


def _seed3_traces():
    principal = [[(0, 3000, 0, FIRST)] + [(0, 500, 1, START), (0, 3000, 0, START)] * 20]
    co = [[(v, 4000, 0, FIRST)] + [(v, 500, 1, START), (v, 4000, 0, START)] * 20
          for v in (0, 1)]
    return {"chase-mid": prepared(principal, "chase-mid", ntypes=2),
            "other": prepared(co, "other", vcpus=(0, 1), ntypes=2)}


def test_seed_003_runs_each_schedule_under_both_schedulers(replays):
    from pysched.studies import seed003_cache_fair as s3
    traces = _seed3_traces()
    runs = s3.run_schedules(traces, 1e-3, {"busy": ("other",)}, machine(2),
                            switch_cost="flat")
    assert [p for p, _ in replays] == ["linux", "cache-fair"]
    assert list(runs.index) == [("busy", "default"), ("busy", "cache-fair")]
    assert set(runs["switch_cost"]) == {"flat"}
    # the probe saw the best-effort thread run before the principal ended
    assert (runs["principal_ms"] > 0).all() and (runs["best_effort_cpu_ms"] > 0).all()
    # the separate experiment: cache-fair samples, never leaving its sampling phase
    grid, co = s3.estimate_grid(traces, [("other",)], machine(2), switch_cost="flat")
    assert [r.trace for r in grid] == ["chase-mid+other"] and "samples=1073741824" in \
        grid[0].policy


def test_a_co_schedule_replays_its_parts_traced_switch_paths():
    from pysched.evaluation import evaluate
    from pysched.studies import seed003_cache_fair as s3
    traces = _seed3_traces()
    traces["chase-mid"].meta["switch"] = TracedSwitch(2, 100, np.array([[0, 0, 100]]))
    traces["other"].meta["switch"] = TracedSwitch(4, 600, np.array([[1, 0, 200], [0, 0, 100],
                                                                     [5, 0, 10]]))
    t = s3.co_schedule(traces, ("chase-mid", "other"))
    # the principal's vCPU 0 stays 0; other's vCPUs 0 and 1 become 1 and 2 (5 is not there)
    assert t.workload.vcpus == [0, 1, 2]
    assert t.meta["switch"].runs.tolist() == [[0, 0, 100], [2, 0, 200], [1, 0, 100]]
    assert (t.meta["switch"].switches, t.meta["switch"].per_switch) == (6, 700 / 6)
    assert (t.meta["principal"], t.meta["best_effort"], t.meta["others"]) == (0, 1, [1])
    _, runs = evaluate([t], ["linux"], [2], [1], base=machine(2), load_unit="copies")
    assert runs["switch_cost"].item() == "traced" and runs["switch_insns"].item() > 0


def test_seed_001_measures_the_barrier_interval_it_replays():
    """Four threads meet at a barrier every 200,000 instructions (each sweep's last thread
    wakes the other three): the measure finds one release per sweep, as far apart as a
    sweep takes on the slowest core."""
    from sandbox_factory import tiny

    from pysched.evaluation.runner import PreparedTrace
    from pysched.studies import seed001_hrrs as s1
    sweeps, n = 4, 200_000  # a sweep of 77 us on a small core: releases stay apart
    threads = [[(v, n, 0, FIRST)] + [(v, n, 0, START)] * (sweeps - 1) for v in range(4)]
    # item k of thread v after the first waits for thread 3's previous sweep to end
    deps = [(v * sweeps + k, 3 * sweeps + k - 1, n) for v in range(3) for k in range(1, sweeps)]
    w, fp = tiny(threads, deps=deps, vcpus=(0, 1, 2, 3), ntypes=1)
    t = PreparedTrace("b", "b", w, fp, None, np.array([0]), w.total_insns, {"workload": "b"})
    assert s1.barrier_woken(w) == {d[0] for d in deps}
    runs = s1.run_policies(t, {"linux": "linux"}, acmp(), switch_cost="zero")
    assert runs.loc["linux", "barrier_releases"] == sweeps - 1
    small = acmp().cores[1]
    sweep_s = n * small.base_cpi / (small.operating_point().freq_ghz * 1e9)
    assert runs.loc["linux", "barrier_interval_ms"] >= 1e3 * sweep_s * 0.99
    assert s1.release_times([0.0, 1e-5, 1e-3, 1.00001e-3, 3e-3]).tolist() == [0.0, 1e-3, 3e-3]
