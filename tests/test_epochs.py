"""Epochs of machine-wide instructions (issue 16 item 4): the trace's clock
(:mod:`pysched.trace.clock`), the segmentation's and the analysis's epochs on it, and the
sandbox's arrival times."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tracefactory as tf

from pysched.characterisation import epoch_breakup, epoch_breakups
from pysched.superfunctions import Category, segment
from pysched.trace import open_trace
from pysched.trace.clock import trace_clock

T1, T2 = 0x1111, 0x2222


def _two_vcpus(tmp_path: Path, plugin_info: dict | None = None) -> Path:
    """vCPU 0: 40, 40, 40 instructions with switches at host times 1000 and 2000; vCPU 1:
    20 instructions between its switches at 0 and 1500, then idle."""
    f = tf.TraceFactory(nvcpus=2, rows_per_part=2)
    if plugin_info is not None:
        f.plugin_info = plugin_info
    b = f.block(0x400000, [4] * 4)
    f.clock = -100
    f.switch(1, 0, T2)                      # time 0: vCPU 1 at 0
    f.run(1, *[b] * 5)
    f.run(0, *[b] * 10)
    f.clock = 900
    f.switch(0, T1, T1)                     # time 1000: vCPU 0 at 40
    f.clock = 1400
    f.switch(1, T2, T2)                     # time 1500: vCPU 1 at 20
    f.run(0, *[b] * 10)
    f.clock = 1900
    f.switch(0, T1, T1)                     # time 2000: vCPU 0 at 80
    f.run(0, *[b] * 10)
    return f.write(tmp_path / "t")


def test_clock_by_hand(tmp_path: Path) -> None:
    clock = trace_clock(open_trace(_two_vcpus(tmp_path)))
    assert clock.vcpu_insns == {0: 120, 1: 20} and clock.total == 140
    # Knots (host ns): 0, 1000, 1500, 1501 (vCPU 1's last event + 1 ns), 2000, 2001 (vCPU
    # 0's). vCPU 0: 0, 40, 60, 60.04, 80, 120; vCPU 1: 0, 13.3, 20, 20, 20, 20.
    np.testing.assert_allclose(clock.machine, [0, 160 / 3, 80, 80.04, 100, 140])
    assert clock.covered == 140 and clock.complete_epochs(10) == 7
    np.testing.assert_allclose(clock.machine_insns(0, [0, 40, 80]), [0, 160 / 3, 100])
    # vCPU 1 stood at 20 from 1500 on: its instruction 20 is where it got to, not later.
    np.testing.assert_allclose(clock.machine_insns(1, [10, 20]), [40, 80])
    np.testing.assert_allclose(clock.seconds(0, 40), 160 / 3 / (2 * 2e9))
    # Epochs of 10 instructions per vCPU = 20 of the machine.
    b = clock.epoch_bounds(10)
    np.testing.assert_array_equal(b[0], [15, 30, 45, 60, 80, 100])
    np.testing.assert_array_equal(b[1], [5, 10, 15, 20, 20, 20])
    with pytest.raises(ValueError, match="epoch_len"):
        clock.epoch_bounds(0)


def test_clock_covers_up_to_the_first_vcpu_that_stopped(tmp_path: Path) -> None:
    """roi_insns=20: both vCPUs stopped recording once they had 20 instructions; vCPU 1 did
    so at 1500 ns, so the machine's work after that is not all in the trace."""
    info = {"schema_version": 1, "options": {"roi": "marker", "roi_insns": 20},
            "roi_insns_ends": 1}
    clock = trace_clock(open_trace(_two_vcpus(tmp_path, info)))
    assert clock.covered == 80 and clock.complete_epochs(10) == 4


def test_one_vcpu_epochs_are_its_instructions(tmp_path: Path) -> None:
    f = tf.TraceFactory(nvcpus=1)
    b = f.block(0x400000, [4] * 3)
    f.run(0, *[b] * 7)
    f.switch(0, T1, T1)
    f.run(0, *[b] * 7)
    clock = trace_clock(open_trace(f.write(tmp_path / "t")))
    np.testing.assert_array_equal(clock.epoch_bounds(5)[0], [5, 10, 15, 20, 25, 30, 35, 40])


def test_clock_refuses_time_going_back(tmp_path: Path) -> None:
    f = tf.TraceFactory(nvcpus=1)
    b = f.block(0x400000, [4])
    f.run(0, b)
    f.switch(0, T1, T1)
    f.run(0, b)
    f.clock = -50
    f.switch(0, T1, T1)
    with pytest.raises(Exception, match="vCPU 0: an event at icount 2 has time_ns 50"):
        trace_clock(open_trace(f.write(tmp_path / "t")))


def _idle_second_vcpu(tmp_path: Path) -> tuple[tf.KernelSim, Path]:
    """vCPU 0 runs a program making 20 system calls (20 instructions each); vCPU 1 takes an
    interrupt at the start and another at the end and is idle in between."""
    ks = tf.KernelSim(nvcpus=2)
    ks.user(1, "B")
    ks.interrupt(1, T2)
    ks.iret(1, T2)
    for _ in range(20):
        ks.user(0, "A", blocks=3)
        ks.syscall(0, T1, 0)
        ks.sysret(0, T1)
    ks.user(1, "B")
    ks.interrupt(1, T2)
    ks.iret(1, T2)
    ks.user(0, "A")
    return ks, ks.write(tmp_path / "t")


def test_idle_vcpu_neither_ends_nor_stretches_epochs(tmp_path: Path) -> None:
    ks, root = _idle_second_vcpu(tmp_path)
    seg = segment(root, epoch_len=10)
    n0, n1 = seg.vcpu_insns[0], seg.vcpu_insns[1]
    assert n1 < 2 * 10 < 20 * 10 < n0    # per vCPU, vCPU 1 would have 1 complete epoch
    # Epochs of 20 machine-wide instructions advance with vCPU 0's work.
    assert seg.complete_epochs == (n0 + n1) // 20 >= 20
    assert seg.nepochs == -(-(n0 + n1) // 20)
    every = epoch_breakups(seg)
    assert len(every) == seg.nepochs
    for k, br in enumerate(every[:seg.complete_epochs]):
        # Each complete epoch holds the machine's 20 instructions (up to rounding each
        # vCPU's share to whole instructions).
        assert abs(br.total + br.scheduler - 20) <= 2, k
    # vCPU 1's interrupts fall in the epochs when they happened: the first, and the last
    # ones (by instruction count alone, both would be in epoch 0).
    ints = epoch_breakup(seg, by="category", vcpus=[1])[int(Category.INTERRUPT)]
    busy = np.flatnonzero(ints.to_numpy() > 0)
    assert busy[0] == 0 and busy[-1] >= seg.nepochs - 2
    assert not ints.iloc[2:seg.nepochs - 3].any()
    # The heat agrees: vCPU 1's program B ran at the start and again late (its second block
    # is spread over the gap before the late interrupt, the clock's linear approximation).
    frame_b = ks.f.blocks[ks.ublock("B", 0)].paddrs[0] >> 12
    epochs_b = sorted(seg.heat.loc[seg.heat["pfn"] == frame_b, "epoch"])
    assert epochs_b[0] == 0 and epochs_b[-1] >= seg.nepochs // 2


def test_idle_vcpu_segmentation_equals_twin(tmp_path: Path) -> None:
    from test_superfunctions_twin import compare
    compare(_idle_second_vcpu(tmp_path)[1], epoch_len=7)


def test_sandbox_arrivals_on_the_machine_clock(tmp_path: Path) -> None:
    """The sandbox's interrupt arrivals are the trace's machine time, the clock of its
    epochs: vCPU 1's late interrupt arrives near the end, not at its small icount."""
    from pysched.constants import CLOCK_HZ, IPC
    from pysched.sandbox import build_workload
    _, root = _idle_second_vcpu(tmp_path)
    seg = segment(root, epoch_len=10)
    w = build_workload(seg)
    late = (w.kind == 1) & (w.arrival_vcpu == 1) & (w.release > 0)
    end = seg.total_insns / (2 * CLOCK_HZ * IPC)
    assert late.sum() == 2
    first, last = sorted(w.release[late])
    assert first < 0.1 * end < 0.8 * end < last <= end
    inst = seg.instances
    i = int(w.instance[np.flatnonzero(late)[np.argmax(w.release[late])]])
    assert last == pytest.approx(float(seg.clock.seconds(1, int(inst.at[i, "start_icount"]))))
