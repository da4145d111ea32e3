"""Benchmark the cache models against pycachesim over a table of geometries and real streams.

Rows of the table are geometries times streams, each run in one process by pysched and by
pycachesim:

* geometries: a 32 KB cache (``--size``) with 1 (direct-mapped), 2, 4, 8 and 16 ways
  (``--ways``); LRU with 32-, 64- and 128-byte lines (``--lines``) and the other policies
  (``--policies``: FIFO) with 64-byte lines (``--other-lines``), 20 geometries by default;
* streams: the first ``--accesses`` accesses (1 M by default) of the instruction fetch-line
  stream (:func:`~pysched.models.caches.streams.fetch_lines`) of vCPU 0 of every trace under
  ``--data`` (the 17 shipped ones), and of the mixed stream (fetches, loads and stores in
  program order, :func:`~pysched.models.caches.access_stream`) of vCPU 0 of ``data/dss-mem``,
  the trace recorded with data accesses. Each stream is built for the row's line size (a fetch
  line depends on it); a trace whose vCPU 0 makes fewer accesses gives all it has (``accesses``
  in the row). The mixed stream is shorter (``--mixed-accesses``, 250 K): pycachesim takes one
  Python-level call per run of fetches or data accesses there, 6 s per 1 M accesses and run,
  which with 1 M accesses made its 20 rows longer than all the other rows together.

Each row measures

a. a single cache of that geometry given every access's address as a read (pycachesim's fastest
   path: ``iterload`` of the whole address list in one call; with stores it needs a slower
   per-item call, which would flatter the ratio);
b. the whole hierarchy of one core: L1i and L1d of that geometry, a 256 KB L2 and an 8 MB L3
   with its ways, line and policy; pysched's :class:`Hierarchy` against pycachesim configured as
   in :mod:`pysched.models.caches.reference`, called once per maximal run of instruction
   fetches (L1i) or data accesses (L1d) since its split first level cannot take one
   interleaved array.

Each figure is the best of ``--repeat`` runs (5) in each of ``--passes`` passes over the
whole table (2), from cold caches, in thread CPU time. This VM's speed drifts by up to 2x
within minutes and the host runs other work: the best run is the one least disturbed, and the
passes, minutes apart, keep a slow phase of the host from deciding a row. With one pass of 3
runs, two runs of the table on the same kernels put 13 and 15 rows below a target, only one
row in both; with one pass of 5, a slow phase of a few minutes put the single cache at 70-94
M/s on the rows it measured (chase-mid, 16 ways of 64 bytes: 87 M/s there, 276 M/s alone a
few minutes later). pycachesim's figures move as much as ours, and both get the same runs. A
shorter stream gets more runs, in proportion to its length, up to ``MAX_ROUNDS``, so that
every figure rests on about as much run time (a chase stream's 11-54 K accesses take 0.1-0.5
ms, and the best of three such runs moved by up to 1.7x from one try to the next). The kernels
are compiled (or loaded from numba's cache) before any timing. The runs of pysched and
pycachesim alternate, so both see the same conditions. Conversions to pycachesim's input
lists are done before timing. BLAS threads are limited to one: the models are
single-threaded, and OpenBLAS's waiting threads took CPU time in a profile of this benchmark.
Counts must match exactly (hits, misses, write-backs per level) in every row and pass. The
load average of the host is recorded at the start, at the end and with every row (the
highest of its passes).

The headline figures (``l1_access_per_s``, ``hierarchy_access_per_s``,
``speedup_vs_pycachesim``, ``hierarchy_speedup_vs_pycachesim``) are the minimum over the table,
each ratio taken within its row. Targets: >= 100 M accesses/s for (a), >= 40 M/s for (b),
>= 3x pycachesim, in every row; ``rows_below_target`` lists the rows that miss one.

Usage: ``python benchmarks/models.py --out benchmarks/results/models.json`` (``make
bench-models``)
"""
from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported
import platform
import sys
import time
from pathlib import Path

import numpy as np

from pysched.models.caches import Cache, CacheConfig, Hierarchy, HierarchyConfig, access_stream
from pysched.models.caches.reference import PycachesimCache, PycachesimHierarchy, our_counts
from pysched.models.caches.streams import fetch_lines
from pysched.models.codes import IFETCH
from pysched.trace import expand, open_trace

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
MIXED_TRACE = "dss-mem"
#: exec rows expanded at a time while collecting a fetch-line stream (24 bytes an instruction)
WINDOW = 1_000_000
#: Most runs a short stream gets (see the module docstring).
MAX_ROUNDS = 20


def check_trace(path: Path, mem: bool) -> Path:
    """``path`` if it is a trace directory (with a ``mem`` table if ``mem``), else exit with
    the reason."""
    if not (path / "exec").is_dir():
        sys.exit(f"benchmark: {path} is not a trace directory (no exec/); the shipped traces "
                 f"come from `make data`")
    if mem and not any((path / "mem").glob("*.parquet")):
        sys.exit(f"benchmark: {path} has no mem table: record it with --data-accesses")
    return path


def fetch_streams(trace, n: int, lines: list[int]) -> dict[int, np.ndarray]:
    """``{line: addresses}`` of the first ``n`` fetch-line accesses of vCPU 0 per line size,
    expanding ``WINDOW`` exec rows at a time (the whole trace does not fit in memory)."""
    vcpu = trace.vcpus[0]
    parts = {line: [] for line in lines}
    have = dict.fromkeys(lines, 0)
    start = 0
    prev = np.zeros(0, np.uint64)     # the previous window's last instruction
    while min(have.values()) < n:
        paddr = expand(trace, vcpu, start, start + WINDOW).paddr
        if len(paddr) == 0:
            break
        # with the previous instruction in front, a window's first instruction starts an
        # access exactly when it would in the whole stream
        both = np.concatenate([prev, paddr])
        for line in lines:
            idx = fetch_lines(both, line)
            idx = idx[idx >= len(prev)]
            parts[line].append(both[idx])
            have[line] += len(idx)
        prev = paddr[-1:]
        start += WINDOW
    return {line: np.ascontiguousarray(np.concatenate(parts[line] or [prev[:0]])[:n])
            for line in lines}


def build_streams(data: Path, n: int, lines: list[int], n_mixed: int
                  ) -> dict[tuple[str, int], tuple]:
    """``{(name, line): (addr, kind, cls)}``: the first ``n`` accesses of the fetch-line stream
    of vCPU 0 of each trace under ``data`` (``name``) and the first ``n_mixed`` of the mixed
    stream of dss-mem (``"dss-mem mixed"``), per line size."""
    out = {}
    names = sorted(p.name for p in data.iterdir() if (p / "exec").is_dir())
    if not names:
        sys.exit(f"benchmark: no trace directories under {data}")
    for name in names:
        trace = open_trace(check_trace(data / name, mem=False))
        for line, addr in fetch_streams(trace, n, lines).items():
            out[(name, line)] = (addr, np.full(len(addr), IFETCH, np.uint8),
                                 np.zeros(len(addr), np.uint16))
    trace = open_trace(check_trace(data / MIXED_TRACE, mem=True))
    # a mixed stream has about 0.67 accesses per instruction and 5 instructions per row
    # (dss-mem): n accesses come from fewer than n exec rows
    for line in lines:
        s = access_stream(trace, trace.vcpus[0], 0, n_mixed, line=line)
        out[(f"{MIXED_TRACE} mixed", line)] = (s.addr[:n_mixed], s.kind[:n_mixed],
                                               s.cls[:n_mixed])
    return out


def best_of(repeat: int, *fns) -> list[tuple[float, object]]:
    """Minimum wall time of each ``fn()`` (which builds its state, then returns (t0,
    result)) over ``repeat`` rounds that run every function once, in turn."""
    best = [(float("inf"), None)] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0, res = fn()
            best[i] = min(best[i], (time.thread_time() - t0, res), key=lambda b: b[0])
    return best


def rounds(repeat: int, n: int, full: int) -> int:
    """Runs for a stream of ``n`` accesses: ``repeat``, times ``full / n`` for a shorter
    stream, at most :data:`MAX_ROUNDS`."""
    return max(repeat, min(MAX_ROUNDS, -(-repeat * full // max(n, 1))))


def hierarchy_config(l1: CacheConfig) -> HierarchyConfig:
    """One core: L1i = L1d = ``l1``; 256 KB L2 and 8 MB L3 with its ways, line and policy."""
    lower = dict(ways=l1.ways, line=l1.line, policy=l1.policy)
    return HierarchyConfig(l1i=l1, l1d=l1, l2=CacheConfig(256 * 1024, latency=8, **lower),
                           l3=CacheConfig(8 * 1024 * 1024, latency=18, **lower))


def measure_single(cfg: CacheConfig, addr: np.ndarray, repeat: int) -> dict:
    """Row (a): one cache, every access a read."""
    def ours():
        c = Cache(cfg)
        t = time.thread_time()
        c.run(addr)
        return t, c

    def ref():
        r = PycachesimCache(cfg)
        calls = r.prepare(addr)
        t = time.thread_time()
        r.execute(calls)
        return t, r

    (t, c), (t_ref, r) = best_of(repeat, ours, ref)
    rc = r.counts()
    mine = [c.stats.hits(), c.stats.misses(), c.stats.writebacks]
    theirs = [rc["HIT"], rc["MISS"], rc["EVICT"]]
    n = len(addr)
    return {**figures(n, t, t_ref), "hit_rate": mine[0] / max(n, 1),
            "counts_identical": mine == theirs}


def measure_hierarchy(cfg: HierarchyConfig, stream: tuple, repeat: int) -> dict:
    """Row (b): the whole hierarchy of one core."""
    addr, kind, cls = stream

    def ours():
        h = Hierarchy(cfg)
        t = time.thread_time()
        h.run(0, addr, kind, cls)
        return t, h

    def ref():
        r = PycachesimHierarchy(cfg)
        calls = r.prepare(addr, kind)
        t = time.thread_time()
        r.execute(calls)
        return t, r

    (t, h), (t_ref, r) = best_of(repeat, ours, ref)
    return {**figures(len(addr), t, t_ref),
            "counts_identical": our_counts(h.stats) == r.counts()}


def figures(n: int, t: float, t_ref: float) -> dict:
    """Speeds and ratio of a row part from the best times of pysched and pycachesim."""
    return {"access_per_s": n / t, "pycachesim_access_per_s": n / t_ref,
            "speedup_vs_pycachesim": t_ref / t, "seconds": t, "pycachesim_seconds": t_ref}


def best_row(a: dict, b: dict) -> dict:
    """One row from two passes: each model's best time over both (a row's speed is a property
    of the code, a slow phase of the host is not), counts identical in both."""
    out = dict(a)
    for part in ("single", "hierarchy"):
        x, y = a[part], b[part]
        out[part] = {**x, **figures(a["accesses"], min(x["seconds"], y["seconds"]),
                                    min(x["pycachesim_seconds"], y["pycachesim_seconds"])),
                     "counts_identical": x["counts_identical"] and y["counts_identical"]}
    out["runs"] = a["runs"] + b["runs"]
    out["load_1min"] = max(a["load_1min"], b["load_1min"])
    return out


def minimum(rows: list[dict], part: str, key: str) -> dict:
    """The row with the smallest ``row[part][key]``: its value and where it was measured."""
    r = min(rows, key=lambda r: r[part][key])
    return {"value": r[part][key], "stream": r["stream"], "geometry": r["geometry"]}


def geometries(size: int, ways: list[int], lines: list[int], policies: list[str],
               other_lines: list[int]) -> list[CacheConfig]:
    """LRU (the first policy) with every ways and line size; the other policies with every
    ways and ``other_lines``."""
    out = []
    for i, pol in enumerate(policies):
        for w in ways:
            for line in (lines if i == 0 else other_lines):
                out.append(CacheConfig(size, w, line, 3, pol))
    return out


def below_target(rows: list[dict], targets: dict[str, float]) -> list[dict]:
    """The rows where a figure misses its target, with the figures that miss."""
    where = {"l1_access_per_s": ("single", "access_per_s"),
             "hierarchy_access_per_s": ("hierarchy", "access_per_s"),
             "speedup_vs_pycachesim": ("single", "speedup_vs_pycachesim"),
             "hierarchy_speedup_vs_pycachesim": ("hierarchy", "speedup_vs_pycachesim")}
    out = []
    for r in rows:
        miss = {k: r[part][key] for k, (part, key) in where.items() if r[part][key] < targets[k]}
        if miss:
            out.append({"geometry": r["geometry"], "stream": r["stream"], "missed": miss})
    return out


def run_pass(args, geos: list[CacheConfig], streams: dict) -> list[dict]:
    """One pass over the table: a row per geometry and stream, printed as it is measured."""
    print(f"{'geometry':26s} {'stream':16s} {'single M/s':>10s} {'x pycsim':>8s} "
          f"{'hier. M/s':>9s} {'x pycsim':>8s} {'load':>5s} identical", flush=True)
    rows = []
    for cfg in geos:
        hcfg = hierarchy_config(cfg)
        geo = f"{args.size // 1024} KB {cfg.ways}-way {cfg.line} B {cfg.policy}"
        for (name, ln), stream in streams.items():
            if ln != cfg.line or len(stream[0]) == 0:
                continue
            n = len(stream[0])
            full = args.mixed_accesses if name.endswith(" mixed") else args.accesses
            runs = rounds(args.repeat, n, full)
            row = {"geometry": geo, "stream": name, "accesses": n, "runs": runs,
                   "single": measure_single(cfg, stream[0], runs),
                   "hierarchy": measure_hierarchy(hcfg, stream, runs),
                   "load_1min": os.getloadavg()[0]}
            rows.append(row)
            s, h = row["single"], row["hierarchy"]
            print(f"{geo:26s} {name:16s} {s['access_per_s'] / 1e6:10.1f} "
                  f"{s['speedup_vs_pycachesim']:8.2f} {h['access_per_s'] / 1e6:9.1f} "
                  f"{h['speedup_vs_pycachesim']:8.2f} {row['load_1min']:5.2f} "
                  f"{s['counts_identical'] and h['counts_identical']}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=DATA,
                    help="directory of the traces, each stream from vCPU 0 (default data/)")
    ap.add_argument("--accesses", type=int, default=1_000_000,
                    help="accesses per fetch-line stream, its first ones (default 1 M)")
    ap.add_argument("--mixed-accesses", type=int, default=250_000,
                    help="accesses of the mixed stream of dss-mem (default 250 K)")
    ap.add_argument("--size", type=int, default=32 * 1024, help="cache size in bytes")
    ap.add_argument("--ways", default="1,2,4,8,16")
    ap.add_argument("--lines", default="32,64,128", help="line sizes of the first policy")
    ap.add_argument("--policies", default="lru,fifo")
    ap.add_argument("--other-lines", default="64", help="line sizes of the other policies")
    ap.add_argument("--passes", type=int, default=2,
                    help="passes over the whole table, each row's best kept (default 2)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs per figure, the best kept (default 5, see the docstring)")
    args = ap.parse_args()
    for name in ("passes", "repeat", "accesses", "mixed_accesses"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    geos = geometries(args.size, ints(args.ways), ints(args.lines), args.policies.split(","),
                      ints(args.other_lines))
    lines = sorted({g.line for g in geos})
    load_start = os.getloadavg()
    print(f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} "
          f"{load_start[2]:.2f}", flush=True)

    t0 = time.perf_counter()
    streams = build_streams(args.data, args.accesses, lines, args.mixed_accesses)
    print(f"{len(streams)} streams of up to {args.accesses} accesses built in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)

    # compile the kernels (or load them from numba's cache) before any timing
    a, k, c = streams[(f"{MIXED_TRACE} mixed", lines[0])]
    for g in geos:
        Cache(g).run(a[:1000])
        Hierarchy(hierarchy_config(g)).run(0, a[:1000], k[:1000], c[:1000])

    best: dict[tuple[str, str], dict] = {}
    for p in range(args.passes):
        print(f"pass {p + 1} of {args.passes}", flush=True)
        for row in run_pass(args, geos, streams):
            key = (row["geometry"], row["stream"])
            best[key] = best_row(best[key], row) if key in best else row
    rows = list(best.values())

    mins = {"l1_access_per_s": minimum(rows, "single", "access_per_s"),
            "hierarchy_access_per_s": minimum(rows, "hierarchy", "access_per_s"),
            "speedup_vs_pycachesim": minimum(rows, "single", "speedup_vs_pycachesim"),
            "hierarchy_speedup_vs_pycachesim":
                minimum(rows, "hierarchy", "speedup_vs_pycachesim")}
    identical = all(r["single"]["counts_identical"] and r["hierarchy"]["counts_identical"]
                    for r in rows)
    targets = {"l1_access_per_s": 100e6, "hierarchy_access_per_s": 40e6,
               "speedup_vs_pycachesim": 3.0, "hierarchy_speedup_vs_pycachesim": 3.0}
    missed = below_target(rows, targets)
    res = {
        # headline: minimum over the table
        **{k: v["value"] for k, v in mins.items()},
        "minimum_at": mins,
        "counts_identical": identical,
        "targets": targets,
        "targets_met": {k: mins[k]["value"] >= v for k, v in targets.items()},
        "rows_below_target": missed,
        "rows_total": len(rows),
        "load_average_at_start": load_start,
        "load_average_at_end": os.getloadavg(),
        "table": rows,
        "accesses_per_stream": args.accesses,
        "accesses_mixed_stream": args.mixed_accesses,
        "size": args.size,
        "repeat": args.repeat,
        "passes": args.passes,
        "cpu": platform.processor() or platform.machine(),
        "python": sys.version.split()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # one line per row of the table and per row below target: readable, a third of the size
    text = json.dumps({**res, "table": [], "rows_below_target": []}, indent=2)
    for key in ("table", "rows_below_target"):
        lines = ",\n".join("    " + json.dumps(r) for r in res[key])
        if lines:
            text = text.replace(f'"{key}": []', f'"{key}": [\n{lines}\n  ]')
    args.out.write_text(text + "\n")
    print(f"{len(missed)} of {len(rows)} rows below a target")
    print(json.dumps({k: res[k] for k in (*mins, "counts_identical", "load_average_at_start",
                                          "load_average_at_end")}, indent=2))
    if not identical:
        sys.exit("benchmark: pysched and pycachesim counts differ")


if __name__ == "__main__":
    main()
