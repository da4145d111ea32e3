"""``pysched sweep``: bad sweep files named by key; a sweep on a two-worker local cluster equals
the runner point by point; a killed worker or an interrupted sweep loses and duplicates nothing;
re-runs skip finished points. Points are short runs of the shipped ``data/dss-mem`` trace."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from pysched.sweep import SweepSpecError, load_spec, read_results
from pysched.sweep.store import ResultStore

DATA = Path(__file__).resolve().parents[1] / "data"
TRACE = DATA / "dss-mem"

pytestmark = pytest.mark.skipif(not (TRACE / "manifest.json").is_file(),
                                reason="needs the shipped trace data/dss-mem")


def spec_file(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    p = tmp_path / name
    p.write_text(text.replace("TRACE", str(TRACE)))
    return p


def sweep_cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pysched.cli", "sweep", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.parametrize("text, message", [
    ('[[grid]]\ntrace = "TRACE"\npolicy = ["linux"]\ncache = 3\n',
     "grid[0]: unknown key(s) 'cache'"),
    ('[[grid]]\ntrace = "TRACE"\npolicy = ["linux", "nope"]\n',
     "grid[0].policy[1]: unknown policy 'nope'"),
    ('[[grid]]\ntrace = "TRACE"\npolicy = "schedtask:stealing=maybe"\n',
     "grid[0].policy: policy 'schedtask' (stealing=maybe): schedtask: stealing must be one of"),
    ('[[grid]]\ntrace = "TRACE"\npolicy = "linux"\ncores = [8, 0]\n', "grid[0].cores[1]"),
    ('[[grid]]\ntrace = "TRACE"\npolicy = "linux"\nl1i_kb = [16, 48]\n',
     "grid[0].l1i_kb[1]: 48 KB"),
    ('[[grid]]\ntrace = "TRACE"\npolicy = "linux"\nlevels = [4]\n', "grid[0].levels[0]"),
    ('[[grid]]\ntrace = "TRACE"\npolicy = "linux"\nload_unit = ["copies", "cores"]\n',
     "grid[0].load_unit[1]: expected one of 'machine', 'copies', got 'cores'"),
    ('[[grid]]\ntrace = "TRACE"\npolicy = "linux"\nswitch_cost = ["flat", "free"]\n',
     "grid[0].switch_cost[1]: expected one of 'traced', 'flat', 'zero', got 'free'"),
    ('[[grid]]\npolicy = "linux"\n', "grid[0]: missing key 'trace'"),
    ('[[grid]]\ntrace = "nowhere"\npolicy = "linux"\n', "grid[0].trace: 'nowhere'"),
    ('[[point]]\ntrace = "TRACE"\npolicy = "linux"\ncores = [2, 4]\n',
     "point[0].cores: a [[point]] takes one value"),
    ('[[point]]\ntrace = "TRACE"\npolicy = "linux"\nheatmap_bits = 128\n',
     "point[0].heatmap_bits: policy 'linux' has no Page-heatmap"),
    ('[[grid]]\ntrace = "TRACE"\npolicy = "schedtask:heatmap_bits=64"\nheatmap_bits = [128]\n',
     "grid[0].policy: gives heatmap_bits and so does"),
    ('[sweep]\nepoch = 3\n[[grid]]\ntrace = "TRACE"\npolicy = "linux"\n',
     "sweep: unknown key(s) 'epoch'"),
    ('[sweep]\nepochs = 0\n[[grid]]\ntrace = "TRACE"\npolicy = "linux"\n',
     "sweep.epochs: expected a whole number of epochs of at least 1, got 0"),
    ('[sweep]\nepochs = 2.5\n[[grid]]\ntrace = "TRACE"\npolicy = "linux"\n',
     "sweep.epochs: expected a whole number of epochs of at least 1, got 2.5"),
    ('[sweep]\nepoch_ms = 0.01\n[[grid]]\ntrace = "TRACE"\npolicy = "linux"\n',
     "sweep.epoch_ms: expected a number of milliseconds from 0.1 to 1000, got 0.01"),
    ('[grids]\ntrace = "TRACE"\n', "unknown table(s) 'grids'"),
    ('[[grid]\n', "cannot parse"),
])
def test_a_malformed_sweep_file_names_the_bad_key(tmp_path, text, message):
    p = spec_file(tmp_path, text)
    with pytest.raises(SweepSpecError) as e:
        load_spec(p)
    assert str(p) in str(e.value) and message in str(e.value)


def test_the_command_refuses_a_bad_file_before_any_work(tmp_path):
    p = spec_file(tmp_path, '[[grid]]\ntrace = "TRACE"\npolicy = "linux"\nload = [1, 99]\n')
    r = sweep_cli(p, "--out", tmp_path / "o")
    _, err = r.communicate(timeout=120)
    assert r.returncode == 2 and "grid[0].load[1]" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_grid_expansion_deduplicates_and_spreads_heatmap_bits_only_where_it_applies(tmp_path):
    p = spec_file(tmp_path, """
[[grid]]
trace = "TRACE"
policy = ["linux", "schedtask"]
heatmap_bits = [128, 512]
l1i_kb = [16, 32]
[[point]]
trace = "TRACE"
policy = "schedtask"
l1i_kb = 16
""")
    pts = load_spec(p).points
    # linux once per i-cache, schedtask per i-cache and heatmap; the [[point]] is a duplicate
    assert sorted((q.policy, q.l1i_kb) for q in pts) == sorted(
        [("linux", 16), ("linux", 32)]
        + [(f"schedtask:heatmap_bits={b}", kb) for b in (128, 512) for kb in (16, 32)])
    assert len({q.key for q in pts}) == len(pts) == 6
    assert {q.heatmap_bits for q in pts if q.policy_name == "linux"} == {None}
    # two levels: the private L2 is one line at the shared cache's latency
    two = load_spec(spec_file(tmp_path, '[[point]]\ntrace = "TRACE"\npolicy = "linux"\n'
                              'levels = 2\n', "two.toml")).points[0].machine.hierarchy
    assert two.l2.size == two.line and two.l2.latency == two.l3.latency


def test_the_load_unit_and_the_result_version_enter_the_point_key(tmp_path, monkeypatch):
    from pysched.sweep import spec
    pts = load_spec(spec_file(tmp_path, '[[grid]]\ntrace = "TRACE"\npolicy = "linux"\n'
                                        'load_unit = ["machine", "copies"]\n')).points
    assert [q.load_unit for q in pts] == ["machine", "copies"]  # load 1 both
    assert len({q.key for q in pts}) == 2
    default = load_spec(spec_file(tmp_path, '[[point]]\ntrace = "TRACE"\npolicy = "linux"\n',
                                  "default.toml")).points[0]
    assert default.load_unit == "machine" and default.key == pts[0].key
    # a point stored by another result version (version 1: load in copies) is never taken
    # for this one: its key differs, and read_results leaves its rows out
    store = ResultStore(tmp_path / "out")
    row = pd.DataFrame({"point": [default.key], "instructions": [1]})
    store.write(default, row.assign(result_version=spec.RESULT_VERSION),
                row.assign(result_version=spec.RESULT_VERSION))
    new = default.key
    monkeypatch.setattr(spec, "RESULT_VERSION", spec.RESULT_VERSION - 1)
    assert default.key != new and not store.finished(default)
    store.write(default, row, row)  # what version 1 wrote: no result_version column
    monkeypatch.undo()
    assert store.finished(default)
    assert read_results(tmp_path / "out", "runs")["point"].tolist() == [default.key]
    assert len(list((tmp_path / "out" / "runs").glob("*.parquet"))) == 2


def test_the_switch_cost_is_a_dimension_of_every_point(tmp_path):
    from pysched.sweep.run import run_point
    from pysched.sweep.summary import summarise, summary_text
    pts = load_spec(spec_file(tmp_path, '[[grid]]\ntrace = "TRACE"\npolicy = "linux"\n'
                                        'load_unit = "copies"\ncores = 2\n'
                                        'switch_cost = ["flat", "traced"]\n')).points
    flat, traced = pts
    assert (flat.switch_cost, traced.switch_cost) == ("flat", "traced")
    same = dataclasses.replace(flat, switch_cost="flat")
    assert same.key == flat.key != traced.key
    assert "switch_cost=flat" in flat.label() and "switch_cost=traced" in traced.label()
    # the model's settings and a window are dimensions too
    assert dataclasses.replace(flat, model=(("idle_retry", False),)).key != flat.key
    assert dataclasses.replace(flat, epochs=2).key != flat.key
    runs = pd.concat([run_point(p)[1] for p in pts], ignore_index=True)
    assert runs["switch_cost"].tolist() == ["flat", "traced"]
    # traced: the path runs through the caches (-1 cycles per switch: measured, not set)
    assert runs["switch_cost_cycles"].tolist() == [1000, -1]
    assert runs["switch_path_insns"].iloc[1] > 0
    table = summarise(runs)
    assert table["switch_cost"].tolist() == ["flat", "traced"]
    # each run is its own model's baseline: both are linux
    assert table["vs_linux"].tolist() == [0.0, 0.0]
    assert "| flat |" in summary_text(table) and "| traced |" in summary_text(table)
    # a policy's note on its run follows the table (none here: linux says nothing)
    assert table["policy_note"].tolist() == ["", ""] and "Policy notes" not in summary_text(table)
    noted = summary_text(table.assign(policy_note=["", "it had nothing to do"]))
    assert noted.endswith("## Policy notes\n\n- **linux** (TRACE at 2 cores, 1 copy): it had "
                          "nothing to do.".replace("TRACE", table["trace"].iloc[1]))
    # points stored before the dimension (no switch_cost column) count as flat
    assert summarise(runs.iloc[:1].drop(columns=["switch_cost"]))["switch_cost"].item() == "flat"


def test_a_window_in_the_sweep_table_stops_every_run_after_its_epochs(tmp_path):
    from pysched.sweep.run import run_point
    text = ('[[grid]]\ntrace = "TRACE"\npolicy = ["linux", "as-traced"]\ncores = 2\n'
            'load_unit = "copies"\n')
    whole = load_spec(spec_file(tmp_path, text)).points
    windowed = load_spec(spec_file(tmp_path, "[sweep]\nepochs = 1\n" + text)).points
    assert [p.epochs for p in whole] == [None, None]
    assert [p.epochs for p in windowed] == [1, 1]
    assert {p.key for p in whole}.isdisjoint(p.key for p in windowed)
    assert all("epochs=1" in p.label() for p in windowed)
    for w, p in zip(whole, windowed):
        full, cut = run_point(w)[0], run_point(p)[0]
        assert len(full) > 1 and len(cut) == 1
        assert cut["instructions"].iloc[0] == full["instructions"].iloc[0]


def serial(points) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The same points one by one through the runner, in this process."""
    from pysched.evaluation.runner import evaluate, prepare
    t = prepare(points[0].trace)
    eps, runs = [], []
    for p in points:
        e, r = evaluate([t], [p.policy], [p.cores], [p.load], base=p.machine,
                        config={"epoch_s": p.epoch_ms / 1e3}, load_unit=p.load_unit)
        eps.append(e.assign(point=p.key))
        runs.append(r.assign(point=p.key))
    return pd.concat(eps, ignore_index=True), pd.concat(runs, ignore_index=True)


def same_numbers(got: pd.DataFrame, want: pd.DataFrame, keys: list[str]) -> None:
    cols = [c for c in want.columns if c != "wall_s"]  # wall time is the only varying column
    g = got[cols].sort_values(keys).reset_index(drop=True)
    w = want[cols].sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(g, w, check_dtype=False)


def test_two_workers_give_the_runners_numbers_and_a_rerun_skips_finished_points(tmp_path):
    from distributed import Client, LocalCluster

    from pysched.sweep.run import prepared_traces, run_sweep
    sweep = load_spec(spec_file(tmp_path, """
[[grid]]
trace = "TRACE"
policy = ["linux", "schedtask:heatmap_bits=128"]
cores = [2]
[[point]]
trace = "TRACE"
policy = "schedtask:stealing=same"
cores = 3
l1i_kb = 16
levels = 2
"""))
    points = list(sweep.points)
    out = tmp_path / "out"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        first = run_sweep(points, out, client=client)
        assert not first.failed and len(first.ran) == len(points) and not first.skipped
        # each worker read the trace at most once, whatever it ran
        for paths in client.run(prepared_traces).values():
            assert len(paths) == len(set(paths)) <= 1
        stamps = {f: f.stat().st_mtime_ns for f in out.rglob("*.parquet")}
        again = run_sweep(points, out, client=client)
        assert not again.ran and len(again.skipped) == len(points)
        assert {f: f.stat().st_mtime_ns for f in out.rglob("*.parquet")} == stamps
    epochs, runs = read_results(out), read_results(out, "runs")
    want_e, want_r = serial(points)
    same_numbers(epochs, want_e, ["point", "epoch"])
    same_numbers(runs, want_r, ["point"])
    # every parameter is a column of every epoch row
    row = epochs.set_index("point").loc[points[-1].key].iloc[0]
    assert (row["policy"], row["cores"], row["l1i_kb"], row["levels"], row["load"],
            row["load_unit"], row["copies"]) == \
        ("schedtask:heatmap_bits=512:stealing=same", 3, 16, 2, 1, "machine", 2)
    bits = epochs.groupby("point")["heatmap_bits"].first()
    assert {k: (None if pd.isna(b) else int(b)) for k, b in bits.items()} == \
        {p.key: p.heatmap_bits for p in points}
    assert sorted(bits.dropna()) == [128, 512]  # the default made explicit for "stealing=same"


def _wait_for(cond, what: str, proc: subprocess.Popen, limit: float = 600):
    """Poll ``cond`` until it holds (an upper bound on waiting, not a timed assertion)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended (rc {proc.returncode}) before {what}: "
                        f"{proc.stderr.read()}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"gave up waiting for {what}")


def check_complete(out: Path, points) -> pd.DataFrame:
    """Every point stored exactly once, whole; no temporary left visible or hidden."""
    store = ResultStore(out)
    assert all(store.finished(p) for p in points)
    assert not [f for f in out.rglob("*") if ".tmp-" in f.name]
    epochs, runs = read_results(out), read_results(out, "runs")
    assert sorted(runs["point"]) == sorted(p.key for p in points)
    assert not epochs.duplicated(["point", "epoch"]).any()
    per_point = epochs.groupby("point")
    assert (per_point.size() == runs.set_index("point")["epochs"]).all()
    # every instruction of the trace ran once in every point (all at load 1)
    assert (per_point["instructions"].sum() == runs.set_index("point")["instructions"]).all()
    assert runs["instructions"].nunique() == 1
    return runs


def test_a_killed_worker_mid_sweep_loses_and_duplicates_nothing(tmp_path):
    from distributed import Client, LocalCluster
    p = spec_file(tmp_path, '[[grid]]\ntrace = "TRACE"\npolicy = ["linux", "schedtask"]\n'
                            'cores = [2, 3, 4]\nload_unit = "copies"\n')
    points = load_spec(p).points
    out = tmp_path / "out"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        proc = sweep_cli(p, "--out", out, "--scheduler", cluster.scheduler_address)
        store = ResultStore(out) if out.exists() else None

        def busy_worker():
            # a worker running a point while another point is already stored
            nonlocal store
            if store is None and (out / "epochs").is_dir():
                store = ResultStore(out)
            if store is None or not any(store.finished(q) for q in points):
                return None
            for addr, keys in client.processing().items():
                if any(str(k).startswith("pysched-point-") for k in keys):
                    return addr
            return None

        victim = _wait_for(busy_worker, "a point stored and another in flight", proc)
        done_before = sum(ResultStore(out).finished(q) for q in points)
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    assert done_before < len(points)
    check_complete(out, points)


def _descendants(pid: int) -> set[int]:
    """Processes whose parent chain reaches ``pid`` (from /proc)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.update(kids)
        todo.extend(kids)
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_an_interrupted_sweep_stops_its_cluster_and_a_rerun_finishes_it(tmp_path):
    p = spec_file(tmp_path, '[[grid]]\ntrace = "TRACE"\npolicy = ["linux", "schedtask"]\n'
                            'cores = [2, 3, 4]\nload_unit = "copies"\n')
    points = load_spec(p).points
    out = tmp_path / "out"
    proc = sweep_cli(p, "--out", out, "--workers", "2")
    _wait_for(lambda: (out / "epochs").is_dir() and any(ResultStore(out).finished(q)
                                                       for q in points),
              "a first point stored", proc)
    children = _descendants(proc.pid)
    assert children  # the local cluster's processes
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM" in err
    end = time.monotonic() + 60  # the workers' own shutdown, bounded
    while any(_alive(c) for c in children) and time.monotonic() < end:
        time.sleep(0.2)
    assert not [c for c in children if _alive(c)]
    stored = [q for q in points if ResultStore(out).finished(q)]
    assert stored and len(stored) < len(points)
    assert not [f for f in out.rglob("*") if ".tmp-" in f.name and not f.name.startswith(".")]
    # the re-run runs only what is missing
    proc = sweep_cli(p, "--out", out, "--workers", "2")
    text, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    assert f"{len(points) - len(stored)} to run, {len(stored)} finished before" in err
    check_complete(out, points)
    assert "| dss-mem | schedtask:heatmap_bits=512 | 4 |" in text
    assert (out / "summary.csv").is_file() and (out / "summary.md").is_file()
