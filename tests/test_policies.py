"""Scheduling policies on hand-made workloads whose right decisions are known."""
from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sandbox_factory import FIRST, START, tiny
from test_sandbox import check_invariants, machine

from pysched.policies import get_policy
from pysched.policies.schedtask import SchedTask
from pysched.sandbox import SandboxConfig
from pysched.sandbox.engine import Engine
from pysched.sandbox.runqueue import RunQueue
from pysched.sandbox.simview import Work
from pysched.superfunctions.functype import Category


def _two_syscall_types(rounds: int = 60):
    # Four threads: two call system call type 1 and two type 2, in long loops with little
    # application code (type 0) in between.
    threads = []
    for t in range(4):
        sc = 1 + t % 2
        items = [(0, 40, 0, FIRST)]
        for _ in range(rounds):
            items += [(0, 3000, sc, START), (0, 40, 0, START)]
        threads.append(items)
    return tiny(threads, ntypes=3)


def test_schedtask_keeps_two_system_call_types_on_their_own_cores():
    w, fp = _two_syscall_types()
    # stealing would move similar work; TMigrate's charge would tip some epochs' fractions
    # past 3/4 (type 1 then gets both cores, sharing one with type 2)
    pol = get_policy("schedtask:stealing=none:tmigrate=0:talloc=0")
    eng = Engine(w, fp, pol, SandboxConfig(machine(2), epoch_s=2e-5, max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    # from the first allocation on, each epoch's system calls run only on their type's cores,
    # and the two types never share one
    table = dict(pol.history)
    checked = 0
    for g, c, t0, t1, lo, hi in eng.log:
        e = int(t0 // 2e-5)
        ty = int(w.type_id[g % eng.n])
        if e >= 2 and ty in (1, 2) and lo == 0 and {1, 2} <= set(table[e - 1]) \
                and table[e - 1] == table[e - 2]:
            a = table[e - 1]
            assert not set(a[1]) & set(a[2])
            assert c in a[ty]
            checked += 1
    assert checked > 50


def test_linux_runs_system_calls_where_their_thread_runs():
    w, fp = _two_syscall_types(rounds=5)
    eng = Engine(w, fp, get_policy("linux"), SandboxConfig(machine(2), max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    # without balancing moves, each thread's items run on one core
    assert eng.snapshot(eng.now).migrations.sum() <= 4


def _switches(pol, w, fp, cores=1):
    eng = Engine(w, fp, pol, SandboxConfig(machine(cores), max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    return int(eng.snapshot(eng.now).switches.sum()), eng


def test_a_system_call_boundary_is_no_scheduling_point_for_linux():
    # Two threads of 5 system-call rounds each on one core: about 30 us of work, far below
    # one time slice and the wake-up granularity, so Linux runs the first thread to its end and
    # then the second: two switches (the first thread's start counts as one), not one per
    # SuperFunction boundary.
    w2, fp2 = tiny(list(_thread_items(2, rounds=5)), ntypes=3)
    n, _ = _switches(get_policy("linux"), w2, fp2)
    assert n == 2

    class PickEverywhere(type(get_policy("linux"))):
        pick_at_boundaries = True

    n_pick, _ = _switches(PickEverywhere(), w2, fp2)
    assert n_pick > 10  # the old rule: the least run time is re-picked at every boundary


def _thread_items(nthreads, rounds):
    for t in range(nthreads):
        items = [(0, 40, 0, FIRST)]
        for _ in range(rounds):
            items += [(0, 3000, 1 + t % 2, START), (0, 40, 0, START)]
        yield items


def test_linux_wakeup_preemption_comes_before_the_slice_ends():
    # Two CPU-bound threads on one core (6 ms of work each at about 2 G instructions/s): the
    # second, queued with no run time, preempts the first once the first's vruntime is ahead
    # by the wake-up granularity (1 ms at one core), before the 3 ms slice of two runnable
    # threads would end.
    w, fp = tiny([[(0, 12_000_000, 0, FIRST)], [(0, 12_000_000, 0, FIRST)]], ntypes=1)
    eng = Engine(w, fp, get_policy("linux"), SandboxConfig(machine(1), max_chunk=20_000))
    eng.log = []
    eng.run()
    starts = sorted((t0, g) for g, c, t0, t1, lo, hi in eng.log if lo == 0)
    first = starts[0][1]
    ran = sum(t1 - t0 for g, c, t0, t1, lo, hi in eng.log if g == first and t1 <= starts[1][0])
    assert 1e-3 <= ran < 1.1e-3
    assert starts[1][0] < 3e-3


def _irq_start(w, fp, category: Category):
    """Run ``w`` (item 3 its only interrupt-like item, made ``category``) under SchedTask on
    one core; the engine and when item 3 started."""
    w.category[3] = int(category)
    w.type_category[w.type_id[3]] = int(category)
    eng = Engine(w, fp, get_policy("schedtask"), SandboxConfig(machine(1), max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    return eng, min(t0 for g, c, t0, t1, lo, hi in eng.log if g == 3)


def test_schedtask_takes_a_hardware_interrupt_at_once_and_queues_bottom_halves():
    # One core, three threads of long application items queued: the interrupt released at
    # 20 us starts at the end of the running chunk (1,000 instructions, well under 2 us), not
    # behind the queued SuperFunctions; the bottom half released with it waits its turn.
    threads = [[(0, 200_000, 0, FIRST)] for _ in range(3)]
    eng, start = _irq_start(*tiny(threads, [(0, 500, 1, 2e-5)], ntypes=3), Category.INTERRUPT)
    assert 2e-5 <= start < 2e-5 + 2e-6
    st = eng.snapshot(eng.now)
    assert (st.irqs, st.bhs) == (1, 0)
    assert st.irq_latency_s == pytest.approx(start - 2e-5)
    eng, start = _irq_start(*tiny(threads, [(0, 500, 2, 2e-5)], ntypes=3),
                            Category.BOTTOM_HALF)
    first_done = min(max(t1 for g2, c, t0, t1, lo, hi in eng.log if g2 == g) for g in range(3))
    assert start >= first_done  # queued behind the SuperFunctions before it
    st = eng.snapshot(eng.now)
    assert (st.irqs, st.bhs) == (0, 1)
    assert st.bh_latency_s == pytest.approx(start - 2e-5)


class _FakeWorkload(SimpleNamespace):
    """Types, their categories, instructions; ten items."""

    def __len__(self) -> int:
        return 10


class _FakeSim:
    """Queues and moves, as SimView offers them."""

    def __init__(self, queues, ntypes, cats):
        self.queues = [RunQueue(q) for q in queues]
        self.ncores = len(queues)
        self.workload = _FakeWorkload(types=np.arange(ntypes, dtype=np.uint64),
                                      type_category=np.array(cats, dtype=np.int8),
                                      total_insns=1000)
        self.moved = []

    def queue(self, c):
        return self.queues[c]

    def queue_len(self, c):
        return len(self.queues[c])

    def queued_cores(self):
        return [c for c, q in enumerate(self.queues) if q]

    def queued_threads(self):
        return tuple(q.threads for q in self.queues)

    def task_runtimes(self):
        return [0.0] * 10

    def running(self, c):
        return None

    def move(self, wk, dst):
        for q in self.queues:
            if wk in q:
                q.remove(wk)
        self.queues[dst].append(wk)
        self.moved.append((wk.type_id, dst))


def _work(type_id):
    wk = Work()
    wk.type_id, wk.task, wk.category, wk.is_async = type_id, 0, 0, False
    return wk


def _policy(queues, stealing="similar", steal="same"):
    pol = SchedTask(stealing=stealing, steal=steal, talloc=0)
    sim = _FakeSim(queues, 4, [0, 0, 0, 3])
    pol.attach(sim)
    # core 1 owns type 1; type 2 overlaps type 1 more than type 0 does
    pol.alloc = {0: [0], 1: [1], 2: [0], 3: [0]}
    pol.core_types = [{0, 2, 3}, {1}]
    pol.overlap = {1: [(2, 40), (0, 5)]}
    pol.set_averages(np.ones(4))
    return pol, sim


def test_an_idle_core_steals_same_work_before_similar_work():
    q0 = [_work(2), _work(2), _work(1), _work(0)]
    pol, sim = _policy([q0, []])
    pol.steal(1)
    assert sim.moved == [(1, 1)]  # the same-type item, one of it


def test_then_it_steals_half_of_the_most_similar_work():
    q0 = [_work(0), _work(2), _work(2), _work(2), _work(2), _work(0)]
    pol, sim = _policy([q0, []])
    pol.steal(1)
    assert sim.moved == [(2, 1), (2, 1)]  # type 2 (overlap 40) before type 0 (5), half of 4
    pol2, sim2 = _policy([[_work(2), _work(2)], []], stealing="same")
    pol2.steal(1)
    assert sim2.moved == []


def test_the_overlap_table_ranks_every_type_of_its_side_and_zero_overlap_work_is_stolen():
    # types 0-2 are system calls (OS), type 3 application
    pol, sim = _policy([[_work(2), _work(2), _work(3)], []])
    heat = np.zeros((4, 512), dtype=bool)
    heat[0, :10] = heat[1, 5:20] = heat[2, 100:110] = heat[3, 0:20] = True
    pol._overlaps(heat)
    # type 1 shares 5 bits with type 0 and none with type 2; the application type is not ranked
    assert pol.overlap[1] == [(0, 5), (2, 0)]
    assert [t for t, _ in pol.overlap[3]] == []
    pol.steal(1)
    # core 1 owns type 1: no same work, no type 0 queued, so half of the type-2 items
    assert sim.moved == [(2, 1)]


def test_a_new_overlap_table_reorders_the_next_steal():
    # Level 2's order is kept between steals; a new table (the next epoch's) replaces it
    pol, sim = _policy([[_work(0), _work(2)], []])
    pol.steal(1)
    assert sim.moved == [(2, 1)]  # type 2 overlaps type 1 more (40 against 5)
    heat = np.zeros((4, 512), dtype=bool)
    heat[0, :10] = heat[1, 0:20] = heat[2, 100:110] = True
    pol._overlaps(heat)  # now type 0 shares 10 bits with type 1, type 2 none
    sim.queues = [RunQueue([_work(2), _work(0)]), RunQueue([])]
    pol.steal(1)
    assert sim.moved[1:] == [(0, 1)]


def test_steal_any_ranks_the_other_side_after_its_own():
    heat = np.zeros((4, 512), dtype=bool)
    heat[0, :10] = heat[1, 5:20] = heat[2, 100:110] = heat[3, 0:20] = True
    pol, sim = _policy([[_work(3), _work(3), _work(2)], []], steal="any")
    pol._overlaps(heat)
    # the table lists the application type 3 too (15 common bits with type 1); the steal
    # still takes every OS type before it
    assert pol.overlap[1] == [(3, 15), (0, 5), (2, 0)]
    pol.steal(1)
    assert sim.moved == [(2, 1)]
    pol, sim = _policy([[_work(3), _work(3)], []], steal="any")
    pol._overlaps(heat)
    pol.steal(1)
    assert sim.moved == [(3, 1)]  # half of the other side's two
    pol, sim = _policy([[_work(3), _work(3)], []])
    pol._overlaps(heat)
    pol.steal(1)
    assert sim.moved == []  # steal=same never crosses the split


def test_talloc_reallocates_only_when_the_breakup_changes():
    pol, sim = _policy([[], []])
    sim.heatmaps = lambda: np.zeros((4, 512), dtype=bool)
    stats = SimpleNamespace(type_cycles=np.array([10.0, 10.0, 0, 0]),
                            type_items=np.array([1, 1, 0, 0]))
    pol.prev_frac = None
    pol.epoch_end(0, stats)
    assert pol.reallocations == 1 and pol.alloc == {0: [0], 1: [1]}
    stats2 = SimpleNamespace(type_cycles=np.array([10.2, 9.8, 0, 0]),
                             type_items=np.array([1, 1, 0, 0]))
    pol.epoch_end(1, stats2)  # cosine > 0.98: keep the table
    assert pol.reallocations == 1
    stats3 = SimpleNamespace(type_cycles=np.array([1.0, 0, 9.0, 0]),
                             type_items=np.array([1, 0, 1, 0]))
    pol.epoch_end(2, stats3)
    assert pol.reallocations == 2 and pol.alloc[2] == [0, 1] or pol.alloc[2] == [0]


def test_schedtask_parameters_are_checked():
    with pytest.raises(ValueError, match="stealing must be one of none, same, similar"):
        get_policy("schedtask:stealing=sometimes")
    with pytest.raises(ValueError, match="heatmap_bits must be positive"):
        get_policy("schedtask:heatmap_bits=0")
    assert get_policy("schedtask:heatmap_bits=128:stealing=none").heatmap_bits == 128


def test_selective_offload_never_offloads_short_system_calls():
    # one thread alternating a 50-instruction (type 1) and a 500-instruction (type 2) call
    items = [(0, 40, 0, FIRST)]
    for _ in range(20):
        items += [(0, 50, 1, START), (0, 40, 0, START), (0, 500, 2, START), (0, 40, 0, START)]
    w, fp = tiny([items], ntypes=3)
    pol = get_policy("selective-offload")
    eng = Engine(w, fp, pol, SandboxConfig(machine(4)))
    eng.log = []
    eng.run()
    check_invariants(eng)
    where = defaultdict(set)
    for g, c, *_ in eng.log:
        where[int(w.type_id[g % eng.n])].add(c)
    assert where[1] <= set(pol.app_cores)           # short: never offloaded
    assert where[2] & set(pol.os_cores_all)          # long: offloaded once predicted
    assert pol.offloaded == 19                       # every run after the first


def test_schedtask_decisions_are_its_allocation_table_per_epoch():
    w, fp = _two_syscall_types()
    pol = get_policy("schedtask:stealing=none")
    eng = Engine(w, fp, pol, SandboxConfig(machine(2), epoch_s=2e-5, max_chunk=1000))
    eng.run()
    rows = pol.decisions()
    assert rows and {r["epoch"] for r in rows} <= {e for e, _ in pol.history}
    by_epoch = defaultdict(dict)
    for r in rows:
        assert r["cores"] == r["last_core"] - r["first_core"] + 1
        assert r["functype"] == int(w.types[r["type_id"]])
        by_epoch[r["epoch"]][r["type_id"]] = list(range(r["first_core"], r["last_core"] + 1))
    # the rows are exactly the table TAlloc left in force after each epoch
    for e, table in pol.history:
        assert by_epoch.get(e, {}) == table
    # a re-allocation is marked where the table was rebuilt: the first one, and where the
    # breakup's cosine similarity fell below the threshold
    flags = {r["epoch"]: (r["reallocated"], r["similarity"]) for r in rows}
    first = min(flags)
    assert flags[first][0]
    for e, (realloc, sim) in flags.items():
        if e != first and np.isfinite(sim):
            assert realloc == (sim < pol.threshold)
    assert pol.reallocations == sum(1 for _, _, r in pol.talloc if r)


# --- hardware interrupts against bottom halves and other interrupts (issue 13) -----------------

def _irq_runs(policy: str, first: Category, first_insns: int = 200_000):
    """One core: a short thread, then an item of category ``first`` (``first_insns`` long)
    released at 1 us and a 500-instruction hardware interrupt released at 20 us, while the
    first runs. Returns the engine, the chunks per item (t0, t1) and the snapshot."""
    w, fp = tiny([[(0, 100, 0, FIRST)]], [(0, first_insns, 1, 1e-6), (0, 500, 2, 2e-5)],
                 ntypes=3)
    w.category[1] = int(first)
    w.type_category[1] = int(first)
    eng = Engine(w, fp, get_policy(policy), SandboxConfig(machine(1), max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    chunks = defaultdict(list)
    for g, c, t0, t1, lo, hi in eng.log:
        chunks[g].append((t0, t1))
    return eng, {g: sorted(v) for g, v in chunks.items()}, eng.snapshot(eng.now)


@pytest.mark.parametrize("policy", ["linux", "schedtask"])
def test_a_hardware_interrupt_preempts_a_running_bottom_half(policy):
    # Linux runs softirqs with interrupts enabled and section 3 pauses the running
    # SuperFunction for a hardware interrupt: the interrupt starts at the end of the bottom
    # half's chunk (1,000 instructions, well under 2 us), not after its 200,000 instructions
    # (about 100 us); the bottom half resumes as soon as the interrupt ends and is counted once.
    eng, chunks, st = _irq_runs(policy, Category.BOTTOM_HALF)
    irq_start, irq_end = chunks[2][0][0], chunks[2][-1][1]
    assert 2e-5 <= irq_start < 2e-5 + 2e-6
    bh = chunks[1]
    assert bh[0][0] < 2e-5 and bh[-1][1] > irq_end  # it ran before and after the interrupt
    assert min(t0 for t0, _ in bh if t0 >= irq_start) == pytest.approx(irq_end)
    assert (st.irqs, st.bhs) == (1, 1)
    assert st.irq_latency_s == pytest.approx(irq_start - 2e-5)
    assert st.bh_latency_s == pytest.approx(bh[0][0] - 1e-6)


@pytest.mark.parametrize("policy", ["linux", "schedtask"])
def test_a_hardware_interrupt_waits_for_a_running_handler(policy):
    # Linux runs interrupt handlers with interrupts disabled: the second interrupt starts when
    # the first handler ends, not at the end of its chunk.
    eng, chunks, st = _irq_runs(policy, Category.INTERRUPT)
    assert chunks[2][0][0] == pytest.approx(chunks[1][-1][1])
    assert chunks[1][-1][1] > 2e-5 + 2e-6
    assert (st.irqs, st.bhs) == (2, 0)


def test_linux_takes_a_hardware_interrupt_before_a_bottom_half_queued_earlier():
    # One core runs a long thread; a bottom half and then a hardware interrupt are released at
    # the same instant (queued in that order): the interrupt runs first (softirqs run on the
    # way out of the handler), then the bottom half, then the thread again.
    w, fp = tiny([[(0, 200_000, 0, FIRST)]], [(0, 500, 1, 2e-5), (0, 500, 2, 2e-5)], ntypes=3)
    w.category[1] = int(Category.BOTTOM_HALF)
    w.type_category[1] = int(Category.BOTTOM_HALF)
    eng = Engine(w, fp, get_policy("linux"), SandboxConfig(machine(1), max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    start = {g: min(t0 for g2, c, t0, *_ in eng.log if g2 == g) for g in (1, 2)}
    assert start[2] < start[1]


@pytest.mark.parametrize("policy", ["linux", "schedtask", "slicc"])
def test_an_interrupted_thread_resumes_after_the_handler(policy):
    # One core, thread A running and thread B queued; a hardware interrupt at 20 us interrupts
    # A. Linux returns from the handler to A (no TIF_NEED_RESCHED: A's slice is not over and B
    # is not far enough behind to preempt it), and section 3 resumes the paused SuperFunction:
    # A goes on right after the interrupt and runs to its end before B starts, with one switch
    # (A to B) after the first.
    w, fp = tiny([[(0, 200_000, 0, FIRST)], [(0, 200_000, 0, FIRST)]], [(0, 500, 1, 2e-5)])
    eng = Engine(w, fp, get_policy(policy), SandboxConfig(machine(1), max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    first = eng.log[0][0]  # the thread that started
    other = 1 - first
    irq_end = max(t1 for g, c, t0, t1, *_ in eng.log if g == 2)
    after = min((t0, g) for g, c, t0, *_ in eng.log if t0 >= irq_end)
    assert after == (pytest.approx(irq_end), first)
    assert min(t0 for g, c, t0, *_ in eng.log if g == other) == \
        pytest.approx(max(t1 for g, c, t0, t1, *_ in eng.log if g == first))
    assert int(eng.snapshot(eng.now).switches.sum()) == 2


def _vector_work(number: int, category: Category = Category.INTERRUPT) -> Work:
    wk = _work(3)
    wk.category, wk.is_async, wk.number, wk.task = int(category), True, number, -1
    return wk


def test_schedtask_routes_device_interrupts_only():
    # 5.2 programs the interrupt controller, which steers device vectors; the local APIC timer
    # (0xec), IPIs (0xfd reschedule) and exceptions (14, page fault) stay where they arrive.
    pol, _ = _policy([[], []])
    pol.alloc[3] = [1]  # the interrupt type's allocated core
    for vec in (0x26, 0x23, 0xeb, -1):
        assert pol.route_interrupt(_vector_work(vec), 0) == 1, vec
    for vec in (0xec, 0xfd, 0xfb, 14, 0x20, 0x80):
        assert pol.route_interrupt(_vector_work(vec), 0) == 0, vec
    # a bottom half is a SuperFunction that TMigrate places, whatever its number
    assert pol.route_interrupt(_vector_work(0xec, Category.BOTTOM_HALF), 0) == 1


def test_schedtask_leaves_interrupts_where_they_arrive_before_the_first_talloc():
    # Two vCPUs on two cores, all within the first epoch: every interrupt of vCPU 1 runs on
    # core 1 (its home), local APIC timer and device interrupt alike: before the first TAlloc
    # there is no table, and every SuperFunction runs locally.
    irqs = [(1, 500, 2, 1e-6 * k) for k in range(1, 6)] + [(1, 500, 3, 3e-6)]
    w, fp = tiny([[(0, 50_000, 0, FIRST)], [(1, 50_000, 0, FIRST)]], irqs, vcpus=(0, 1),
                 ntypes=4)
    w.number[2:7] = 0xec
    w.number[7] = 0x26
    eng = Engine(w, fp, get_policy("schedtask"), SandboxConfig(machine(2), max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    where = defaultdict(set)
    for g, c, *_ in eng.log:
        where[g].add(c)
    assert all(where[g] == {1} for g in range(2, 8))
    # with a table, a device interrupt whose type is absent from it goes to core 0 (5.2)
    pol, _ = _policy([[], []])
    pol.alloc[0] = [1]
    assert pol.route_interrupt(_vector_work(0x26), 1) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=10),
       st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5]), min_size=6, max_size=6),
       st.dictionaries(st.integers(0, 5), st.sampled_from([-0.5, 0.0, 0.25])),
       st.integers(0, 5))
def test_cfs_inlined_vruntime_equals_the_key(queue, runtimes, lags, running):
    """Cfs's pick and wakeup_preempt with the default key (vruntime, inlined) answer as with
    the same key passed as a function (the general path)."""
    from pysched.policies.cfs import Cfs
    items = []
    for is_async, task in queue:
        wk = Work()
        wk.is_async, wk.task = is_async, -1 if is_async else task
        items.append(wk)
    sim = SimpleNamespace(ncores=4, queue=lambda c: items, task_runtime=runtimes.__getitem__,
                          task_runtimes=lambda: runtimes)
    run = Work()
    run.is_async, run.task = False, running
    answers = []
    for general in (False, True):
        cfs = Cfs()
        cfs.attach(sim)
        for t, v in lags.items():
            cfs._lag[t] = v
        if general:
            cfs.key = lambda t, cfs=cfs: cfs.vruntime(t)
        answers.append((cfs.pick(items), cfs.wakeup_preempt(run, 0)))
    assert answers[0] == answers[1]


def test_queues_sharing_a_tally_count_their_own_threads():
    """RunQueue's tally: one list, a slot per queue, each slot its queue's threads."""
    tally = [0, 0]
    a, b = RunQueue(tally=tally, slot=0), RunQueue(tally=tally, slot=1)
    irq = _work(0)
    irq.is_async, irq.category = True, int(Category.INTERRUPT)
    a.append(_work(1))
    a.insert(0, irq)
    b.append(_work(2))
    b.insert(0, _work(1))
    assert tally == [1, 2] and (a.threads, b.threads) == (1, 2)
    b.pop()
    del a[0]  # the interrupt
    assert tally == [1, 1]


def test_cfs_steal_pulls_the_last_thread_of_the_first_most_loaded_core():
    """newidle_balance as a scan in core order: of cores 1 and 3 (two threads each, beside
    interrupts), core 1 gives its last thread; one queued thread and no running one: none."""
    from pysched.policies.cfs import Cfs

    def irq():
        wk = _work(3)
        wk.is_async, wk.category = True, int(Category.INTERRUPT)
        return wk

    queues = [[], [_work(1), irq(), _work(2)], [irq(), irq(), irq(), _work(0)],
              [_work(0), _work(1)]]
    for c in (0, 2):
        sim = _FakeSim(queues, 4, [0, 0, 0, 3])
        cfs = Cfs()
        cfs.attach(sim)
        cfs.steal(c)
        assert sim.moved == [(2, c)]  # core 1's last thread, past its interrupt
    sim = _FakeSim([[], [irq(), _work(1)]], 4, [0, 0, 0, 3])
    cfs = Cfs()
    cfs.attach(sim)
    cfs.steal(0)
    assert sim.moved == []


def test_cfs_balancing_reads_each_cores_queued_threads():
    """During a replay the per-core thread counts CFS's steal and balance read equal a scan
    of the queues, and the steal pulls from the first of the most loaded other cores."""
    threads = [[(0, 40, 0, FIRST)] + [(0, 2000, 1 + t % 2, START), (0, 40, 0, START)] * 8
               for t in range(9)]
    w, fp = tiny(threads, interrupts=[(0, 300, 3, 1e-6 * k) for k in range(1, 40, 3)],
                 ntypes=4)
    pol = get_policy("linux")
    eng = Engine(w, fp, pol, SandboxConfig(machine(4), epoch_s=2e-5, max_chunk=1000))
    cfs, seen = pol.cfs, []
    steal, balance = cfs.steal, cfs.balance

    def scan():
        counts = tuple(sum(not wk.is_async for wk in eng.queues[c]) for c in range(4))
        assert cfs.sim.queued_threads() == counts
        return counts

    def checked_steal(core):
        counts = list(scan())
        counts[core] = 0
        before = [len(q) for q in eng.queues]
        steal(core)
        after = [len(q) for q in eng.queues]
        if after != before:  # it pulled one thread from the first of the most loaded
            src = next(c for c in range(4) if after[c] < before[c])
            assert counts[src] == max(counts) and counts.index(max(counts)) == src
            assert after[core] == before[core] + 1
        seen.append(counts)

    def checked_balance():
        scan()
        balance()
        seen.append(scan())

    cfs.steal, cfs.balance = checked_steal, checked_balance
    eng.log = []
    eng.run()
    check_invariants(eng)
    assert len(seen) > 10 and any(max(c) > 1 for c in seen)
