"""The compiled engine (pysched.sandbox.compiled) against its twin, the plain engine: the same
statistics to the last bit, on random small workloads with data accesses, copies and several
runs per item, and on a shipped trace under every registered policy; and the item streams
against the plain engine's accesses."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sandbox_factory import FIRST, tiny
from test_sandbox import machine, workloads

from pysched.evaluation.runner import copies_for, prepare
from pysched.evaluation.runner import machine as table2_machine
from pysched.policies import REGISTRY, get_policy
from pysched.sandbox import Footprint, SandboxConfig, simulate
from pysched.sandbox.engine import Engine
from pysched.sandbox.replay import ENGINES
from pysched.sandbox.item_streams import item_streams
from pysched.sandbox.switch_cost import TracedSwitch, sandbox_costs

DATA = Path(__file__).resolve().parents[1] / "data"


def assert_same(a, b, where: str = "") -> None:
    """Every field of two records (nested records too) equal to the last bit."""
    assert type(a) is type(b), where
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if dataclasses.is_dataclass(x):
            assert_same(x, y, f"{where}.{f.name}")
        else:
            assert np.array_equal(np.asarray(x), np.asarray(y)), f"{where}.{f.name}: {x} != {y}"


def assert_same_runs(ra, rb) -> None:
    assert len(ra.epochs) == len(rb.epochs)
    for k, (ea, eb) in enumerate(zip(ra.epochs, rb.epochs)):
        assert_same(ea, eb, f"epoch {k}")
    assert ra.forced_releases == rb.forced_releases
    assert ra.complete == rb.complete
    assert np.array_equal(ra.task_end_s, rb.task_end_s, equal_nan=True)


@st.composite
def data_footprints(draw, data_lines: int = 4096):
    """A random workload of :func:`test_sandbox.workloads` whose footprint also has loads and
    stores (random kinds, lines below ``data_lines``) and a random private mask (what moves
    with a copy)."""
    w, fp = draw(workloads())
    kinds, lines, private = {}, {}, {}
    for v in fp.icount:
        n = len(fp.icount[v])
        rng = np.random.default_rng(draw(st.integers(0, 2**31)))
        kinds[v] = rng.integers(0, 3, n).astype(np.uint8)
        lines[v] = np.where(kinds[v] == 0, fp.lines[v],
                            rng.integers(0, data_lines, n)).astype(np.uint32)
        private[v] = rng.random(n) < 0.5
    return w, Footprint(fp.line, True, fp.icount, lines, kinds, private)


def _both(w, fp, policy, cfg):
    runs = [simulate(w, fp, get_policy(policy), cfg, engine=e) for e in ENGINES]
    return runs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data_footprints(), st.sampled_from(sorted(REGISTRY)), st.integers(1, 3),
       st.integers(1, 3), st.integers(3, 50), st.sampled_from(["shared", "per-copy"]))
def test_compiled_equals_plain_on_random_workloads(wf, policy, cores, copies, max_chunk,
                                                    kernel_data):
    w, fp = wf
    cfg = SandboxConfig(machine(cores), copies=copies, max_chunk=max_chunk,
                        kernel_data=kernel_data)
    assert_same_runs(*_both(w, fp, policy, cfg))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data_footprints(), st.sampled_from(sorted(REGISTRY)), st.integers(1, 3),
       st.integers(1, 3), st.integers(3, 50), st.floats(0.5, 40.0),
       st.lists(st.tuples(st.integers(0, 60), st.integers(1, 30)), min_size=1, max_size=4))
def test_compiled_equals_plain_on_the_traced_switch_path(wf, policy, cores, copies, max_chunk,
                                                         per, spans):
    """Switches on the traced path, which the compiled engine runs in the call of the chunk
    that follows; a switch may wrap around the path's end, more than once when it is longer
    than the path."""
    w, fp = wf
    v = w.vcpus[0]
    runs = np.array([(v, a, a + n) for a, n in spans], dtype=np.int64)
    path = TracedSwitch(switches=100, switch_path=int(round(per * 100)), runs=runs)
    cfg = SandboxConfig(machine(cores), copies=copies, max_chunk=max_chunk, switch_cycles=None)
    runs = [simulate(w, fp, get_policy(policy), cfg, switch_path=path, engine=e)
            for e in ENGINES]
    assert_same_runs(*runs)


#: Hierarchies the chunk kernel runs by its other path (access by access: inclusion, coherence,
#: random replacement; L1s wider than a vector) or with other replacement and geometry.
HIERARCHY_VARIANTS = [dict(inclusive=True), dict(coherence=True), dict(policy="random"),
                      dict(policy="fifo"), dict(l1_ways=1), dict(l1_ways=32, lower_ways=8)]


@pytest.mark.parametrize("hier", HIERARCHY_VARIANTS, ids=lambda h: ",".join(f"{k}={v}"
                                                                          for k, v in h.items()))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data_footprints(data_lines=64), st.sampled_from(sorted(REGISTRY)), st.integers(2, 3),
       st.integers(1, 3), st.integers(3, 50))
def test_compiled_equals_plain_on_other_hierarchies(hier, wf, policy, cores, copies, max_chunk):
    """Identity whatever the hierarchy: the engines share the cache models, not the code that
    calls them. Several cores and few data lines, so that cores share lines (coherence and
    inclusion act)."""
    w, fp = wf
    cfg = SandboxConfig(machine(cores, **hier), copies=copies, max_chunk=max_chunk)
    assert_same_runs(*_both(w, fp, policy, cfg))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data_footprints(), st.data())
def test_item_streams_hold_the_plain_accesses(wf, data):
    """A chunk's accesses from the item streams are the plain engine's (``accesses``) for any
    range of any item, before the copy's data offset."""
    w, fp = wf
    eng = Engine(w, fp, get_policy("linux"), SandboxConfig(machine(1)))
    s = item_streams(w, fp)
    for _ in range(10):
        i = data.draw(st.integers(0, len(w) - 1))
        n = int(w.insns[i])
        lo = data.draw(st.integers(0, n))
        hi = data.draw(st.integers(lo, n))
        addr, kind = eng.accesses(i, lo, hi)
        p0, p1 = int(s.ptr[i]), int(s.ptr[i + 1])
        a = p0 + int(np.searchsorted(s.off[p0:p1], lo))
        b = p0 + int(np.searchsorted(s.off[p0:p1], hi))
        assert np.array_equal(s.line[a:b].astype(np.uint64) << np.uint64(s.shift), addr)
        assert np.array_equal(s.kind[a:b], kind)


@pytest.fixture(scope="module")
def dss_mem():
    """A shipped trace with data accesses, wake-ups and items in several runs."""
    return prepare(DATA / "dss-mem")


@pytest.mark.parametrize("policy", sorted(REGISTRY))
def test_compiled_equals_plain_on_a_shipped_trace(dss_mem, policy):
    """Every registered policy, the traced switch path, 2X on 4 cores, a 1-epoch window."""
    t = dss_mem
    pol = get_policy(policy)
    cores = 4 * pol.core_factor
    cfg = SandboxConfig(table2_machine(cores), copies=copies_for(2, 4, len(t.workload.vcpus)),
                        max_epochs=1, **sandbox_costs("traced", None, t.meta["switch"]))
    streams = item_streams(t.workload, t.footprint)
    runs = [simulate(t.workload, t.footprint, get_policy(policy), cfg, t.events,
                     switch_path=t.meta["switch"], engine=e, streams=streams) for e in ENGINES]
    assert runs[0].total.instructions.sum() > 0
    assert_same_runs(*runs)


def test_an_unknown_engine_is_named():
    w, fp = tiny([[(0, 10, 0, FIRST)]])
    with pytest.raises(ValueError, match="engine must be one of compiled, plain"):
        simulate(w, fp, get_policy("linux"), SandboxConfig(machine(1)), engine="fast")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["append", "head", "insert", "pop", "del",
                                           "remove"]),
                          st.integers(0, 2), st.integers(0, 20)), max_size=40),
       st.booleans())
def test_a_run_queue_counts_its_interrupts_and_bottom_halves(ops, bisect):
    """RunQueue's counts (async items, threads, items per type), first async item and every
    item's position equal a scan of the list after any sequence of changes (with ``bisect``,
    found by the order keys however short the queue)."""
    from pysched.sandbox import runqueue
    from pysched.sandbox.runqueue import RunQueue
    from pysched.sandbox.simview import Work
    from pysched.superfunctions.functype import Category
    scan_len = runqueue._SCAN_LEN
    runqueue._SCAN_LEN = 0 if bisect else scan_len
    try:
        _run_queue_ops(RunQueue(), ops, Work, Category)
    finally:
        runqueue._SCAN_LEN = scan_len


def _run_queue_ops(q, ops, Work, Category):
    for op, what, at in ops:
        # Work items, equal only to themselves (as the engine's), whatever their attributes
        wk = Work()
        wk.is_async, wk.type_id = what > 0, at % 3
        wk.category = int(Category.INTERRUPT) if what == 1 else int(Category.BOTTOM_HALF)
        if op == "append":
            q.append(wk)
        elif op == "head":
            q.insert(0, wk)
        elif op == "insert":
            q.insert(at % (len(q) + 1), wk)
        elif q:
            k = at % len(q)
            if op == "pop":
                q.pop(k)
            elif op == "del":
                del q[k]
            else:
                q.remove(q[k])
        assert q.irqs == sum(w.is_async and w.category == int(Category.INTERRUPT) for w in q)
        assert q.bhs == sum(w.is_async and w.category != int(Category.INTERRUPT) for w in q)
        irq = [k for k, w in enumerate(q) if w.is_async and w.category == int(Category.INTERRUPT)]
        bh = [k for k, w in enumerate(q) if w.is_async]
        assert q.irq_items == [q[k] for k in irq]  # the very items, in queue order
        assert q.bh_items == [w for w in q if w.is_async and w.category != int(Category.INTERRUPT)]
        assert q.first_async() == (irq or bh or [None])[0]
        assert q.first_async(bottom_halves=False) == (irq or [None])[0]
        assert q.threads == sum(not w.is_async for w in q)
        types = [w.type_id for w in q]
        assert q.type_count == {t: types.count(t) for t in set(types)}
        assert [q.position(w) for w in q] == list(range(len(q)))
    with pytest.raises(TypeError, match="run queue changes through"):
        q.extend([])


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=12),
       st.integers(0, 11))
def test_next_idle_is_the_first_idle_core_in_cyclic_order(cores, start):
    """SimView.next_idle equals the plain loop over the cores after ``start``."""
    from types import SimpleNamespace

    from pysched.sandbox.simview import SimView
    start %= len(cores)
    engine = SimpleNamespace(core_item=[0 if busy else -1 for busy, _ in cores],
                             queues=[[1] if queued else [] for _, queued in cores])
    sim = SimView(engine)
    n = len(cores)
    want = next((c for c in ((start + k) % n for k in range(1, n))
                 if engine.core_item[c] < 0 and not engine.queues[c]), -1)
    assert sim.next_idle(start) == want


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3)), min_size=1, max_size=12),
       st.lists(st.integers(0, 11), min_size=1, max_size=12))
def test_least_loaded_and_queued_cores_equal_the_plain_loops(cores, among):
    """SimView.least_loaded equals the least (queued + running, core) of ``among``, and
    queued_cores the cores with a non-empty queue."""
    from types import SimpleNamespace

    from pysched.sandbox.simview import SimView
    among = [c % len(cores) for c in among]
    engine = SimpleNamespace(core_item=[0 if busy else -1 for busy, _ in cores],
                             queues=[[1] * k for _, k in cores])
    sim = SimView(engine)
    load = {c: len(engine.queues[c]) + (engine.core_item[c] >= 0) for c in among}
    assert sim.least_loaded(among) == min(among, key=lambda c: (load[c], c))
    assert sim.queued_cores() == [c for c in range(len(cores)) if engine.queues[c]]
