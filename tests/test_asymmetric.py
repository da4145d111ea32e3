"""Seed 001 on hand-made workloads: HRRS and Fairness on one big and three small cores, where
the right share of the big core is known, and the engine's hardware moves that they use."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from sandbox_factory import FIRST, START, tiny
from test_models_caches import small_hier
from test_sandbox import check_invariants

from pysched.models.caches.config import HierarchyConfig
from pysched.models.cores.config import big_core, small_core
from pysched.models.machine import MachineConfig
from pysched.policies import get_policy
from pysched.sandbox import SandboxConfig
from pysched.sandbox.engine import Engine

QUANTUM_MS = 0.01  # 10 us: many quanta in a short hand-made run


def acmp(small: int = 3) -> MachineConfig:
    # default (32 KiB) L1s: the hand-made code fits, so the cores differ by their pipelines
    return MachineConfig(HierarchyConfig(cores=1 + small),
                         (big_core(),) + tuple(small_core() for _ in range(small)))


def big_share(eng, w, until: float) -> np.ndarray:
    """Per thread: share of its busy time before ``until`` spent on core 0 (the big core)."""
    on_big, total = np.zeros(w.ntasks), np.zeros(w.ntasks)
    for g, c, t0, t1, lo, hi in eng.log:
        t = int(w.task[g % eng.n])
        if t >= 0 and t0 < until:
            total[t] += t1 - t0
            on_big[t] += (t1 - t0) * (c == 0)
    return on_big / total


def four_compute_threads(insns: int = 400_000):
    return [[(v, insns, 0, FIRST)] for v in range(4)]


def run_four(policy: str, insns: int = 400_000, machine: MachineConfig | None = None,
             threads=None):
    """Four threads (one per vCPU) under ``policy`` (the quantum: :data:`QUANTUM_MS` for the
    hardware policies), logged; returns (workload, engine, policy)."""
    w, fp = tiny(threads or four_compute_threads(insns), vcpus=(0, 1, 2, 3), ntypes=2)
    pol = get_policy(policy if policy == "linux" else f"{policy}:quantum_ms={QUANTUM_MS}")
    eng = Engine(w, fp, pol, SandboxConfig(machine or acmp(), max_chunk=500))
    eng.log = []
    eng.run()
    check_invariants(eng)
    return w, eng, pol


@pytest.mark.parametrize("policy", ["hrrs", "fairness"])
def test_each_thread_gets_its_share_of_the_big_core(policy):
    w, eng, pol = run_four(policy)
    first_done = float(np.nanmin(eng.task_end))
    share = big_share(eng, w, first_done)
    # four threads, one big core: a quarter each while all four run (within a quantum's worth)
    assert np.all(np.abs(share - 0.25) < 0.06), share
    assert pol.hw.swaps >= 5


def test_linux_leaves_the_big_core_to_one_thread():
    w, eng, _ = run_four("linux")
    share = big_share(eng, w, float(np.nanmin(eng.task_end)))
    assert sorted(share.round(6).tolist()) == [0.0, 0.0, 0.0, 1.0]


def test_hrrs_finishes_barrier_like_work_sooner_than_linux():
    # equal threads that all must end: the slowest bounds the program (a barrier's rule)
    done = {}
    for policy in ("linux", "hrrs"):
        done[policy] = float(np.nanmax(run_four(policy)[1].task_end))
    # linux: the small cores' speed (base CPI 1); hrrs: each thread a quarter on the big core
    # (CPI 0.5) so about 1 / (0.75 + 0.25 * 2) = 0.8 of linux's time, swap costs aside
    assert done["hrrs"] < 0.85 * done["linux"]


def test_round_robin_order_of_the_small_cores():
    w, eng, _ = run_four("hrrs", 200_000)
    # the cores the big core's threads came from, in order: 1, 2, 3, 1, 2, 3, ...
    came_from = []
    last = {}
    for g, c, t0, t1, lo, hi in sorted(eng.log, key=lambda r: r[2]):
        t = int(w.task[g % eng.n])
        if c == 0 and last.get(t, 0) != 0:
            came_from.append(last[t])
        last[t] = c
    assert len(came_from) >= 6
    assert came_from[:6] == [1, 2, 3, 1, 2, 3]


def test_kernel_mode_is_never_swapped_away():
    # every thread alternates application code with long system calls (type 1)
    threads = []
    for v in range(4):
        items = [(v, 6000, 0, FIRST)]
        for _ in range(40):
            items += [(v, 3000, 1, START), (v, 6000, 0, START)]
        threads.append(items)
    w, eng, pol = run_four("hrrs", threads=threads)
    cores = defaultdict(set)
    for g, c, *_ in eng.log:
        cores[g].add(c)
    kernel = [g for g in cores if w.type_id[g % eng.n] == 1]
    app = [g for g in cores if w.type_id[g % eng.n] == 0]
    # a system call runs on one core from its start to its end (section 3.2) ...
    assert all(len(cores[g]) == 1 for g in kernel)
    # ... while application code does move, and the big core had to wait for user mode
    assert any(len(cores[g]) > 1 for g in app)
    assert pol.hw.swaps >= 3 and pol.hw.deferrals > 0


def test_fairness_swaps_only_a_lagging_thread_in():
    from types import SimpleNamespace
    pol = get_policy("fairness")
    running = {0: SimpleNamespace(task=0, is_async=False, category=3),
               1: SimpleNamespace(task=1, is_async=False, category=3),
               2: SimpleNamespace(task=2, is_async=False, category=3)}
    pol.sim = SimpleNamespace(running=running.get)
    pol.hw.big, pol.hw.small = [0], [1, 2]
    pol.insns = np.zeros((3, 2))
    pol.nominal_ratio = 0.5
    # big-core seconds and small-core seconds per thread: progress 1.0, 0.5 + 0.25, 0.9
    pol.secs = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.8]])
    assert pol.choose(0, [1, 2]) == 1          # thread 1 lags most
    pol.secs = np.array([[0.2, 0.0], [0.5, 0.5], [0.0, 1.8]])
    assert pol.choose(0, [1, 2]) is None       # the big core's thread lags most: stay
    assert pol.choose(0, []) is None


@pytest.mark.parametrize("spec, message", [
    ("hrrs:quantum_ms=0", "quantum_ms must be a positive number"),
    ("fairness:retry_us=-1", "retry_us must be a positive number"),
    ("hrrs:slice=3", "unexpected keyword"),
])
def test_parameters_are_checked(spec, message):
    with pytest.raises(ValueError, match=message):
        get_policy(spec)


def test_a_symmetric_machine_has_nothing_to_swap():
    machine = MachineConfig(small_hier(cores=4), tuple(big_core() for _ in range(4)))
    runs = {}
    for policy in ("linux", "hrrs"):
        eng = run_four(policy, 50_000, machine)[1]
        runs[policy] = eng.snapshot(eng.now)
    assert runs["hrrs"].cycles.sum() == runs["linux"].cycles.sum()
    # and the policy says so, where the asymmetric machine's run has nothing to say
    pol = run_four("hrrs", 50_000, machine)[2]
    assert len(pol.notes()) == 1 and "no core of the machine is faster" in pol.notes()[0]
    assert run_four("hrrs", 50_000)[2].notes() == []
    assert get_policy("linux").notes() == []


def test_a_run_without_a_swap_says_so():
    # one thread, on the big core: no small core ever runs user code to swap with
    pol = run_four("fairness", 50_000, threads=[[(0, 50_000, 0, FIRST)]])[2]
    assert pol.hw.swaps == pol.hw.pulls == 0
    assert len(pol.notes()) == 1 and pol.notes()[0].startswith("no hardware swap in the run")


def test_a_hardware_move_costs_the_migration_cycles_not_a_switch():
    w, eng, pol = run_four("hrrs", 100_000)
    s = eng.snapshot(eng.now)
    # the moves: consecutive chunks of a thread on different cores (nothing else moves here;
    # a requested move is dropped when the thread's item ends at that chunk)
    last, moves = {}, 0
    for g, c, *_ in sorted(eng.log, key=lambda r: r[2]):
        moves += last.get(g, c) != c
        last[g] = c
    assert 2 * pol.hw.swaps + pol.hw.pulls - 2 <= moves <= 2 * pol.hw.swaps + pol.hw.pulls
    assert moves > 4 and s.migrations.sum() == moves
    assert s.migration_cycles.sum() == 1000 * moves
    assert s.switches.sum() == 4  # each thread's first start only
