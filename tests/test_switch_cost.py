"""The switch and migration costs (pysched.sandbox.switch_cost) and the measurement behind the
traced one (pysched.characterisation.scheduler), on hand-made cases whose cost is known."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tracefactory as tf
from sandbox_factory import FIRST, START, tiny
from test_asymmetric import run_four
from test_sandbox import check_invariants, machine

from pysched.characterisation.scheduler import OUTSIDE, function_instructions, scheduler_share
from pysched.models.cores.config import big_core
from pysched.policies import get_policy
from pysched.sandbox import SandboxConfig
from pysched.sandbox.engine import Engine
from pysched.sandbox.switch_cost import TracedSwitch, sandbox_costs, traced_switch
from pysched.trace import TraceError, open_trace

DATA = Path(__file__).resolve().parents[1] / "data"
K = tf.KBASE + 0x200000


def _kernel_trace(root: Path, switches: bool = True) -> Path:
    """One vCPU: ``__schedule`` (5 instructions) three times, once cut short after 2 by an
    exception;
    ``enqueue_task_fair`` (4) twice; ``vfs_read`` (3) four times; a user block (6) once;
    two context switches."""
    f = tf.TraceFactory(nvcpus=1)
    sched = f.block(K, [1] * 5)
    enq = f.block(K + 0x100, [1] * 4)
    read = f.block(K + 0x200, [1] * 3)
    user = f.block(0x401000, [1] * 6)
    f.run(0, user, sched, read, enq, read)
    if switches:
        f.switch(0, 1, 2)
    f.run(0, sched, enq, read, read, sched, retired=2)
    f.interrupt(0, 14, K + 0x300, user=0)  # a page fault cut the last block short
    if switches:
        f.switch(0, 2, 1)
    root = f.write(root)
    tf.write_system_map(root, {"__schedule": K, "enqueue_task_fair": K + 0x100,
                               "vfs_read": K + 0x200})
    return root


def test_instructions_are_counted_per_function_with_cut_rows(tmp_path):
    t = open_trace(_kernel_trace(tmp_path / "t"))
    per = function_instructions(t)
    assert per.to_dict() == {"__schedule": 5 + 5 + 2, "enqueue_task_fair": 8,
                             "vfs_read": 12, OUTSIDE: 6}
    s = scheduler_share(t)
    assert (s.instructions, s.switches, s.switch_path, s.scheduler) == (38, 2, 12, 20)
    assert s.per_switch() == 6 and s.per_switch("scheduler") == 10
    assert s.share() == pytest.approx(20 / 38)
    with pytest.raises(ValueError, match="what must be"):
        s.share("tick")


def test_a_trace_without_switches_is_refused_by_name(tmp_path):
    t = open_trace(_kernel_trace(tmp_path / "t", switches=False))
    with pytest.raises(TraceError, match="no switches table"):
        scheduler_share(t)


def test_the_segmentations_switch_path_is_the_exec_streams():
    # two independent counts of the same instructions: the segmentation's sched_insns and
    # the exec stream's instructions in SCHEDULER_FUNCTIONS
    from pysched.superfunctions import segment
    t = open_trace(DATA / "iscp")
    s = scheduler_share(t)
    ts = traced_switch(segment(t), t)
    assert (ts.switches, ts.switch_path) == (s.switches, s.switch_path)
    assert s.switches > 0 and 0 < s.switch_path < s.scheduler < s.instructions


def test_sandbox_costs_of_each_model():
    traced = TracedSwitch(switches=10, switch_path=8_000)
    assert traced.per_switch == 800
    assert sandbox_costs("flat", big_core()) == {"switch_cycles": 1000,
                                                 "os_migration_cycles": None}
    # traced: the engine runs the path (switch_cycles None), a move costs nothing more
    assert sandbox_costs("traced", big_core(), traced) == {"switch_cycles": None,
                                                           "os_migration_cycles": 0}
    assert sandbox_costs("zero") == {"switch_cycles": 0, "os_migration_cycles": 0}
    with pytest.raises(ValueError, match="needs the trace's TracedSwitch"):
        sandbox_costs("traced", big_core())
    with pytest.raises(ValueError, match="switch cost must be one of traced, flat, zero"):
        sandbox_costs("measured", big_core(), traced)
    with pytest.raises(ValueError, match="no context switch"):
        sandbox_costs("traced", big_core(), TracedSwitch(0, 0))
    with pytest.raises(ValueError, match="no context switch"):
        TracedSwitch(0, 0).per_switch
    with pytest.raises(ValueError, match="switches must be a non-negative integer"):
        TracedSwitch(-1, 0)


def _run(w, fp, policy, cores, **cfg):
    eng = Engine(w, fp, get_policy(policy), SandboxConfig(machine(cores), **cfg))
    eng.log = []
    eng.run()
    check_invariants(eng)
    return eng.snapshot(eng.now)


@pytest.mark.parametrize("mig, charged", [(None, 1000), (0, 0), (250, 250)])
def test_an_os_move_costs_the_switch_and_os_migration_cycles(mig, charged):
    # thread 0 runs on vCPU 0, then on vCPU 1; as-traced follows it: one OS move. Thread 1
    # runs on vCPU 1 first, so the move lands on a core where another thread ran: a switch.
    w, fp = tiny([[(0, 100, 0, FIRST), (1, 50, 1, START)], [(1, 80, 0, FIRST)]],
                 vcpus=(0, 1))
    s = _run(w, fp, "as-traced", 2, switch_cycles=300, os_migration_cycles=mig)
    assert s.migrations.sum() == 1 and s.switches.sum() == 3
    assert s.switch_cycles.sum() == 3 * 300
    assert s.migration_cycles.sum() == charged
    assert s.cycles.sum() == pytest.approx(s.base_cycles.sum() + s.stall_cycles.sum()
                                           + 900 + charged)


def test_hardware_moves_keep_the_cores_migration_cycles():
    _, eng, _ = run_four("hrrs", 100_000)
    flat = eng.snapshot(eng.now)
    w, fp = eng.w, eng.fp
    eng = Engine(w, fp, get_policy("hrrs:quantum_ms=0.01"),
                 SandboxConfig(eng.cfg.machine, max_chunk=500, os_migration_cycles=0))
    eng.run()
    s = eng.snapshot(eng.now)
    assert s.migrations.sum() == flat.migrations.sum() > 4
    assert s.migration_cycles.sum() == 1000 * s.migrations.sum()


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_os_migration_cycles_are_named(bad):
    with pytest.raises(ValueError, match="os_migration_cycles must be a non-negative integer"):
        SandboxConfig(machine(1), os_migration_cycles=bad)


def test_evaluate_runs_carry_the_traced_switch_cost():
    from pysched.evaluation import evaluate, prepare
    t = prepare(DATA / "dss-mem")
    ts = t.meta["switch"]
    _, flat = evaluate([t], ["linux"], cores=[2], loads=[1], load_unit="copies",
                       config={"max_epochs": 1}, switch_cost="flat")
    _, traced = evaluate([t], ["linux"], cores=[2], loads=[1], load_unit="copies",
                         config={"max_epochs": 1})
    assert (flat["switch_cost"].item(), flat["switch_cost_cycles"].item(),
            flat["os_migration_cost_cycles"].item()) == ("flat", 1000, -1)
    assert (traced["switch_cost"].item(), traced["switch_cost_cycles"].item(),
            traced["os_migration_cost_cycles"].item()) == ("traced", -1, 0)
    assert traced["switch_path_insns"].item() == pytest.approx(ts.per_switch)
    assert traced["migration_cycles"].item() == 0
    # each switch ran the path's mean instructions, at least their base CPI in cycles
    n = traced["switches"].item()
    assert n > 0 and traced["switch_insns"].item() == round(n * ts.per_switch)
    assert traced["switch_cycles"].item() >= traced["switch_insns"].item() * big_core().base_cpi
    with pytest.raises(ValueError, match="switch cost must be one of"):
        evaluate([t], ["linux"], cores=[2], loads=[1], switch_cost="free")
    with pytest.raises(ValueError, match="give the switch cost as switch_cost"):
        evaluate([t], ["linux"], cores=[2], loads=[1], config={"switch_cycles": 5})


def test_one_traces_switch_stream_is_gathered_once():
    """Replays of one trace share its switch path's stream; another footprint or another set
    of vCPUs gathers its own, with the accesses of the path's runs on those vCPUs only."""
    from pysched.sandbox.engine import _switch_stream
    w, fp = tiny([[(0, 40, 0, FIRST)], [(1, 40, 1, FIRST)]], vcpus=(0, 1))
    _, fp2 = tiny([[(0, 40, 0, FIRST)], [(1, 40, 1, FIRST)]], vcpus=(0, 1))
    path = TracedSwitch(switches=4, switch_path=20,
                        runs=np.array([(0, 0, 10), (1, 5, 15)], dtype=np.int64))
    both = _switch_stream(path, fp, (0, 1))
    assert _switch_stream(path, fp, (0, 1)) is both
    assert both[1] == 20
    again = _switch_stream(path, fp2, (0, 1))
    assert again is not both and again[1] == 20
    np.testing.assert_array_equal(again[0].line, both[0].line)
    one = _switch_stream(path, fp, (1,))
    assert one[1] == 10 and len(one[0].line) < len(both[0].line)
    with pytest.raises(ValueError, match="no replayed vCPU"):
        _switch_stream(path, fp, (2,))
