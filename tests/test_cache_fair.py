"""Seed 003's cache-fair scheduler: the fair miss-rate model on synthetic miss rates, its
decisions on counters whose right answer is known, and a run in the sandbox."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sandbox_factory import FIRST, START, tiny
from test_sandbox import check_invariants, machine

from pysched.policies import get_policy
from pysched.models.cache_fair import fair_ipc, fair_miss_rate, fit_miss_rate
from pysched.sandbox import SandboxConfig
from pysched.sandbox.engine import Engine
from pysched.sandbox.footprint import Footprint
from pysched.sandbox.runqueue import RunQueue
from pysched.superfunctions.functype import Category


def test_the_regression_recovers_a_and_b_from_synthetic_miss_rates():
    rng = np.random.default_rng(3)
    co = rng.uniform(0.001, 0.02, 12)          # sums of co-runners' misses per cycle
    a, b = 0.2, 0.004
    assert fit_miss_rate(a * co + b, co) == pytest.approx((a, b), rel=1e-9)
    noisy = a * co + b + rng.normal(0, 1e-5, len(co))
    fa, fb = fit_miss_rate(noisy, co)
    assert abs(fa - a) < 0.01 and abs(fb - b) < 2e-4
    # equation 2: one co-runner (dual core) and three (four cores)
    assert fair_miss_rate(a, b, 1) == pytest.approx(b / (1 - a))
    assert fair_miss_rate(a, b, 3) == pytest.approx(b / (1 - 3 * a))
    # at the fair point the thread's miss rate equals each co-runner's
    n = 3
    f = fair_miss_rate(a, b, n)
    assert a * n * f + b == pytest.approx(f)


def test_no_fair_point_and_no_regression_are_refused():
    assert np.isnan(fair_miss_rate(0.5, 0.01, 2))     # 1 - a * n = 0
    assert np.isnan(fair_miss_rate(0.1, -0.01, 1))    # negative rate
    with pytest.raises(ValueError, match="do not vary"):
        fit_miss_rate([0.01, 0.02], [0.005, 0.005])
    with pytest.raises(ValueError, match="at least two"):
        fit_miss_rate([0.01], [0.005])


def test_fair_ipc():
    # CPI 2 with 0.002 misses per cycle of 200 cycles (CPI0 = 2 * (1 - 0.4) = 1.2)
    assert fair_ipc(0.5, 0.002, 0.002, 200) == pytest.approx(0.5)
    assert fair_ipc(0.5, 0.002, 0.001, 200) == pytest.approx(1 / (1.2 / (1 - 0.2)))
    assert fair_ipc(0.5, 0.002, 0.003, 200) < 0.5


class FakeSim:
    """Counters and cores as SimView offers them, set by the test."""

    def __init__(self, ncores=2, ntasks=4):
        self.ncores, self.copies, self.now = ncores, 1, 0.0
        self.workload = SimpleNamespace(ntasks=ntasks)
        self.machine = machine(ncores)
        self.insns = np.zeros(ntasks, dtype=np.int64)
        self.cycles = np.zeros(ntasks)
        self.misses = np.zeros(ntasks, dtype=np.int64)
        self.runtime = np.zeros(ntasks)
        self.on = {}  # core -> task

    def task_insns(self, t):
        return int(self.insns[t])

    def task_cycles(self, t):
        return float(self.cycles[t])

    def task_llc_misses(self, t):
        return int(self.misses[t])

    def task_runtime(self, t):
        return float(self.runtime[t])

    def task_runtimes(self):
        return self.runtime

    def running(self, c):
        t = self.on.get(c)
        return None if t is None else SimpleNamespace(task=t, is_async=False)

    def last_core(self, t):
        return next((c for c, u in self.on.items() if u == t), 0)

    def queue_len(self, c):
        return 1

    def core_config(self, c):
        return self.machine.cores[c]

    def level(self, c):
        return -1


def run_pair(sim, pol, a_task, b_task, insns, a_rate, b_rate, cycles=1e6):
    """One run of ``a_task`` beside ``b_task`` with the given misses per cycle."""
    sim.on = {0: a_task, 1: b_task}
    pol.tick()
    for t, r in ((a_task, a_rate), (b_task, b_rate)):
        sim.insns[t] += insns
        sim.cycles[t] += cycles
        sim.misses[t] += int(round(r * cycles))
        sim.runtime[t] += cycles / 2.6e9
    sim.on = {}
    pol.tick()


def test_sampling_keeps_long_runs_and_estimates_after_ten_samples():
    sim = FakeSim()
    pol = get_policy("cache-fair:fair=0:best_effort=3:min_run_insns=1000")
    pol.attach(sim)
    a, b = 0.3, 0.002
    co = [0.001 * k for k in range(1, 13)]
    run_pair(sim, pol, 0, 1, 500, 0.5, 0.5)  # too short: no sample
    assert pol.threads[0].samples_own == []
    for k, c in enumerate(co[:9]):
        run_pair(sim, pol, 0, 1 + k % 2, 5000, a * c + b, c)
    assert len(pol.threads[0].samples_own) == 9 and np.isnan(pol.threads[0].fair_rate)
    run_pair(sim, pol, 0, 2, 5000, a * co[9] + b, co[9])
    # misses are whole numbers: the fit is exact to 1 miss in 1e6 cycles
    assert pol.threads[0].fair_rate == pytest.approx(b / (1 - a), rel=0.01)
    assert len(pol.estimates) == 1


def test_a_thread_below_its_fair_ipc_gets_time_from_a_best_effort_thread():
    sim = FakeSim(ntasks=4)
    pol = get_policy("cache-fair:fair=0:best_effort=2+3:interval_insns=1000")
    pol.attach(sim)
    th = pol.threads[0]
    th.fair_rate = 0.001                # its fair share would give 1 miss per 1,000 cycles
    sim.on = {0: 0, 1: 1}
    # an interval at 0.003 misses per cycle (a cache-hungry co-runner), IPC 0.5
    sim.insns[0], sim.cycles[0], sim.misses[0] = 500_000, 1e6, 3000
    pol.tick()
    assert len(pol.adjustments) == 1
    _, fair_t, be_t, seconds = pol.adjustments[0]
    pen = pol.penalty[0]
    want = (fair_ipc(0.5, 0.003, 0.001, pen) * 1e6 - 500_000) / (0.5 * 2.6e9)
    assert (fair_t, be_t) == (0, 2) and seconds == pytest.approx(want) and seconds > 0
    assert pol.extra[0] == pytest.approx(seconds) and pol.extra[2] == pytest.approx(-seconds)
    # its next slice is longer, the best-effort thread's shorter (not below the minimum)
    base = pol.cfs_slice(0)
    assert pol.time_slice(SimpleNamespace(task=0), 0) == pytest.approx(base + seconds)
    assert pol.time_slice(SimpleNamespace(task=2), 0) == \
        pytest.approx(max(base - seconds, pol.min_slice()))
    assert pol.time_slice(SimpleNamespace(task=1), 0) == base
    # the next interval's compensation goes to the other best-effort thread (round-robin)
    sim.insns[0], sim.cycles[0], sim.misses[0] = 1_000_000, 2e6, 6000
    pol.tick()
    assert pol.adjustments[1][2] == 3
    # once it has run its adjusted slice, the slice is the base one again
    sim.runtime[0] = 1.0
    assert pol.time_slice(SimpleNamespace(task=0), 0) == base


def test_the_pick_forgives_the_compensated_time():
    # on the CFS-like base the least-vruntime pick would take a longer slice back: the
    # adjustment is credited to the fair thread's runtime and debited from the best-effort one
    sim = FakeSim(ntasks=4)
    pol = get_policy("cache-fair:fair=0:best_effort=2:interval_insns=1000:fair_rate=0.001:"
                     "min_run_insns=1")
    pol.attach(sim)
    sim.on = {0: 0, 1: 1}
    sim.insns[0] = 10
    pol.tick()  # the scheduling phase begins (after 10 x 1 instructions)
    sim.insns[0], sim.cycles[0], sim.misses[0] = 500_010, 1e6, 3000  # below its fair IPC
    pol.tick()
    seconds = pol.adjustments[0][3]
    assert seconds > 0
    assert pol.credit == {0: pytest.approx(seconds), 2: pytest.approx(-seconds)}
    q = RunQueue(SimpleNamespace(task=t, type_id=0, is_async=False) for t in (2, 0, 1))
    sim.queue = lambda c: q
    # equal runtimes: linux would pick the first of them (thread 2); cache-fair the credited
    sim.runtime[:] = 0.01
    lx = get_policy("linux")
    lx.attach(sim)
    assert lx.pick_next(0) == 0
    assert pol.pick_next(0) == 1
    # thread 0 is picked first until it has run its credit more than thread 1 (queue index 2);
    # thread 2, debited, comes last
    sim.runtime[0] = 0.01 + 0.9 * seconds
    assert pol.pick_next(0) == 1
    sim.runtime[0] = 0.01 + 1.1 * seconds
    assert pol.pick_next(0) == 2
    sim.runtime[1] = 0.01 + 0.05 * seconds
    assert pol.pick_next(0) == 2
    sim.runtime[1] = 0.01 + 2 * seconds
    assert pol.pick_next(0) == 1
    # an interrupt still goes first
    q.insert(1, SimpleNamespace(task=-1, type_id=1, is_async=True,
                                category=int(Category.INTERRUPT)))
    assert pol.pick_next(0) == 1 and q[1].is_async


def test_a_given_fair_rate_skips_the_sampling_phase():
    # but not the instructions it would have taken (10 runs of 1,000): no adjustment during
    # the thread's cold start (section 4)
    sim = FakeSim()
    pol = get_policy("cache-fair:fair=0:best_effort=1:interval_insns=1000:fair_rate=0.001:"
                     "min_run_insns=1000")
    pol.attach(sim)
    sim.on = {0: 0, 1: 2}
    sim.insns[0], sim.cycles[0], sim.misses[0] = 9_999, 1e5, 300
    pol.tick()
    assert pol.threads[0].mark is None
    sim.insns[0], sim.cycles[0], sim.misses[0] = 10_000, 1e5, 300
    pol.tick()
    assert pol.threads[0].mark == (10_000, 1e5, 300) and pol.adjustments == []
    # from there, an interval at IPC 0.5 and 0.003 misses per cycle
    sim.insns[0], sim.cycles[0], sim.misses[0] = 510_000, 1.1e6, 3300
    pol.tick()
    assert [a[1:3] for a in pol.adjustments] == [(0, 1)] and pol.adjustments[0][3] > 0
    assert pol.threads[0].samples_own == [] and pol.estimates == []


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="fair_rate must be a non-negative number"):
        get_policy("cache-fair:fair_rate=-1")
    with pytest.raises(ValueError, match="in both classes"):
        get_policy("cache-fair:fair=1+2:best_effort=2")
    with pytest.raises(ValueError, match="samples must be a positive integer of at least 2"):
        get_policy("cache-fair:samples=1")
    with pytest.raises(ValueError, match="sample_us must be a positive number"):
        get_policy("cache-fair:sample_us=0")


def test_the_per_thread_miss_counters_add_up_to_the_caches_memory_accesses():
    threads = [[(0, 3000, 0, FIRST), (0, 2000, 1, START)], [(0, 4000, 2, FIRST)]]
    w, fp = tiny(threads, ntypes=3)
    eng = Engine(w, fp, get_policy("linux"), SandboxConfig(machine(2), max_chunk=500))
    eng.log = []
    eng.run()
    check_invariants(eng)
    served = eng.hier.stats.served
    assert eng.task_llc_misses.sum() == served[..., 3].sum() > 0
    assert eng.task_cycles.sum() == pytest.approx(eng.snapshot(eng.now).cycles.sum())


def test_cache_fair_runs_in_the_sandbox():
    # three threads on two cores share them by time slices
    threads = [[(0, 400, 0, FIRST)] + [(0, 3000, 1 + t % 2, START), (0, 400, 0, START)] * 30
               for t in range(3)]
    w, fp = tiny(threads, ntypes=3)
    pol = get_policy("cache-fair:fair=0:best_effort=1:min_run_insns=100:samples=3:"
                     "interval_insns=5000:sample_us=2")
    eng = Engine(w, fp, pol, SandboxConfig(machine(2), max_chunk=500))
    eng.log = []
    eng.run()
    check_invariants(eng)
    assert len(pol.threads[0].samples_own) >= 1


def test_a_run_that_adjusted_nothing_says_why():
    sim = FakeSim()
    pol = get_policy("cache-fair")
    pol.attach(sim)
    assert "no thread is in the cache-fair class" in pol.notes()[0]
    pol = get_policy("cache-fair:fair=0:best_effort=3:min_run_insns=1000")
    pol.attach(sim)
    run_pair(sim, pol, 0, 1, 5000, 0.01, 0.01)
    assert pol.notes() == ["no time slice was adjusted in the run: 0 of 1 cache-fair threads "
                           "had a fair miss rate (a sampling phase needs 10 runs of at least "
                           "1,000 instructions each; then one adjustment every 50,000,000 "
                           "instructions); it scheduled as `linux`"]
    pol.adjustments.append((0.0, 0, 3, 1e-6))
    assert pol.notes() == []


def test_combined_workloads_run_side_by_side():
    from pysched.sandbox.combine import DATA_PART_STRIDE_LINES, combine
    a = tiny([[(0, 3000, 0, FIRST), (0, 2000, 1, START)], [(1, 4000, 0, FIRST)]],
             interrupts=[(0, 300, 2, 1e-6)], vcpus=(0, 1), ntypes=3)
    b = tiny([[(0, 5000, 0, FIRST)]], deps=(), ntypes=1)
    w, fp = combine([a, b])
    assert w.vcpus == [0, 1, 2] and w.ntasks == 3 and len(w) == len(a[0]) + len(b[0])
    assert w.total_insns == a[0].total_insns + b[0].total_insns
    # part 1's thread keeps its type (the application type, 0x100) and its own vCPU
    last = len(a[0])
    assert w.types[w.type_id[last]] == 0x100 and w.run_vcpu[w.run_ptr[last]] == 2
    assert np.array_equal(fp.icount[2], b[1].icount[0])
    assert np.array_equal(fp.lines[2], b[1].lines[0])  # code only: nothing moves
    # with loads and stores, the second part's data lines move up by the stride, code stays
    bw, bfp = b
    kinds = (np.arange(len(bfp.lines[0])) % 3).astype(np.uint8)
    bfp = Footprint(64, True, bfp.icount, bfp.lines, {0: kinds})
    w2, fp2 = combine([a, (bw, bfp)])
    moved = fp2.lines[2].astype(np.int64) - bfp.lines[0].astype(np.int64)
    assert np.array_equal(moved, np.where(kinds != 0, DATA_PART_STRIDE_LINES, 0))
    assert fp2.data and np.array_equal(fp2.kind[0], np.zeros(len(fp2.lines[0]), np.uint8))
    eng = Engine(w, fp, get_policy("linux"), SandboxConfig(machine(2), max_chunk=500))
    eng.log = []
    eng.run()
    check_invariants(eng)


def test_the_seed_003_measures_on_a_known_table():
    import pandas as pd

    from pysched.studies.seed003_cache_fair import best_effort_loss, variability
    idx = pd.MultiIndex.from_product([["slow", "fast"], ["default", "cache-fair"]],
                                     names=["schedule", "scheduler"])
    runs = pd.DataFrame({"principal_ms": [12.0, 10.5, 10.0, 10.0],
                         "best_effort_cpu_ms": [4.0, 3.0, 5.0, 5.0]}, index=idx)
    var = variability(runs)
    assert var.loc["default", "slow vs fast"] == pytest.approx(0.2)
    assert var.loc["cache-fair", "slow vs fast"] == pytest.approx(0.05)
    assert var.loc["default", "max vs min"] == pytest.approx(0.2)
    loss = best_effort_loss(runs)
    assert loss.loc["slow", "cpu_time"] == pytest.approx(0.25)
    assert loss.loc["slow", "cpu_share"] == pytest.approx(1 - (3 / 10.5) / (4 / 12))
    assert loss.loc["fast"].tolist() == [0, 0]
