"""The capture harness inside the region (pysched.superfunctions.harness): which instances
are its own work, and what analysis leaves out by default."""
from __future__ import annotations

from pathlib import Path

import tracefactory as tf

from pysched.characterisation import epoch_breakups, instruction_breakup
from pysched.sandbox.workload import build_workload
from pysched.superfunctions import Category, segment
from pysched.trace import open_trace
from pysched.trace.schema import MARKER_BEGIN, WAKE_NEW

H, W = 0xFFFF888000100000, 0xFFFF888000200000   # the harness's thread key, the workload's


def _trace(tmp_path: Path, reuse: bool = True) -> Path:
    """H opens the region, faults, enters poll() (a timer interrupt lands on it) and blocks;
    W runs; with ``reuse``, H's key goes to a new task (wake_up_new_task), which then runs."""
    ks = tf.KernelSim()
    ks.f.marker(0, MARKER_BEGIN, thread=H)
    ks.user(0, "H")                           # the harness's user code after the marker
    ks.interrupt(0, H, vector=14)             # its own page fault
    ks.iret(0, H)
    ks.syscall(0, H, 7, "H")                  # poll()
    ks.interrupt(0, H, vector=236, user=0)    # a device interrupt that lands on it
    ks.iret(0, H, user=0)
    ks.switch(0, H, W)                        # H blocks in poll
    ks.sysret(0, W)
    ks.user(0, "B", 3)                        # the workload
    if reuse:
        # H has exited (the trace need not show it): its key is a new process's, which has
        # page tables of its own
        ks.f.wakeup(0, WAKE_NEW, H, waker=W)
        ks.switch(0, W, H, cr3=0x2000)
        ks.kernel(0, "ret_from_fork")
        ks.sysret(0, H, cr3=0x2000)
        ks.user(0, "C", 2)
    return ks.write(tmp_path / "t")


def test_harness_is_the_begin_threads_own_work_until_its_key_is_reused(tmp_path: Path) -> None:
    seg = segment(_trace(tmp_path))
    i = seg.instances
    h = i[i["harness"]]
    assert set(h["thread"]) == {H}
    got = sorted((Category(int(c)), int(n)) for c, n in zip(h["category"], h["number"]))
    assert got == [(Category.SYSCALL, 7), (Category.INTERRUPT, 14), (Category.APPLICATION, -1)]
    # Not the harness: the device interrupt on it, the workload, the new task with H's key.
    device = i[(i["category"] == Category.INTERRUPT) & (i["number"] == 236)]
    assert len(device) == 1 and not device["harness"].any()
    assert not i.loc[i["thread"] == W, "harness"].any()
    later = i[(i["thread"] == H) & (i["start_icount"] > int(h["start_icount"].max()))
              & (i["category"] == Category.APPLICATION)]
    assert len(later) == 1 and not later["harness"].any()


def test_analysis_leaves_the_harness_out_unless_asked(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    seg = segment(path)
    harness = int(seg.instances.loc[seg.instances["harness"], "insns"].sum())
    assert harness > 0
    both = instruction_breakup(seg, keep_harness=True)
    without = instruction_breakup(seg)
    assert both.total + both.scheduler - without.total - without.scheduler == harness
    assert sum(b.total + b.scheduler for b in epoch_breakups(seg)) == \
        without.total + without.scheduler
    trace = open_trace(path)
    full = build_workload(seg, trace, keep_harness=True)
    left = build_workload(seg, trace)
    sched = int(seg.instances.loc[seg.instances["harness"], "sched_insns"].sum())
    assert full.total_insns - left.total_insns == harness - sched


def test_no_reuse_keeps_the_whole_thread(tmp_path: Path) -> None:
    seg = segment(_trace(tmp_path, reuse=False))
    i = seg.instances
    own = (i["thread"] == H) & (i["number"] != 236)
    assert (i["harness"] == own).all()
