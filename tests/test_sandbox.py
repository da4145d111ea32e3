"""The scheduler sandbox: workload model, engine invariants under every policy, a plain-Python
twin of the replay, and the as-traced replay of a real shipped trace."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sandbox_factory import FIRST, START, tiny
from test_models_caches import small_hier
from twins.sandbox import slow_as_traced

from pysched.models.cores.config import big_core
from pysched.models.machine import MachineConfig
from pysched.policies import REGISTRY, describe, get_policy
from pysched.sandbox import SandboxConfig, simulate
from pysched.sandbox.engine import Engine
from pysched.sandbox.switch_cost import TracedSwitch

DATA = Path(__file__).resolve().parents[1] / "data"


def machine(cores: int, **hier) -> MachineConfig:
    return MachineConfig(small_hier(cores=cores, **hier), tuple(big_core() for _ in range(cores)))


def run_logged(w, fp, policy: str, cores: int, load: int = 1, max_chunk: int = 20_000):
    eng = Engine(w, fp, get_policy(policy), SandboxConfig(machine(cores), copies=load,
                                                          max_chunk=max_chunk))
    eng.log = []
    epochs = eng.run()
    return eng, epochs


def check_invariants(eng: Engine) -> None:
    """What must hold whatever the policy (issue 10, item 7)."""
    w, n = eng.w, eng.n
    chunks = defaultdict(list)
    for g, c, t0, t1, lo, hi in eng.log:
        chunks[g].append((t0, t1, lo, hi, c))
    assert eng.done_items == n * eng.K
    for g in range(n * eng.K):
        cs = sorted(chunks[g])
        # every instruction of every copy runs exactly once, in order
        assert [(lo, hi) for _, _, lo, hi, _ in cs] == \
            list(zip([0] + [hi for *_, hi, _ in cs[:-1]], [hi for *_, hi, _ in cs]))
        assert cs[-1][3] == w.insns[g % n]
        # an item never runs on two cores at once
        for a, b in zip(cs, cs[1:]):
            assert a[1] <= b[0] + 1e-15
    first = {g: min(x[0] for x in cs) for g, cs in chunks.items()}
    last = {g: max(x[1] for x in cs) for g, cs in chunks.items()}
    for copy in range(eng.K):
        base = copy * n
        # a thread's work stays in order
        for t in range(w.ntasks):
            its = w.task_items[w.task_ptr[t]:w.task_ptr[t + 1]]
            for a, b in zip(its, its[1:]):
                assert last[base + a] <= first[base + b] + 1e-15
        # no woken item runs before its waker reached the wake-up: the end of the waker's
        # chunk that ends at the offset (one does for every offset, 0 included)
        for i in np.flatnonzero(w.dep_item >= 0).tolist():
            d, off = int(w.dep_item[i]), int(w.dep_offset[i])
            ends = [t1 for t0, t1, lo, hi, c in chunks[base + d] if hi == off]
            assert ends, f"no chunk of waker {base + d} ends at its wake-up offset {off}"
            reach = min(ends)
            assert first[base + i] >= reach - 1e-15


@st.composite
def workloads(draw):
    nthreads = draw(st.integers(1, 3))
    threads = []
    for _ in range(nthreads):
        k = draw(st.integers(1, 4))
        items = []
        for j in range(k):
            ty = 0 if j % 2 == 0 else draw(st.integers(1, 3))
            items.append((0, draw(st.integers(1, 60)), ty, FIRST if j == 0 else START))
        threads.append(items)
    nirq = draw(st.integers(0, 3))
    irqs = [(0, draw(st.integers(1, 40)), 4, draw(st.floats(0.0, 2e-7))) for _ in range(nirq)]
    n = sum(len(t) for t in threads) + nirq
    # wake-ups only from items listed earlier (the trace's order has no cycles)
    deps = []
    owner = [t for t, lst in enumerate(threads) for _ in lst] + [-1] * nirq
    sizes = [x[1] for lst in threads for x in lst] + [x[1] for x in irqs]
    for i in range(1, n):
        if draw(st.booleans()) and draw(st.booleans()):
            waker = draw(st.integers(0, i - 1))
            if owner[waker] != owner[i] or owner[i] < 0:
                deps.append((i, waker, draw(st.integers(0, sizes[waker]))))
    return tiny(threads, irqs, deps, ntypes=5)


def _offset0_wakeup():
    """Hypothesis's falsifying example of the wake-up at offset 0 (see the test below): thread
    0's first item wakes interrupt 7 before its first instruction."""
    threads = [[(0, 1, 0, FIRST), (0, 1, 1, START)],
               [(0, 1, 0, FIRST), (0, 1, 1, START), (0, 1, 0, START), (0, 1, 1, START)]]
    return tiny(threads, [(0, 1, 4, 0.0)] * 3, deps=[(7, 0, 0)], ntypes=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(_offset0_wakeup(), "disaggregate-os", 2, 1, 3)
@given(workloads(), st.sampled_from(sorted(REGISTRY)), st.integers(1, 3), st.integers(1, 2),
       st.integers(3, 50))
def test_invariants_hold_for_every_policy(wf, policy, cores, load, max_chunk):
    w, fp = wf
    eng, epochs = run_logged(w, fp, policy, cores, load, max_chunk)
    check_invariants(eng)
    assert eng.forced == 0
    total = epochs[0]
    for e in epochs[1:]:
        total = total + e
    assert total.instructions.sum() == w.total_insns * load
    assert total.cache.served.sum() == sum(len(fp.icount[v]) for v in w.vcpus) * load
    # the stall cycles split by access kind and level add up to the stall cycles, epoch by
    # epoch, and an L1 hit stalls for nothing
    for e in epochs:
        np.testing.assert_allclose(e.stall_split_cycles.sum(axis=(1, 2)), e.stall_cycles,
                                   rtol=1e-9, atol=1e-6)
        assert (e.stall_split_cycles[:, :, 0] == 0).all()


@settings(max_examples=25, deadline=None)
@given(workloads(), st.integers(3, 50))
def test_engine_agrees_with_its_plain_python_twin(wf, max_chunk):
    w, fp = wf
    m = machine(1)
    res = simulate(w, fp, get_policy("as-traced"), SandboxConfig(m, max_chunk=max_chunk))
    cycles, served = slow_as_traced(w, fp, m, 1000)
    assert res.total.cycles.sum() == pytest.approx(cycles)
    assert res.total.cache.served.tolist() == served.tolist()


@settings(max_examples=25, deadline=None)
@given(workloads(), st.integers(3, 50), st.floats(0.5, 40.0),
       st.lists(st.tuples(st.integers(0, 60), st.integers(1, 30)), min_size=1, max_size=4))
def test_traced_switch_path_agrees_with_the_twin(wf, max_chunk, per, spans):
    """Each switch runs the next ``per_switch`` instructions of the path through the caches."""
    w, fp = wf
    v = w.vcpus[0]
    runs = np.array([(v, a, a + n) for a, n in spans], dtype=np.int64)
    path = TracedSwitch(switches=100, switch_path=int(round(per * 100)), runs=runs)
    m = machine(1)
    res = simulate(w, fp, get_policy("as-traced"),
                   SandboxConfig(m, max_chunk=max_chunk, switch_cycles=None), switch_path=path)
    cycles, served = slow_as_traced(w, fp, m, None, path)
    assert res.total.cycles.sum() == pytest.approx(cycles)
    assert res.total.cache.served.tolist() == served.tolist()
    assert res.total.switch_insns.sum() == round(res.total.switches.sum() * path.per_switch)


def test_wakeup_waits_for_the_waker_and_a_free_core_runs_it_early():
    # Thread 0: a long application item; thread 1 sleeps until thread 0 is 100 instructions in.
    w, fp = tiny([[(0, 1000, 0, FIRST)], [(0, 10, 1, FIRST), (0, 50, 2, START)]],
                 deps=[(2, 0, 100)])
    eng, _ = run_logged(w, fp, "linux", cores=2, max_chunk=400)
    check_invariants(eng)
    t_wake = min(t1 for g, c, t0, t1, lo, hi in eng.log if g == 0 and hi >= 100)
    start2 = min(t0 for g, c, t0, t1, lo, hi in eng.log if g == 2)
    end0 = max(t1 for g, c, t0, t1, lo, hi in eng.log if g == 0)
    assert t_wake <= start2 < end0  # woken by the waker's progress, ran beside it


def test_a_wakeup_at_offset_0_waits_for_the_waker_to_be_switched_in():
    # Item 0 wakes interrupt 7 at offset 0; disaggregate-os routes the interrupt to its OS
    # core, idle by then. The waker reaches offset 0 once it has paid its switch-in (1,000
    # cycles), not when its core picks it: the interrupt starts then, not earlier, and not a
    # chunk later (at the end of the waker's first instruction).
    w, fp = _offset0_wakeup()
    eng, _ = run_logged(w, fp, "disaggregate-os", cores=2, max_chunk=3)
    check_invariants(eng)
    (t0, t1, c), = [(t0, t1, c) for g, c, t0, t1, lo, hi in eng.log if g == 0 and hi == 0]
    assert t1 - t0 == pytest.approx(eng.cfg.switch_cycles / eng.freq[c])
    start7 = min(t0 for g, c, t0, t1, lo, hi in eng.log if g == 7)
    first_insn = min(t1 for g, c, t0, t1, lo, hi in eng.log if g == 0 and hi == 1)
    assert start7 == pytest.approx(t1) and start7 < first_insn


def test_as_traced_single_core_keeps_traced_order():
    w, fp = tiny([[(0, 30, 0, FIRST), (0, 20, 1, START)], [(0, 25, 0, FIRST)]],
                 interrupts=[(0, 10, 3, 0.0)])
    eng, _ = run_logged(w, fp, "as-traced", cores=1, max_chunk=7)
    order = []
    for g, *_ in eng.log:
        if not order or order[-1] != g:
            order.append(g)
    assert order == [0, 1, 2, 3]


@pytest.mark.parametrize("cores,copies", [(1, 1), (3, 3), (2, 2)])
def test_as_traced_runs_a_ready_vcpu_when_another_waits(cores, copies):
    """Item 2 (vCPU 0, its first instruction) waits for item 1 (vCPU 1, after item 0's 300): a
    trace start orders one vCPU's items, not two vCPUs', so a core that hosts both runs item 1
    while item 2 waits, and nothing is released by force."""
    w, fp = tiny([[(1, 300, 0, FIRST)], [(1, 100, 0, FIRST)], [(0, 50, 0, FIRST)]],
                 deps=[(2, 1, 10)], vcpus=(0, 1))
    eng, _ = run_logged(w, fp, "as-traced", cores=cores, load=copies, max_chunk=7)
    assert eng.forced == 0
    assert eng.done_items == 3 * copies
    if cores == 1:
        order = []
        for g, *_ in eng.log:
            if not order or order[-1] != g:
                order.append(g)
        assert order == [0, 1, 2]


def test_fixed_input_same_result():
    w, fp = tiny([[(0, 300, 0, FIRST), (0, 80, 1, START), (0, 40, 0, START)],
                  [(0, 200, 0, FIRST)]], interrupts=[(0, 30, 3, 1e-8)], deps=[(3, 1, 20)])
    a = simulate(w, fp, get_policy("linux"), SandboxConfig(machine(2), copies=3))
    b = simulate(w, fp, get_policy("linux"), SandboxConfig(machine(2), copies=3))
    assert len(a.epochs) == len(b.epochs)
    for x, y in zip(a.epochs, b.epochs):
        assert x == y


def test_task_runtimes_is_a_read_only_view_that_follows_the_run():
    w, fp = tiny([[(0, 300, 0, FIRST), (0, 80, 1, START)], [(0, 200, 0, FIRST)]])
    eng, _ = run_logged(w, fp, "linux", 2, load=2)
    sim = eng.policy.sim
    view = sim.task_runtimes()
    assert len(view) == len(eng.task_time) > 0
    assert [view[t] for t in range(len(view))] == \
        [sim.task_runtime(t) for t in range(len(view))]
    assert view[0] > 0
    eng.task_time[0] += 1.0  # the engine's figure, seen through the view
    assert view[0] == sim.task_runtime(0)
    with pytest.raises(TypeError):
        view[0] = 0.0


def test_copy_fairness_compares_the_copies_of_each_thread_only():
    from dataclasses import replace
    w, fp = tiny([[(0, 300, 0, FIRST), (0, 80, 1, START)], [(0, 200, 0, FIRST)]])
    res = simulate(w, fp, get_policy("linux"), SandboxConfig(machine(2), copies=2))
    s = res.total
    # a row per copy, a column per traced thread
    assert s.task_insns.shape == s.task_want_s.shape == (2, w.ntasks)
    assert 0.5 <= s.copy_fairness() <= 1.0
    want = np.ones((2, 2))
    # two threads that differ but whose copies progress alike: fair among copies only
    even = replace(s, task_insns=np.array([[100, 10], [100, 10]]), task_want_s=want)
    assert even.copy_fairness() == pytest.approx(1.0)
    assert even.jain_fairness() == pytest.approx(220 ** 2 / (4 * 20200))
    # thread 0's copies at 100 and 50: (150^2 / (2 * 12500)) = 0.9, weighted by instructions
    uneven = replace(s, task_insns=np.array([[100, 10], [50, 10]]), task_want_s=want)
    assert uneven.copy_fairness() == pytest.approx((0.9 * 150 + 1.0 * 20) / 170)
    # a thread with a copy that never ran is left out; one copy says nothing
    idle = replace(s, task_insns=np.array([[100, 10], [50, 0]]), task_want_s=want)
    assert idle.copy_fairness() == pytest.approx(0.9)
    one = replace(s, task_insns=np.array([[100, 10]]), task_want_s=np.ones((1, 2)))
    assert np.isnan(one.copy_fairness())


def test_registry_and_errors():
    assert set(REGISTRY) >= {"as-traced", "linux"}
    assert "as-traced" in describe()
    with pytest.raises(ValueError, match="unknown policy 'nope'; registered: as-traced"):
        get_policy("nope")
    with pytest.raises(ValueError, match="copies must be a positive integer"):
        SandboxConfig(machine(1), copies=0)


class _Bad(type(get_policy("linux"))):
    name = "bad"

    def sf_start(self, work, core):
        return 99


def test_a_policy_returning_a_bad_core_is_named():
    w, fp = tiny([[(0, 10, 0, FIRST), (0, 10, 1, START)]])
    with pytest.raises(ValueError, match="policy 'bad' returned core 99 from its placement"):
        simulate(w, fp, _Bad(), SandboxConfig(machine(2)))


# --- a real shipped trace ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def dss_mem():
    from pysched.sandbox import build_footprint, build_workload
    from pysched.superfunctions import segment
    from pysched.trace import open_trace
    trace = open_trace(DATA / "dss-mem")
    seg = segment(trace)
    w = build_workload(seg, trace, name="dss")
    return seg, w, build_footprint(trace, w.vcpus)


def test_workload_covers_every_non_scheduler_instruction(dss_mem):
    """Every instruction but the scheduler's and the capture harness's (left out by default:
    pysched.superfunctions.harness; dss-mem's harness is its `roi begin` process's exit)."""
    seg, w, fp = dss_mem
    p = seg.counted_pieces()
    p = p[~p["sched"]]
    assert len(p) < (~seg.pieces["sched"]).sum()  # the harness is there, and left out
    assert w.total_insns == int((p["stop"] - p["start"]).sum())
    assert fp.data  # dss-mem has the mem table: loads and stores are replayed
    # every run is a kept piece (or several adjacent ones)
    for v in w.vcpus:
        runs = sorted(zip(w.run_start[w.run_vcpu == v], w.run_stop[w.run_vcpu == v]))
        pv = p[p["vcpu"] == v].sort_values("start")
        assert sum(b - a for a, b in runs) == int((pv["stop"] - pv["start"]).sum())


def test_as_traced_replays_each_vcpu_in_traced_order(dss_mem):
    seg, w, fp = dss_mem
    eng = Engine(w, fp, get_policy("as-traced"),
                 SandboxConfig(machine(len(w.vcpus)), max_chunk=50_000))
    eng.log = []
    eng.run()
    assert eng.forced == 0  # the trace's own order never waits for a wake-up it has not made
    per_core = defaultdict(list)
    for g, c, t0, t1, lo, hi in eng.log:
        i = g % eng.n
        for r in range(w.run_ptr[i], w.run_ptr[i + 1]):
            before = eng.run_before[r]
            a = max(lo - before, 0)
            b = min(hi - before, w.run_stop[r] - w.run_start[r])
            if a < b:
                per_core[c].append((int(w.run_vcpu[r]), int(w.run_start[r] + a),
                                    int(w.run_start[r] + b)))
    p = seg.counted_pieces()
    p = p[~p["sched"]]
    for k, v in enumerate(w.vcpus):
        got = per_core[k]
        assert all(x[0] == v for x in got)
        # each vCPU's instructions, exactly, in traced order (item by item)
        starts = [x[1] for x in got]
        assert sum(x[2] - x[1] for x in got) == int((p[p.vcpu == v].stop - p[p.vcpu == v].start).sum())
        items = []
        for g, c, *_ in eng.log:
            if c == k and (not items or items[-1] != g):
                items.append(g)
        first = [int(w.run_start[w.run_ptr[g]]) for g in items]
        assert first == sorted(first)
        assert len(set(starts)) == len(starts)


@pytest.mark.parametrize("policy", ["linux", "schedtask"])
def test_real_trace_with_wakeups_keeps_every_invariant(dss_mem, policy):
    seg, w, fp = dss_mem
    assert w.dependencies == "wakeups" and (w.dep_item >= 0).any()
    eng = Engine(w, fp, get_policy(policy), SandboxConfig(machine(4), copies=2))
    eng.log = []
    eng.run()
    check_invariants(eng)  # includes: no woken item starts before its waker's wake-up
    assert eng.forced == 0


def test_effect_rows_keep_only_wakeups_that_took_effect():
    import pandas as pd

    from pysched.sandbox.workload import _effective_wakeups
    wk = pd.DataFrame({"time_ns": [10, 20, 30, 40, 50], "vcpu": [0, 0, 1, 1, 0],
                       "icount": [100, 200, 300, 400, 500], "woken": [7, 7, 8, 7, 9],
                       "kind": [1, 3, 1, 1, 3]})
    got = _effective_wakeups(wk.sort_values("time_ns"))
    # task 7: one effect at 20, placed at its call (vCPU 0, icount 100); the call at 40 had no
    # effect; task 8's call had none either; task 9's effect has no call: its own place
    assert got.values.tolist() == [[20, 0, 100, 7], [50, 0, 500, 9]]
