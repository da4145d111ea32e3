"""Benchmark the scheduler sandbox: simulated instructions per second of the compiled engine,
its speed-up over the plain engine (its twin) measured in the same run, preparation time and
peak memory.

The grid (issue 33): every shipped workload (``data/*``) x every registered policy x 8 and
32 simulated cores at the paper's 2X load, a 3-epoch window, the traced switch cost (the
defaults of ``pysched evaluate``). On the cores in ``--plain-cores`` (8 by default) the plain
engine replays the same point, and the two runs' statistics are compared to the last bit
(``identical``). Each (trace, cores) runs in a fresh Python process, so its peak RSS is its
own (the trace's preparation included). Targets: at least 100 M simulated instructions/s on
every 8-core row of a trace without data accesses (30 M/s with them), 50 M/s at 32 cores,
at most 4 GB.

Preparation: ``prepare_first_s`` is the trace's first preparation in the benchmark's own cache
of prepared traces (cold: built and stored) in the first process of the trace, a read of the
stored entry in the next; ``prepare_warm_s`` a read (warm).

Rates are simulated instructions per second of wall time (``insn_per_s``) and of the
process's CPU time (``insn_per_cpu_s``): the host is shared, and CPU time is what the replay
cost whatever else ran; the load average is recorded. They count the workload's instructions
(``sim_insns``); ``switch_insns`` are the traced switch path's, which the kernel also runs
through the caches at each context switch and which a policy that switches often replays many
of.

Scaling (``--scaling``): one trace under ``linux`` at 8, 32 and 64 cores at 2X and at 32 cores
at 8X: cost per simulated instruction and peak RSS, and the cache model's work per instruction
(accesses, misses of each level per thousand) beside the CPU time per access, so that a cost
that grows is told apart from more work. On the default machine, ``scaling_split`` has the
same points through ``benchmarks/sandbox_split.py``: the chunk kernel's and the engine's
shares of the time, and the kernel's calls replayed as run and grouped by core (what the
host's caches add as the cores grow). Every row records the model's work
(``cache_accesses``, ``l1_misses``, ``l2_misses``, ``l3_misses``: accesses served below
that level).

Another machine (``--machine FILE``, as ``pysched evaluate``'s): its hierarchy at every core
count, e.g. an inclusive or coherent one, whose replay takes the access-at-a-time cache
kernel.

Sweep throughput (``--sweep-only``): points per minute of a small sweep (``SWEEP_GRID`` on
``data/dss-mem``) serially, on a local Dask cluster of one worker and of two; merged into an
existing ``--out`` file.

Usage: ``python benchmarks/sandbox.py --out benchmarks/results/sandbox.json [--traces a,b]
[--policies p,q] [--cores 8,32] [--plain-cores 8] [--epochs 3] [--scaling] [--machine FILE]
[--sweep-only]``
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"insn_per_s_8_cores": 100e6, "insn_per_s_8_cores_data": 30e6,
           "insn_per_s_32_cores": 50e6, "peak_rss_gb": 4.0}

CHILD = r"""
import json, resource, sys, time
from pysched.evaluation.runner import copies_for, machine, prepare
from pysched.policies import get_policy
from pysched.sandbox import SandboxConfig, simulate
from pysched.sandbox.replay import ENGINES
from pysched.sandbox.item_streams import item_streams
from pysched.sandbox.switch_cost import sandbox_costs
path, policies, cores, load, epochs, plain, base = sys.argv[1:8]
policies, cores, load, epochs = policies.split(","), int(cores), int(load), int(epochs)
from pysched.models.machine import MachineConfig
base = MachineConfig.load(base) if base else None
# the first prepare of the trace in this benchmark's cache is cold (built and stored), the
# next warm (read back)
t0 = time.perf_counter()
prepare(path)
t1 = time.perf_counter()
t = prepare(path)
t2 = time.perf_counter()
prep = {"prepare_first_s": t1 - t0, "prepare_warm_s": t2 - t1}
t1 = time.perf_counter()
streams = item_streams(t.workload, t.footprint)
t2 = time.perf_counter()
switch = t.meta.get("switch")
for p in policies:
    pol = get_policy(p)
    n = copies_for(load, cores, len(t.workload.vcpus))
    cfg = SandboxConfig(machine(cores * pol.core_factor, base), copies=n, max_epochs=epochs,
                        **sandbox_costs("traced" if switch is not None else "flat", None,
                                        switch))
    row = {"policy": p, "cores": cores, "load": load, "copies": n, "epochs": epochs,
           "data": bool(t.footprint.data), **prep, "streams_s": t2 - t1}
    runs = {}
    for e in (ENGINES if plain == "1" else ("compiled",)):
        w0, c0 = time.perf_counter(), time.process_time()
        runs[e] = simulate(t.workload, t.footprint, get_policy(p), cfg, t.events,
                           switch_path=switch, engine=e, streams=streams)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        insns = int(runs[e].total.instructions.sum())
        key = "" if e == "compiled" else "plain_"
        row.update({key + "simulate_s": wall, key + "cpu_s": cpu, "sim_insns": insns,
                    key + "insn_per_s": insns / wall, key + "insn_per_cpu_s": insns / cpu})
    row["switch_insns"] = int(runs["compiled"].total.switch_insns.sum())
    # the cache model's work: accesses, and those that missed each level (served below it)
    lv = runs["compiled"].total.cache.served.sum(axis=(0, 1, 2))
    row["cache_accesses"] = int(lv.sum())
    row.update({f"l{k + 1}_misses": int(lv[k + 1:].sum()) for k in range(3)})
    if "plain" in runs:
        a, b = runs["compiled"], runs["plain"]
        row["speedup_wall"] = row["plain_simulate_s"] / row["simulate_s"]
        row["speedup_cpu"] = row["plain_cpu_s"] / row["cpu_s"]
        row["identical"] = bool(len(a.epochs) == len(b.epochs) and all(
            x == y for x, y in zip(a.epochs, b.epochs)))
    row["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps(row), flush=True)
"""


def traces(names: list[str] | None) -> list[Path]:
    """The shipped traces (``data/*`` with an exec table), or those named."""
    found = [d for d in sorted((REPO / "data").iterdir()) if (d / "exec").is_dir()]
    if names:
        by = {d.name: d for d in found}
        missing = [n for n in names if n not in by]
        if missing:
            raise SystemExit(f"--traces: no trace {', '.join(missing)} in data/ "
                             f"(have {', '.join(by)})")
        found = [by[n] for n in names]
    return found


def run_child(trace: Path, policies: list[str], cores: int, load: int, epochs: int,
              plain: bool, cache: Path, base: Path | None = None) -> list[dict]:
    """One process: ``trace`` prepared (from ``cache``, the benchmark's own cache of prepared
    traces: its first preparation of a trace is cold), then every policy at ``cores``, on
    the machine file ``base`` (its hierarchy and first core type; default Table 2's)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYSCHED_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace), ",".join(policies),
                          str(cores), str(load), str(epochs), "1" if plain else "0",
                          str(base) if base else ""],
                         capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"benchmark of {trace.name} at {cores} cores failed:\n{out.stderr}")
    rows = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    for r in rows:
        r["trace"] = trace.name
        print(json.dumps(r), flush=True)
    return rows


def meets(rows: list[dict]) -> dict:
    """Each target and whether every row it applies to meets it."""
    def ok(sel, key, target):
        got = [r[key] for r in rows if sel(r)]
        return {"target": target, "rows": len(got), "min": min(got) if got else None,
                "met": bool(got) and min(got) >= target}
    return {
        "8_cores_no_data": ok(lambda r: r["cores"] == 8 and not r["data"], "insn_per_s",
                              TARGETS["insn_per_s_8_cores"]),
        "8_cores_data": ok(lambda r: r["cores"] == 8 and r["data"], "insn_per_s",
                           TARGETS["insn_per_s_8_cores_data"]),
        "32_cores": ok(lambda r: r["cores"] == 32, "insn_per_s",
                       TARGETS["insn_per_s_32_cores"]),
        "peak_rss_gb": {"target": TARGETS["peak_rss_gb"],
                        "max": max((r["peak_rss_gb"] for r in rows), default=None),
                        "met": all(r["peak_rss_gb"] <= TARGETS["peak_rss_gb"] for r in rows)},
    }


#: (cores, load) of the scaling runs.
SCALING_POINTS = ((8, 2), (32, 2), (64, 2), (32, 8))


def scaling(trace: Path, cache: Path, base: Path | None = None) -> list[dict]:
    """``linux`` on ``trace``: 8, 32 and 64 cores at 2X and 32 cores at 8X, compiled only."""
    rows = []
    for cores, load in SCALING_POINTS:
        for r in run_child(trace, ["linux"], cores, load, 3, False, cache, base):
            rows.append({**r, **cost_and_work(r)})
    return rows


def scaling_split(trace: Path, cache: Path) -> list[dict]:
    """The scaling points of :func:`scaling` through ``sandbox_split.py``: the kernel's and
    the engine's shares of each point's time and its kernel calls replayed as run and grouped
    by core (see there), one process each; the default machine only."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYSCHED_CACHE_DIR=str(cache))
    rows = []
    for cores, load in SCALING_POINTS:
        out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sandbox_split.py"),
                              str(trace), str(cores), str(load)],
                             capture_output=True, text=True, env=env, check=False)
        if out.returncode != 0:
            raise SystemExit(f"split of {trace.name} at {cores} cores, {load}X failed:\n"
                             f"{out.stderr}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def cost_and_work(row: dict) -> dict:
    """A row's CPU ns per simulated instruction, and the cache model's work per instruction
    (accesses; misses of each level per thousand, the switch path's instructions counted
    with the workload's, since the model runs both) beside its CPU ns per access: a cost that
    grows is then told apart from more work."""
    insns = max(row["sim_insns"] + row["switch_insns"], 1)
    out = {"cpu_ns_per_insn": 1e9 * row["cpu_s"] / max(row["sim_insns"], 1),
           "accesses_per_insn": row["cache_accesses"] / insns,
           "cpu_ns_per_access": 1e9 * row["cpu_s"] / max(row["cache_accesses"], 1)}
    out.update({f"l{k}_misses_per_kinsn": 1e3 * row[f"l{k}_misses"] / insns for k in (1, 2, 3)})
    return out


#: The benchmark sweep: 6 points of about 6 s each on an idle host (4 cores with 4 copies of
#: the trace keep the simulated cores busy), long enough beside the fixed costs (starting the
#: cluster, each worker reading the trace: about 10 s) for the scaling to show.
SWEEP_GRID = """
[[grid]]
trace = "TRACE"
policy = ["linux", "schedtask", "slicc"]
cores = 4
load = 4
load_unit = "copies"
l1i_kb = [16, 32]
"""

SWEEP_CHILD = r"""
import json, sys, time
from pysched.sweep import load_spec
spec, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
points = load_spec(spec).points
if mode == "warm-up":  # numba's kernels compiled into its cache, nothing measured
    points, mode = points[:1], "serial"
t0 = time.perf_counter()
if mode == "serial":
    from pysched.sweep.run import run_point
    from pysched.sweep.store import ResultStore
    store = ResultStore(out)
    for p in points:
        store.write(p, *run_point(p))
else:
    from pysched.sweep.run import run_sweep
    outcome = run_sweep(points, out, workers=int(mode))
    assert len(outcome.ran) == len(points) and not outcome.failed, outcome
wall = time.perf_counter() - t0
print(json.dumps({"points": len(points), "wall_s": wall, "points_per_min": 60 * len(points) / wall}))
"""


def sweep_throughput(repeats: int = 2) -> dict:
    """Points per minute of the benchmark sweep: serially, on 1 and on 2 workers.

    The three modes run in turn ``repeats`` times and each keeps its fastest run: the host is
    shared with other jobs, whose load comes and goes during a measurement."""
    trace = REPO / "data" / "dss-mem"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = {}
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        spec = Path(tmp) / "sweep.toml"
        spec.write_text(SWEEP_GRID.replace("TRACE", str(trace)))
        load_before = os.getloadavg()
        runs = ["warm-up"] + ["serial", "1", "2"] * repeats
        for i, mode in enumerate(runs):
            out = Path(tmp) / f"out-{i}-{mode}"
            run = subprocess.run([sys.executable, "-c", SWEEP_CHILD, str(spec), str(out),
                                  mode],
                                 capture_output=True, text=True, env=env, check=False)
            if run.returncode != 0:
                raise SystemExit(f"sweep benchmark ({mode}) failed:\n{run.stderr}")
            r = json.loads(run.stdout.strip().splitlines()[-1])
            print(f"sweep {mode}: {json.dumps(r)}", flush=True)
            res.setdefault(mode, []).append(r)
        res = {m: min(v, key=lambda r: r["wall_s"]) for m, v in res.items()}
        load_after = os.getloadavg()
    serial, one, two = res["serial"], res["1"], res["2"]
    return {
        "sweep_points": serial["points"], "sweep_trace": trace.name,
        "sweep_points_per_min_serial": serial["points_per_min"],
        "sweep_points_per_min_1w": one["points_per_min"],
        "sweep_points_per_min_2w": two["points_per_min"],
        "sweep_speedup_2w_vs_1w": two["points_per_min"] / one["points_per_min"],
        "sweep_speedup_2w_vs_serial": two["points_per_min"] / serial["points_per_min"],
        "sweep_wall_s": {"serial": serial["wall_s"], "1w": one["wall_s"], "2w": two["wall_s"]},
        "sweep_repeats": repeats,
        # the host is shared with other jobs: its load average says how much of it we had
        "sweep_host_loadavg_1min": {"before": load_before[0], "after": load_after[0]},
        "sweep_note": "fastest of the repeats; wall time includes reading the trace once per "
                      "process or worker and, for the clusters, starting the local cluster; "
                      "measured on a 2-core host; the load average says how much else ran",
    }


def write(out: Path, result: dict) -> None:
    """``result`` as JSON at ``out``, replaced whole (a stopped run leaves the last one)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--traces", default=None, help="comma-separated names in data/ (default all)")
    ap.add_argument("--policies", default=None, help="comma-separated (default all registered)")
    ap.add_argument("--cores", default="8,32")
    ap.add_argument("--plain-cores", default="8",
                    help="core counts at which the plain engine also runs (default 8)")
    ap.add_argument("--load", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--scaling", action="store_true",
                    help="also the scaling runs (linux on the largest trace)")
    ap.add_argument("--machine", type=Path, default=None,
                    help="a machine file (as evaluate's --machine): its hierarchy, e.g. an "
                         "inclusive or coherent one, at every core count")
    ap.add_argument("--sweep-only", action="store_true",
                    help="measure only the sweep throughput; merge its keys into --out")
    args = ap.parse_args()
    result = json.loads(args.out.read_text()) if args.out.is_file() else {}
    if args.sweep_only:
        result.update(sweep_throughput())
    else:
        from pysched.policies import REGISTRY
        policies = args.policies.split(",") if args.policies else sorted(REGISTRY)
        unknown = [p for p in policies if p not in REGISTRY]
        if unknown:
            raise SystemExit(f"--policies: unknown {', '.join(unknown)} "
                             f"(registered: {', '.join(sorted(REGISTRY))})")
        cores = [int(c) for c in args.cores.split(",")]
        plain = {int(c) for c in args.plain_cores.split(",") if c}
        chosen = traces(args.traces.split(",") if args.traces else None)
        load0 = os.getloadavg()
        # the benchmark's own cache of prepared traces, so that the first preparation of each
        # trace is cold whatever the user's cache holds
        cache = Path(tempfile.mkdtemp(prefix="bench-prepared-"))
        grid = {"policies": policies, "load": args.load, "epochs": args.epochs,
                "machine_file": str(args.machine) if args.machine else None}
        # rows of an earlier run of the same grid are kept: a stopped benchmark resumes
        old = result.get("grid", {})
        rows = [r for r in result.get("rows", []) if old.get("policies") == policies
                and old.get("machine_file") == grid["machine_file"] and r["load"] == args.load
                and r["epochs"] == args.epochs]
        done = {(r["trace"], r["cores"]) for r in rows}
        for tr in chosen:
            for c in cores:
                if (tr.name, c) in done:
                    continue
                rows += run_child(tr, policies, c, args.load, args.epochs, c in plain, cache,
                                  args.machine)
                # the targets are issue 33's, for the default machine
                result.update({"grid": grid, "rows": rows,
                               "targets": None if args.machine else meets(rows),
                               "all_identical": all(r.get("identical", True) for r in rows),
                               "host_loadavg_1min": {"before": load0[0],
                                                     "after": os.getloadavg()[0]}})
                write(args.out, result)
        if args.scaling:
            big = max(chosen, key=lambda d: sum(f.stat().st_size for f in d.rglob("*")))
            result["scaling"] = scaling(big, cache, args.machine)
            if args.machine is None:
                result["scaling_split"] = scaling_split(big, cache)
        shutil.rmtree(cache, ignore_errors=True)
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write(args.out, result)
    for k, v in (result.get("targets") or {}).items():
        print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
