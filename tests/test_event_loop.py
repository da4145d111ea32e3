"""The engine's event loop against the obvious form of its shortcuts: a kick (an idle core
told to look for work now) is kept apart from the heap and dropped when its core starts a
chunk first (pysched.sandbox.engine.Engine.kick, _unkick); here every kick is a heap event
handled in turn, as the loop's rules say. The same statistics to the last bit."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sandbox_factory import tiny
from test_compiled_engine import assert_same
from test_sandbox import machine, workloads

from pysched.policies import REGISTRY, get_policy
from pysched.sandbox import SandboxConfig
from pysched.sandbox.engine import _EV_CORE, Engine


class HeapKicks(Engine):
    """Every kick an event of the heap, handled even when it finds its core busy."""

    def kick(self, core: int) -> None:
        if not self.core_kicked[core]:
            self.core_kicked[core] = True
            self.push(self.now, _EV_CORE, core)

    def _unkick(self, c: int) -> None:
        pass  # the kick stays in the heap; core_event clears the flag when it comes


def _run(cls, w, fp, policy, cfg):
    eng = cls(w, fp, get_policy(policy), cfg)
    return eng, eng.run()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(sorted(REGISTRY)), st.integers(1, 4), st.integers(1, 3),
       st.integers(3, 50), st.sampled_from([0, 1000]), st.sampled_from([0.0, 1e-8]))
def test_kicks_apart_from_the_heap_change_nothing(wf, policy, cores, copies, max_chunk,
                                                 switch_cycles, ipi_s):
    """Chunks of no instructions (a wake-up at offset 0, no switch cost) keep a kick due now;
    ``ipi_s = 0`` puts pokes at the kick's time too."""
    w, fp = wf
    cfg = SandboxConfig(machine(cores), copies=copies, max_chunk=max_chunk,
                        switch_cycles=switch_cycles, ipi_s=ipi_s)
    ea, a = _run(Engine, w, fp, policy, cfg)
    eb, b = _run(HeapKicks, w, fp, policy, cfg)
    assert len(a) == len(b)
    for k, (x, y) in enumerate(zip(a, b)):
        assert_same(x, y, f"epoch {k}")
    assert ea.forced == eb.forced
    assert np.array_equal(ea.task_end, eb.task_end, equal_nan=True)


def test_an_item_released_at_an_epochs_end_starts_in_the_next_epoch():
    """Events of one time are handled in the order they were queued: the epoch's end, queued
    when the run began, comes before the kick of the core an interrupt released at that very
    time is queued on, so the interrupt's instructions are the next epoch's."""
    epoch = 3e-3
    w, fp = tiny([], interrupts=[(0, 40, 4, epoch)], ntypes=5)
    for cls in (Engine, HeapKicks):
        eng, epochs = _run(cls, w, fp, "linux",
                           SandboxConfig(machine(1), switch_cycles=0, epoch_s=epoch))
        assert [int(e.instructions.sum()) for e in epochs] == [0, 40]
