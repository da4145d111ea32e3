"""The engine's interface to the hardware below the OS (seeds 001-003): DVFS levels changed at
run time, periodic ticks."""
from __future__ import annotations

import pytest
from sandbox_factory import FIRST, tiny
from test_sandbox import check_invariants, machine

from pysched.policies.base import Policy
from pysched.sandbox import SandboxConfig
from pysched.sandbox.engine import Engine


class SetLevel(Policy):
    """Sets core 0's DVFS level at the first tick (or before time 0 with ``at_tick=False``)."""

    name = "set-level"

    def __init__(self, level: int, at_tick: bool, tick_s: float = 1e-6) -> None:
        super().__init__()
        self.level, self.at_tick, self.tick_s = level, at_tick, tick_s
        self.ticks = 0

    def attach(self, sim) -> None:
        super().attach(sim)
        if not self.at_tick:
            sim.set_level(0, self.level)

    def tick(self):
        self.ticks += 1
        if self.at_tick and self.ticks == 1:
            self.sim.set_level(0, self.level)
        return None


def run(policy, insns: int = 40_000):
    w, fp = tiny([[(0, insns, 0, FIRST)]])
    eng = Engine(w, fp, policy, SandboxConfig(machine(1), max_chunk=1000))
    eng.log = []
    eng.run()
    check_invariants(eng)
    return eng, eng.snapshot(eng.now)


def test_a_slower_level_stretches_time_and_cuts_dynamic_energy():
    fast_eng, fast = run(SetLevel(-1, at_tick=False))
    slow_eng, slow = run(SetLevel(0, at_tick=False))  # 1.0 GHz at 0.70 V against 2.6 at 1.0
    assert slow.cycles.sum() == pytest.approx(fast.cycles.sum())
    assert slow.elapsed_s == pytest.approx(fast.elapsed_s * 2.6)
    core = machine(1).cores[0]
    dyn = fast.cycles.sum() * core.capacitance_nf * 1e-9
    assert fast.energy_j.sum() == pytest.approx(dyn + core.static_power_w * fast.elapsed_s)
    assert slow.energy_j.sum() == pytest.approx(
        dyn * 0.7 ** 2 + core.static_power_w * 0.7 * slow.elapsed_s)
    assert slow_eng.level[0] == 0 and fast_eng.level[0] == 3


def test_a_level_changed_at_run_time_applies_from_the_next_chunk():
    t_change = 5e-6
    pol = SetLevel(0, at_tick=True, tick_s=t_change)
    eng, s = run(pol)
    assert eng.log[0][2] < t_change < eng.log[-1][2] and pol.ticks > 1
    # each chunk ran at the frequency in force when it started: 2.6 GHz before the tick,
    # 1.0 GHz after it (a chunk running at the tick keeps its frequency)
    freq = [2.6e9 if t0 < t_change else 1.0e9 for _, _, t0, *_ in eng.log]
    cycles = [(t1 - t0) * f for (_, _, t0, t1, *_), f in zip(eng.log, freq)]
    assert sum(cycles) == pytest.approx(s.cycles.sum())
    # energy: C * V**2 per cycle at each chunk's level; static power at 1.0 V until the
    # change, at 0.7 V after it
    core = machine(1).cores[0]
    dyn = sum(c * core.capacitance_nf * 1e-9 * (1.0 if f > 2e9 else 0.49)
              for c, f in zip(cycles, freq))
    static = core.static_power_w * (1.0 * t_change + 0.7 * (s.elapsed_s - t_change))
    assert s.energy_j.sum() == pytest.approx(dyn + static)


def test_bad_levels_and_ticks_are_named():
    with pytest.raises(ValueError, match="DVFS level 9 of core 0; it has levels 0..3"):
        run(SetLevel(9, at_tick=False))

    class BadTick(Policy):
        name = "bad-tick"
        tick_s = 1e-6

        def tick(self):
            return 0.0

    with pytest.raises(ValueError, match="the next tick must be a positive number"):
        run(BadTick())
