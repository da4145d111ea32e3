"""Run a sweep's points on Dask distributed and store each as it finishes.

Workers run :func:`run_point`: the point's trace is prepared (segmented, its workload and
footprint built, or read from the on-disk cache of prepared traces on the worker's machine,
:mod:`pysched.evaluation.prepared_cache`) the first time a worker process meets it and kept in
that process (:func:`cached_trace`), so a trace is read once per worker and never shipped with
a task; only the point (a few hundred bytes) goes out and its per-epoch rows come back. A trace
not yet in the cache is first prepared by one task of its own (:func:`ensure_prepared`, ahead
of the points), so the workers prepare different traces at once. The client writes
each point's files as its future completes (:class:`~.store.ResultStore`), so an interrupted
sweep loses only the points in flight, and a re-run skips finished points. Policies loaded
from files (``--policy-file``) are loaded on every worker too (:mod:`.worker_policies`).

A worker that dies mid-run (killed, out of memory) is restarted by its nanny and the scheduler
re-runs its tasks elsewhere (up to ``distributed.scheduler.allowed-failures`` deaths per task);
each point is stored once, from its one completed future.
"""
from __future__ import annotations

import contextlib
import gc
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pandas as pd

from .spec import Point
from .store import ResultStore

#: Prepared traces a worker keeps (least recently used dropped first): points are submitted
#: grouped by trace and a worker never goes back to an earlier group, so one reads each trace
#: once per worker and bounds memory (a shipped trace and its item streams take 1-2 GB; a
#: re-read from the on-disk cache takes under a second).
TRACE_CACHE = int(os.environ.get("PYSCHED_SWEEP_TRACE_CACHE", "1"))

_TRACES: OrderedDict[str, object] = OrderedDict()
#: Trace paths this process prepared, in order (what "read once per worker" is checked on).
PREPARED: list[str] = []


def cached_trace(path: str, cache: bool = True):
    """The :class:`~pysched.evaluation.runner.PreparedTrace` of ``path``, prepared at most once
    per process while it stays among the :data:`TRACE_CACHE` most recently used (``cache``:
    use the on-disk cache, :func:`~pysched.evaluation.runner.prepare`)."""
    from pysched.evaluation.runner import prepare
    t = _TRACES.pop(path, None)
    if t is None:
        t = prepare(path, cache=cache)
        PREPARED.append(path)
    _TRACES[path] = t
    if len(_TRACES) > max(TRACE_CACHE, 1):
        while len(_TRACES) > max(TRACE_CACHE, 1):
            _TRACES.popitem(last=False)
        # A prepared trace sits in reference cycles, which only the cyclic collector frees:
        # left to its own pace it kept 2-5 old traces alive (measured: a study worker grew to
        # 6 GB of RSS, half of it the mapped cache entries of traces it had left).
        gc.collect()
    return t


def ensure_prepared(path: str) -> str | None:
    """Prepare ``path`` into this machine's cache of prepared traces, unless it is there (and
    keep it in this process, :func:`cached_trace`). Returns None, or why it could not: the
    points of that trace then fail with the same reason, which is where it is reported."""
    from pysched.evaluation.runner import is_prepared
    try:
        if not is_prepared(path):
            cached_trace(path)
    except Exception as e:  # noqa: BLE001  (reported by the trace's points)
        return f"{type(e).__name__}: {e}"
    return None


def prepared_traces() -> list[str]:
    """The trace paths this process prepared, in order (run on workers with
    ``client.run(prepared_traces)``)."""
    return list(PREPARED)


def _with_point(frame: pd.DataFrame, point: Point) -> pd.DataFrame:
    cols = point.columns()
    rest = frame.drop(columns=[c for c in cols if c in frame.columns])
    head = pd.DataFrame({k: [v] * len(frame) for k, v in cols.items()}, index=frame.index)
    # one dtype whatever the policy, so that every point's file has the same schema
    head["heatmap_bits"] = head["heatmap_bits"].astype("Int64")
    return pd.concat([head, rest], axis=1)


def run_point(point: Point, cache: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run one point through :func:`pysched.evaluation.runner.evaluate` (``cache``: read and
    store its prepared trace in the on-disk cache).

    Returns
    -------
    (epochs, runs) : tuple of DataFrame
        The runner's frames with every parameter of the point as a column (see
        :meth:`Point.columns`).
    """
    from pysched.evaluation.runner import evaluate
    t = cached_trace(point.trace, cache)
    config = {"epoch_s": point.epoch_ms / 1e3, "max_epochs": point.epochs, **dict(point.model)}
    epochs, runs = evaluate([t], [point.policy], [point.cores], [point.load],
                            base=point.machine, config=config,
                            load_unit=point.load_unit, switch_cost=point.switch_cost)
    return _with_point(epochs, point), _with_point(runs, point)


@dataclass
class SweepOutcome:
    """What a call of :func:`run_sweep` did."""

    ran: list[Point] = field(default_factory=list)
    skipped: list[Point] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    dashboard: str | None = None


@contextlib.contextmanager
def connect(scheduler: str | None = None, workers: int | None = None
            ) -> Iterator[object]:
    """A Dask client: to ``scheduler`` (``tcp://HOST:8786``) or, by default, to a new
    ``LocalCluster`` of ``workers`` processes (default: this machine's cores), one thread each
    (the sandbox is single-threaded Python and numba). The local cluster is closed on exit,
    also on an exception or an interrupt, so nothing is left running."""
    from distributed import Client, LocalCluster
    if scheduler is not None:
        with Client(scheduler) as client:
            yield client
        return
    n = workers or os.cpu_count() or 1
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True) as cluster, \
            Client(cluster) as client:
        yield client


def dashboard_link(client) -> str | None:
    """The dashboard's address, when the dashboard runs (it needs ``bokeh``)."""
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return None
    return getattr(client, "dashboard_link", None)


def run_sweep(points: Sequence[Point], out: str | Path, client=None,
              scheduler: str | None = None, workers: int | None = None,
              on_start: Callable[[int, int, str | None], None] | None = None,
              on_done: Callable[[Point, str | None], None] | None = None,
              cache: bool = True) -> SweepOutcome:
    """Run every point of ``points`` not yet finished in ``out``, storing each as it finishes.

    Parameters
    ----------
    points : sequence of Point
        From :func:`~.spec.load_spec` (``Sweep.points``).
    out : path
        Results directory (:mod:`.store`); created when missing.
    client : distributed.Client, optional
        Use this client (left open); otherwise :func:`connect` with ``scheduler`` and
        ``workers``.
    on_start : callable, optional
        ``on_start(to_run, finished_before, dashboard_link)`` once connected.
    on_done : callable, optional
        ``on_done(point, error)`` after each point (``error`` None when it was stored).
    cache : bool
        Whether workers read and store prepared traces in their on-disk cache
        (:func:`~pysched.evaluation.runner.prepare`).

    Returns
    -------
    SweepOutcome
    """
    store = ResultStore(out)
    store.remove_temporaries()
    outcome = SweepOutcome()
    todo = []
    for p in points:
        (outcome.skipped if store.finished(p) else todo).append(p)
    if not todo:
        if on_start is not None:
            on_start(0, len(outcome.skipped), None)
        return outcome
    ctx = contextlib.nullcontext(client) if client is not None else connect(scheduler, workers)
    with ctx as c:
        from pysched.policies.files import loaded_sources
        if sources := loaded_sources():  # workers do not share this process's registry
            from .worker_policies import register
            register(c, sources)
        outcome.dashboard = dashboard_link(c)
        if on_start is not None:
            on_start(len(todo), len(outcome.skipped), outcome.dashboard)
        _gather(c, todo, store, outcome, on_done, cache)
    return outcome


def _gather(client, todo: list[Point], store: ResultStore, outcome: SweepOutcome,
            on_done: Callable[[Point, str | None], None] | None, cache: bool = True) -> None:
    from distributed import as_completed
    by_key = {}
    futures = []
    if cache:
        # Each trace first prepared once, the workers on different traces at once (a higher
        # priority than the points': submission order alone let the workers start points
        # between them). Without them the workers all began on the first trace's points, and
        # each prepared it.
        futures += [client.submit(ensure_prepared, t, pure=False, priority=1)
                    for t in dict.fromkeys(p.trace for p in todo)]
    firsts = len(futures)
    for p in todo:  # submission order is Dask's default priority: grouped by trace
        f = client.submit(run_point, p, cache, key=f"pysched-point-{p.key}", pure=False)
        by_key[f.key] = p
        futures.append(f)
    try:
        for f in as_completed(futures[firsts:]):
            p = by_key[f.key]
            err = None
            try:
                epochs, runs = f.result()
            except Exception as e:  # a point that fails is reported; the others go on
                err = f"{type(e).__name__}: {e}"
                outcome.failed[p.key] = err
            else:
                store.write(p, epochs, runs)
                outcome.ran.append(p)
            f.release()
            if on_done is not None:
                on_done(p, err)
    finally:
        # interrupted: nothing of ours stays queued on a shared cluster
        client.cancel([f for f in futures if not f.done()])


__all__ = ["PREPARED", "SweepOutcome", "cached_trace", "connect", "dashboard_link",
           "ensure_prepared", "prepared_traces", "run_point", "run_sweep"]
