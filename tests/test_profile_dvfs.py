"""Seed 002's profile-based DVFS: the level chosen is the lowest that meets the target, OS
cores scale down under little OS load while application cores keep their level."""
from __future__ import annotations

import pytest
from sandbox_factory import FIRST, START, tiny
from test_sandbox import check_invariants, machine

from pysched.policies import get_policy
from pysched.policies.profile_dvfs import lowest_level
from pysched.sandbox import SandboxConfig
from pysched.sandbox.engine import Engine

LEVELS = (1.0, 1.6, 2.2, 2.6)


def run_calls(app: int, call: int, policy: str):
    """Two threads alternating ``app`` instructions of application code with ``call``-long
    system calls (type 1), 20 times, on 4 cores with 20 us epochs."""
    threads = [[(0, app, 0, FIRST)] + [(0, call, 1, START), (0, app, 0, START)] * 20
               for _ in range(2)]
    w, fp = tiny(threads, ntypes=2)
    pol = get_policy(policy)
    eng = Engine(w, fp, pol, SandboxConfig(machine(4), epoch_s=2e-5, max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    return eng, pol


@pytest.mark.parametrize("cycles, want", [
    (0, 0),
    (0.8 * 1.0e9 * 1e-3, 0),        # exactly the target at 1.0 GHz
    (0.8 * 1.0e9 * 1e-3 + 1, 1),    # one cycle more: 1.6 GHz
    (0.8 * 2.2e9 * 1e-3, 2),
    (0.8 * 2.6e9 * 1e-3, 3),
    (1e12, 3),                      # beyond every level: the fastest
])
def test_the_lowest_level_that_meets_the_target(cycles, want):
    assert lowest_level(cycles, 1e-3, LEVELS, 0.8) == want


def test_os_cores_scale_down_and_application_cores_keep_their_level():
    # two threads of application code with a few short system calls (type 1): little OS load
    eng, pol = run_calls(20_000, 300, "profile-dvfs")
    assert pol.app_cores == [0, 1] and pol.os_cores_all == [2, 3]
    assert eng.level[0] == eng.level[1] == 3          # the applications' setting
    assert all(lv == 0 for _, c, lv in pol.changes)   # idle-ish OS cores: the slowest level
    assert {c for _, c, _ in pol.changes} == {2, 3}
    assert pol.changes[0][0] == 0  # from the first epoch's profile on


def test_a_busy_os_core_stays_fast():
    # system calls dominate: the OS cores' load needs the top levels
    eng, pol = run_calls(100, 20_000, "profile-dvfs:target=0.5")
    s = eng.snapshot(eng.now)
    assert s.instructions[2:].sum() > s.instructions[:2].sum()  # the OS work is offloaded
    # the system calls (number -1: subsystem "other") all go to core 3, fully busy: it needs
    # more than the fastest level at target 0.5 and keeps it until the run's last (partial,
    # nearly idle) epoch; core 2 has no component with load and drops to the slowest level
    last = max(e for e, *_ in pol.changes)
    assert last >= 10
    assert [(e, lv) for e, c, lv in pol.changes if c == 3] in ([], [(last, 0)])
    assert (0, 2, 0) in pol.changes


def test_target_is_checked():
    with pytest.raises(ValueError, match=r"target must be in \(0, 1\]"):
        get_policy("profile-dvfs:target=0")


def test_the_split_machines_of_the_comparison():
    from pysched.studies.seed002_dvfs import split_machine
    slow = split_machine(4, 0)
    assert [c.level for c in slow.cores] == [-1, -1, 0, 0]
    assert [c.operating_point().freq_ghz for c in slow.cores] == [2.6, 2.6, 1.0, 1.0]
    assert [c.level for c in split_machine(4).cores] == [-1] * 4
    assert slow.hierarchy.cores == 4


def test_one_kind_of_os_work_on_a_slow_core():
    # 8 cores: the OS's are 4-7, dealt to irq, fs, net, mm, proc, other, kthread in turn
    from pysched.studies.seed002_dvfs import split_machine
    from pysched.policies.subsystems import kind_cores
    where = kind_cores([4, 5, 6, 7])
    assert where["irq"] == [4] and where["net"] == [6] and where["proc"] == [4]
    driver = split_machine(8, kind_levels={"irq": 0})
    assert [c.operating_point().freq_ghz for c in driver.cores] == [2.6] * 4 + [1.0, 2.6, 2.6, 2.6]
    stack = split_machine(8, kind_levels={"net": 0})
    assert [c.level for c in stack.cores] == [-1] * 6 + [0, -1]
    # on 4 cores irq and net share core 2
    assert [c.level for c in split_machine(4, kind_levels={"net": 0}).cores] == [-1, -1, 0, -1]
    with pytest.raises(ValueError, match="unknown kind"):
        split_machine(8, kind_levels={"disk": 0})
    every = split_machine(4, 0, app_level=0)
    assert [c.operating_point().freq_ghz for c in every.cores] == [1.0] * 4


def test_the_configurations_of_the_comparison():
    from pysched.studies.seed002_dvfs import CONFIGS, _machine
    ghz = {k: [c.operating_point().freq_ghz for c in _machine(8, lv).cores]
           for k, (_, lv) in CONFIGS.items()}
    fast, slow = 2.6, 1.0
    assert ghz["linux"] == ghz["all-fast"] == ghz["profile-dvfs"] == [fast] * 8
    assert ghz["all-slow"] == [slow] * 8
    assert ghz["os-slow"] == [fast] * 4 + [slow] * 4
    assert ghz["driver-slow"] == [fast] * 4 + [slow] + [fast] * 3
    assert ghz["stack-slow"] == [fast] * 6 + [slow, fast]
