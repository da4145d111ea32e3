"""Run policies on traces at several core counts and loads, epoch by epoch.

:func:`evaluate` is the Python API behind ``pysched evaluate``: each trace is segmented and
turned into a workload and a footprint once (:func:`prepare`, cached on disk across runs by
:mod:`~pysched.evaluation.prepared_cache`), then every (policy, cores, load) point replays it
in the sandbox. Results are plain pandas frames: one row per epoch and one per run.

A load is the paper's by default (``load_unit="machine"``): kX on C cores is k traced vCPUs'
work per core, replayed as :func:`copies_for` copies of the trace; ``load_unit="copies"``
takes the load as the number of copies itself (:data:`pysched.constants.LOAD_UNITS`).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from pysched._lastone import LastOne
from pysched.constants import LOAD_COPIES, LOAD_MACHINE, LOAD_UNITS
from pysched.models.caches.config import HierarchyConfig
from pysched.models.cores.config import CoreConfig, big_core
from pysched.models.machine import MachineConfig
from pysched.policies import get_policy
from pysched.sandbox import RunResult, SandboxConfig, build_footprint, build_workload, simulate
from pysched.sandbox.app_events import EVENTS, event_items
from pysched.sandbox.footprint import Footprint
from pysched.sandbox.item_streams import item_streams
from pysched.sandbox.metrics import stats_row
from pysched.sandbox.kernel_data import copy_private
from pysched.sandbox.switch_cost import (SWITCH_COSTS, TRACED, TracedSwitch, sandbox_costs,
                                         traced_switch)
from pysched.sandbox.workload import Workload
from pysched.superfunctions.functype import Category
from pysched.superfunctions.symbols import find_system_map
from pysched.trace import Trace, TraceError
from pysched.trace.clock import last_interrupt_s

from . import prepared_cache


@dataclass
class PreparedTrace:
    """A trace ready for the sandbox (built once, replayed by every point)."""

    name: str
    path: str
    workload: object
    footprint: object
    events: np.ndarray | None
    app_classes: np.ndarray
    insns: int
    meta: dict = field(default_factory=dict)


#: The item streams of the last trace evaluated (:func:`_streams`).
_LAST_STREAMS = LastOne()


def _streams(t: PreparedTrace):
    """The item streams of ``t`` (:func:`~pysched.sandbox.item_streams.item_streams`), kept
    for the next call with the same trace: a sweep's worker evaluates a trace's points one
    after the other (``pysched.sweep.run``), and building them takes 0.3-1 s each time on
    the shipped traces. One entry only, dropped before the next is built: they take
    0.4-0.6 GB."""
    return _LAST_STREAMS.get((t, t.workload, t.footprint), None,
                             lambda: item_streams(t.workload, t.footprint))


def prepare(path: str | Path, line: int = 64, progress: Callable[[str], None] | None = None,
            trace: Trace | None = None, note: str | None = None,
            keep_harness: bool = False, cache: bool = True) -> PreparedTrace:
    """Segment ``path`` and build its workload, footprint and event table, or read them from
    the cache of prepared traces.

    Parameters
    ----------
    path : str or pathlib.Path
        Trace directory.
    line : int
        Cache line size in bytes the footprint is cut with.
    progress : callable, optional
        Called with a line of text at each stage.
    trace : Trace, optional
        ``path`` already opened (e.g. by :func:`pysched.trace.preflight`, or the view of an
        incomplete trace's prefix); by default it is opened here.
    note : str, optional
        What was used when it is not the whole trace; goes to the run records.
    keep_harness : bool
        Keep the capture harness's own work (left out by default,
        :func:`pysched.sandbox.workload.build_workload`).
    cache : bool
        Read and store the result in the on-disk cache
        (:mod:`~pysched.evaluation.prepared_cache`: keyed by the trace's content, the
        building code and these parameters); False neither reads nor writes it.

    Returns
    -------
    PreparedTrace

    Raises
    ------
    pysched.trace.TraceError
        When the trace cannot be opened or segmented (the cache is not consulted before the
        trace has been opened and validated).
    """
    from pysched.trace import open_trace
    trace = trace if trace is not None else open_trace(path)
    say = progress or (lambda s: None)
    name = _workload_name(trace, path)
    where = _cache_slot(trace, name, line, keep_harness) if cache else None
    built = None if where is None else prepared_cache.load(where, _CACHED_CLASSES)
    if built is not None:
        say(f"{path}: prepared before, read from {where.path}")
    elif where is None:
        built = _build(path, trace, name, line, keep_harness, say)
    else:
        # one process on this machine builds an entry; the others wait and read it
        with prepared_cache.building(where) as waited:
            if waited and (built := prepared_cache.load(where, _CACHED_CLASSES)) is not None:
                say(f"{path}: prepared by another process meanwhile, read from {where.path}")
            else:
                built = _build(path, trace, name, line, keep_harness, say)
                if entry := prepared_cache.save(where, built, _CACHED_CLASSES):
                    say(f"{path}: stored in {entry}")
    return PreparedTrace(Path(path).name, str(path), built["workload"], built["footprint"],
                         built["events"], built["app_classes"], built["insns"],
                         {**built["meta"], "note": note})


def is_prepared(path: str | Path, line: int = 64, keep_harness: bool = False) -> bool:
    """Whether the cache of prepared traces holds an entry for ``path`` (with these
    parameters) now; an entry found damaged later is still rebuilt by :func:`prepare`."""
    from pysched.trace import open_trace
    trace = open_trace(path)
    return prepared_cache.present(_cache_slot(trace, _workload_name(trace, path), line,
                                              keep_harness))


def _workload_name(trace: Trace, path: str | Path) -> str:
    """The name a prepared trace carries: its manifest's workload, else the directory's."""
    return str((trace.manifest or {}).get("workload") or Path(path).name)


#: The classes a cached prepared trace is made of (:mod:`~pysched.evaluation.tree_codec`).
_CACHED_CLASSES = (Workload, Footprint, TracedSwitch)


def _build(path: str | Path, trace: Trace, name: str, line: int, keep_harness: bool,
           say: Callable[[str], None]) -> dict[str, Any]:
    """What :func:`prepare` caches: every :class:`PreparedTrace` field but the name, path and
    note (its source enters the cache key, so editing it rebuilds the cache)."""
    from pysched.superfunctions import segment
    say(f"{path}: segmenting")
    seg = segment(trace)
    w = build_workload(seg, trace, name=name, keep_harness=keep_harness)
    say(f"{path}: {len(w)} items of {w.ntasks} threads ({w.dependencies}); reading accesses")
    fp = build_footprint(trace, w.vcpus, line=line)
    fp.private = copy_private(w, fp)  # what copies share of the data (sandbox.kernel_data)
    app = np.flatnonzero(w.type_category == int(Category.APPLICATION))
    # the trace's switch path per switch, for the 'traced' switch cost (None: no switches
    # table, only the flat cost applies)
    switch = traced_switch(seg, trace) if trace.parts("switches") else None
    return {"workload": w, "footprint": fp, "events": event_items(w, name), "app_classes": app,
            "insns": w.total_insns,
            "meta": {"workload": name, "dependencies": w.dependencies,
                     "last_irq_s": last_interrupt_s(trace), "keep_harness": keep_harness,
                     "switch": switch}}


def _cache_slot(trace: Trace, name: str, line: int, keep_harness: bool):
    """Where the cache keeps ``trace`` prepared with these parameters
    (:func:`pysched.evaluation.prepared_cache.slot`)."""
    try:  # the kernel's symbols may lie outside the trace directory
        symbols = find_system_map(trace, copy=False)
    except TraceError:
        symbols = None  # segmenting will say so
    outside = [] if symbols is None or trace.path.resolve() in symbols.resolve().parents \
        else [symbols]
    prefix = None if trace.prefix is None else sorted([int(v), [int(x) for x in lim]]
                                                      for v, lim in trace.prefix.items())
    params = {"line": int(line), "keep_harness": bool(keep_harness), "name": name,
              "prefix": prefix}
    code = prepared_cache.code_digest((inspect.getsource(_build),))
    return prepared_cache.slot(prepared_cache.cache_dir(), trace.path, params, code, outside)


def machine(cores: int, base: MachineConfig | None = None) -> MachineConfig:
    """A machine of ``cores`` cores: the base machine's hierarchy (default: Table 2's caches)
    with that many cores, and its first core type repeated."""
    if base is None:
        return MachineConfig(HierarchyConfig(cores=cores), tuple(big_core() for _ in range(cores)))
    if len(base.cores) == cores:
        return base
    kinds: tuple[CoreConfig, ...] = tuple(base.cores[0] for _ in range(cores))
    import dataclasses
    return MachineConfig(dataclasses.replace(base.hierarchy, cores=cores), kinds)


def copies_for(load: int, cores: int, vcpus: int) -> int:
    """Copies of a ``vcpus``-vCPU trace that make the paper's load ``load`` (kX) on ``cores``.

    The paper's 1X runs one instance of a single-threaded benchmark on each core (section
    4.2), and 2X doubles that ensemble (section 6.1, Table 4): kX is k benchmarks' work per
    core. One traced vCPU stands for one such benchmark, so kX on C cores needs k * C traced
    vCPUs' work, ``ceil(k * cores / vcpus)`` copies of the trace.

    Approximations: the count is rounded up, so when ``vcpus`` does not divide ``k * cores``
    the replay holds up to ``vcpus - 1`` vCPUs' work more than kX (e.g. 1X of a 2-vCPU trace
    on 3 cores is 2 copies: 4 vCPUs' work on 3 cores). And a V-vCPU trace's vCPUs are not V
    independent single-threaded benchmarks: the threads of one copy wake each other and share
    data, and a vCPU's work includes the interrupts and kernel threads it ran.

    Parameters
    ----------
    load : int
        The paper's load factor k (1 for 1X), at least 1.
    cores : int
        Simulated cores, at least 1.
    vcpus : int
        vCPUs of the traced workload, at least 1.

    Returns
    -------
    int
        Copies of the trace to replay, at least 1.
    """
    for name, v in (("load", load), ("cores", cores), ("vcpus", vcpus)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"copies_for: {name} must be a positive integer, got {v!r}")
    return -(-int(load) * int(cores) // int(vcpus))


def run_copies(t: PreparedTrace, load: int, cores: int, load_unit: str = LOAD_MACHINE) -> int:
    """Copies of ``t`` that a run at ``load`` (in ``load_unit``) on ``cores`` replays."""
    if load_unit == LOAD_COPIES:
        return load
    vcpus = len(t.workload.vcpus)
    if vcpus < 1:
        raise ValueError(f"{t.name}: the workload has no vCPU, so a load relative to the "
                         f"machine is undefined; use load_unit={LOAD_COPIES!r}")
    return copies_for(load, cores, vcpus)


def check_request(policies: Sequence[str], cores: Sequence[int], loads: Sequence[int],
                  load_unit: str = LOAD_MACHINE) -> None:
    """Refuse a bad request before any long work; messages name the argument."""
    if not policies:
        raise ValueError("--policies: no policy given")
    for arg, given in (("--policies", policies), ("--cores", cores), ("--load", loads)):
        twice = sorted({str(x) for x in given if list(given).count(x) > 1})
        if twice:
            raise ValueError(f"{arg}: {', '.join(twice)} given twice (each run is one row of "
                             "the results)")
    for p in policies:
        try:
            get_policy(p)
        except ValueError as e:
            raise ValueError(f"--policies: {e}") from None
    for c in cores:
        if not isinstance(c, int) or not 1 <= c <= 1024:
            raise ValueError(f"--cores: {c!r} is not a core count in 1..1024")
    if load_unit not in LOAD_UNITS:
        raise ValueError(f"--load-unit: {load_unit!r} is not one of {', '.join(LOAD_UNITS)}")
    what = "a number of copies" if load_unit == LOAD_COPIES else "a load factor (kX)"
    for k in loads:
        if not isinstance(k, int) or not 1 <= k <= 64:
            raise ValueError(f"--load: {k!r} is not {what} in 1..64")


def memory_needed(t: PreparedTrace, ncopies: int) -> int:
    """Bytes a run of ``ncopies`` copies needs beyond the prepared trace (per-item state)."""
    return int(len(t.workload) * ncopies * 80 + t.workload.ntasks * ncopies * 32)


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


#: A study's own measure of a run (``evaluate(measure=...)``): ``measure(result, policy,
#: trace)`` -> extra columns of the run's row.
Measure = Callable[[RunResult, Any, PreparedTrace], dict[str, Any]]


def evaluate(traces: Sequence[PreparedTrace], policies: Sequence[str], cores: Sequence[int],
             loads: Sequence[int], base: MachineConfig | None = None,
             config: dict | None = None, load_unit: str = LOAD_MACHINE,
             progress: Callable[[str], None] | None = None,
             run_progress: Callable[[str, int, int], None] | None = None,
             decisions: list[pd.DataFrame] | None = None, switch_cost: str = TRACED,
             measure: Measure | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every (trace, policy, cores, load) point; returns (epochs, runs) frames.

    ``loads`` are in ``load_unit`` (:data:`~pysched.constants.LOAD_UNITS`): by default the
    paper's load relative to the machine, replayed as :func:`copies_for` copies of each trace
    (a policy given more cores, as SelectiveOffload, replays the copies of the requested core
    count); with ``"copies"`` each load is the number of copies. Every row has ``load``,
    ``load_unit`` and ``copies``.

    ``config`` holds extra :class:`SandboxConfig` fields (``epoch_s``, ``max_chunk``,
    ``max_epochs``: a window; the run rows' ``complete`` is False when it
    left work undone). Each run row has the totals and ``wall_s``, the replay's wall time.
    ``progress`` gets a line per finished run; ``run_progress(label, done, total)`` is called
    at every epoch of a run with the items finished so far. ``decisions``, when given, gets
    one frame per run whose policy recorded what it decided
    (:meth:`~pysched.policies.base.Policy.decisions`, e.g. SchedTask's allocation table per
    epoch), with the run's key columns (``trace``, ``workload``, ``policy``, ``cores``,
    ``load``, ``load_unit``, ``copies``) first.

    ``switch_cost`` (:data:`~pysched.sandbox.switch_cost.SWITCH_COSTS`) sets what a context
    switch and an OS move of a thread cost (:mod:`~pysched.sandbox.switch_cost`: ``traced``,
    each trace's own switch path run through the caches; ``flat`` 1,000 + 1,000 cycles;
    ``zero``); ``config`` may override ``os_migration_cycles`` (the move cost alone). Run
    rows carry ``switch_cost``, ``switch_cost_cycles`` (-1: the traced path, whose measured
    cycles are ``switch_cycles / switches``), ``switch_path_insns`` (the traced path's
    instructions per switch, NaN otherwise) and ``os_migration_cost_cycles`` (-1: the cores'
    ``migration_cycles``), and every :class:`SandboxConfig` model field (``idle_retry``,
    ``kernel_data``, ``copy_phase``, ``ifetch_penalty``, ...). ``vcpus`` and ``threads`` are
    the trace's (one copy's); ``last_arrival_s`` is the run's last traced interrupt arrival
    (the trace's last, ``last_irq_s``, after the last copy's start offset); ``policy_note``
    holds what the policy said of its run (:meth:`~pysched.policies.base.Policy.notes`;
    empty: nothing).
    """
    import time
    check_request(policies, cores, loads, load_unit)
    if switch_cost not in SWITCH_COSTS:
        raise ValueError(f"switch cost must be one of {', '.join(SWITCH_COSTS)}, got "
                         f"{switch_cost!r}")
    if config and "switch_cycles" in config:
        raise ValueError("give the switch cost as switch_cost, not in config")
    for t in traces:
        if switch_cost == TRACED and not _has_switches(t):
            raise ValueError(f"{t.path}: no context switch in the trace (or no switches "
                             f"table), so the traced switch cost is unknown; use "
                             f"--switch-cost flat or zero")
    avail = _available_bytes()
    for t in traces:
        for ncores in cores:
            for k in loads:
                n = run_copies(t, k, ncores, load_unit)
                need = memory_needed(t, n)
                if avail is not None and need > avail:
                    raise MemoryError(f"--load {k}: {t.name} on {ncores} cores needs about "
                                      f"{need / 2**30:.1f} GiB for its {n} copies; "
                                      f"{avail / 2**30:.1f} GiB are available")
    say = progress or (lambda s: None)
    epochs, runs = [], []
    for t in traces:
        # every run of the trace replays the same items' accesses (the compiled engine's)
        streams = _streams(t)
        for ncores in cores:
            m = machine(ncores, base)
            for k in loads:
                n = run_copies(t, k, ncores, load_unit)
                for p in policies:
                    pol = get_policy(p)
                    if (watch := getattr(measure, "watch", None)) is not None:
                        watch(pol, t)
                    # a policy that needs more cores (SelectiveOffload) gets them (Table 3),
                    # and the same work as the others: the copies of the requested cores
                    mp = m if pol.core_factor == 1 else machine(ncores * pol.core_factor, base)
                    costs = {**sandbox_costs(switch_cost, None, t.meta.get("switch")),
                             **{k: v for k, v in (config or {}).items()
                                if k == "os_migration_cycles"}}
                    rest = {k: v for k, v in (config or {}).items()
                            if k != "os_migration_cycles"}
                    cfg = SandboxConfig(mp, copies=n, **costs, **rest)
                    t0 = time.perf_counter()
                    label = f"{t.name} {p} cores={ncores} load={k} copies={n}"
                    tick = None if run_progress is None else \
                        (lambda done, total, label=label: run_progress(label, done, total))
                    res = simulate(t.workload, t.footprint, pol, cfg, t.events, progress=tick,
                                   switch_path=t.meta.get("switch"), streams=streams)
                    wall = time.perf_counter() - t0
                    key = {"trace": t.name, "workload": t.meta.get("workload", t.name),
                           "policy": p, "cores": ncores, "load": k, "load_unit": load_unit,
                           "copies": n}
                    mig, sw = costs["os_migration_cycles"], costs["switch_cycles"]
                    path = t.meta.get("switch")
                    cost_cols = {"switch_cost": switch_cost,
                                 "switch_cost_cycles": -1 if sw is None else sw,
                                 "switch_path_insns": (path.per_switch if sw is None
                                                       else float("nan")),
                                 "os_migration_cost_cycles": -1 if mig is None else mig,
                                 **model_columns(cfg)}
                    if decisions is not None and (rows := pol.decisions()):
                        decisions.append(pd.DataFrame([{**key, **d} for d in rows]))
                    for e, s in enumerate(res.epochs):
                        epochs.append({**key, "epoch": e, **stats_row(s, t.app_classes)})
                    runs.append({**key, **stats_row(res.total, t.app_classes), **cost_cols,
                                 "vcpus": len(t.workload.vcpus),
                                 "threads": int(t.workload.ntasks),
                                 "epochs": len(res.epochs), "has_events": t.events is not None,
                                 "forced_releases": res.forced_releases,
                                 "complete": res.complete,
                                 "last_irq_s": t.meta.get("last_irq_s", float("nan")),
                                 "last_arrival_s": (t.meta.get("last_irq_s", float("nan"))
                                                    + res.last_start_s),
                                 "dependencies": t.meta.get("dependencies", ""),
                                 "note": t.meta.get("note") or "",
                                 "policy_note": "; ".join(pol.notes()),
                                 "wall_s": wall})
                    extra = {} if measure is None else dict(measure(res, pol, t))
                    if clash := sorted(set(extra) & set(runs[-1])):
                        raise ValueError(f"measure: {', '.join(clash)} are columns of the "
                                         f"run's row already")
                    runs[-1].update(extra)
                    say(f"{label}: "
                        f"{res.total.instructions.sum() / wall / 1e6:.1f} M insn/s simulated")
    return pd.DataFrame(epochs), pd.DataFrame(runs)


def _has_switches(t: PreparedTrace) -> bool:
    path = t.meta.get("switch")
    return path is not None and path.switches > 0 and len(path.runs) > 0


#: The :class:`SandboxConfig` fields of the model's rules that every run row records.
MODEL_FIELDS = ("idle_retry", "tick_hz", "ipi_s", "kernel_data", "copy_phase", "phase_seed",
                "ifetch_penalty", "device_timing")


def model_columns(cfg: SandboxConfig) -> dict:
    """The model rules ``cfg`` ran with, as run-row columns (:data:`MODEL_FIELDS`)."""
    return {k: getattr(cfg, k) for k in MODEL_FIELDS}


#: What makes two runs of one evaluation the same point but for the policy.
RUN_KEYS = ("trace", "cores", "load_unit", "load")


def performance(runs: pd.DataFrame, baseline: str = "linux",
                keys: Sequence[str] = RUN_KEYS) -> pd.DataFrame:
    """Per run: the paper's performance (events per second; instruction throughput when the
    workload has no events) relative to ``baseline`` at the same ``keys`` (by default
    :data:`RUN_KEYS`: the trace, cores and load; a sweep adds its cache geometry)."""
    r = runs.copy()
    r["performance"] = np.where(r["has_events"], r["events_per_s"], r["throughput"])
    keys = list(keys)
    base = r[r["policy"] == baseline].set_index(keys)["performance"]
    r["vs_" + baseline] = [row.performance / base.get(tuple(row[k] for k in keys), np.nan) - 1
                           for _, row in r.iterrows()]
    return r


__all__ = ["EVENTS", "Measure", "PreparedTrace", "RUN_KEYS", "check_request", "copies_for",
           "evaluate", "machine", "performance", "prepare", "run_copies"]
