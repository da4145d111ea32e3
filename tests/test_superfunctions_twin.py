"""The segmentation kernel against a slow, per-instruction twin, on hand-made and random traces.

The twin follows the rules of :mod:`pysched.superfunctions.segment_kernel` one instruction at a time
with Python lists and dicts, on the fully expanded streams and a symbol lookup per instruction:
no block fast path, no part-by-part streaming, no capacity handling, no heat slots. Random
well-formed traces come from a small simulated machine (threads with true instance stacks,
several vCPUs, migrations, nested interrupts, softirqs, fork, execve and exit).
"""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tracefactory as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysched.superfunctions import Category, segment
from pysched.trace import block_start_icount, expand, open_trace

from twins.segmentation import APP, INT, SYS, Twin


def compare(root: Path, epoch_len: int = 16) -> None:
    """Assert that :func:`segment` and the twin agree on everything."""
    seg = segment(root, epoch_len=epoch_len)
    twin = Twin(root, epoch_len)
    twin.run()
    ttypes = twin.types()
    inst = seg.instances
    assert len(inst) == len(twin.inst)
    for i, x in enumerate(twin.inst):
        key = x["thread"] if not isinstance(x["thread"], tuple) else 0
        got = (int(inst.at[i, "category"]), int(inst.at[i, "parent"]), int(inst.at[i, "thread"]),
               bool(inst.at[i, "resolved"]), int(inst.at[i, "type"]))
        assert got == (x["cat"], x["parent"], key, x["resolved"], ttypes[i]), f"instance {i}"
        if x["cat"] == APP:
            assert int(inst.at[i, "cr3"]) == max(x["aux"], 0)
            assert int(inst.at[i, "generation"]) == x["gen"]
        if x["cat"] in (SYS, INT):
            assert int(inst.at[i, "number"]) == x["aux"]
    # Per instruction: instance and scheduler label.
    p = seg.pieces
    for v, labels in twin.label.items():
        pv = p[p["vcpu"] == v]
        lens = (pv["stop"] - pv["start"]).to_numpy()
        got_inst = np.repeat(pv["instance"].to_numpy(), lens)
        got_sched = np.repeat(pv["sched"].to_numpy(), lens)
        assert pv["start"].iloc[0] == 0 if len(pv) else not labels
        want_inst = np.array([lab[0] for lab in labels], dtype=np.int64)
        want_sched = np.array([lab[1] for lab in labels], dtype=bool)
        np.testing.assert_array_equal(got_inst, want_inst)
        np.testing.assert_array_equal(got_sched, want_sched)
        # Pieces are maximal runs.
        same = ((pv["instance"].to_numpy()[1:] == pv["instance"].to_numpy()[:-1])
                & (pv["sched"].to_numpy()[1:] == pv["sched"].to_numpy()[:-1]))
        assert not same.any()
    # Each piece's exec-row window holds all its instructions.
    for v in twin.label:
        first = block_start_icount(twin.trace, v)       # counter at each row's start (+ end)
        pv = p[p["vcpu"] == v]
        row_of_first = np.searchsorted(first, pv["start"].to_numpy(), side="right") - 1
        row_of_last = np.searchsorted(first, pv["stop"].to_numpy() - 1, side="right") - 1
        assert (pv["row_start"].to_numpy() <= row_of_first).all()
        assert (pv["row_stop"].to_numpy() > row_of_last).all()
        assert (first[pv["row_start"].to_numpy()] <= pv["start"].to_numpy()).all()
    # Heat, by type.
    want = {(e, ttypes[i], pfn) for e, i, pfn in twin.heat}
    got = set(zip(seg.heat["epoch"].tolist(), seg.heat["type"].tolist(), seg.heat["pfn"].tolist()))
    assert got == want


# --- a random machine ----------------------------------------------------------------------

def random_trace(seed: int, root: Path, drop: int = 0) -> Path:
    """A random well-formed recording of 2-5 threads on 1-3 vCPUs (see the module docstring);
    with ``drop``, that many random event rows are then deleted (a damaged trace)."""
    ks = random_machine(seed)
    rng = random.Random(seed + 1)
    for _ in range(drop):
        tables = [(t, v) for t in ("syscalls", "interrupts", "switches")
                  for v in ks.f.rows[t] if ks.f.rows[t][v]]
        if tables:
            t, v = rng.choice(tables)
            del ks.f.rows[t][v][rng.randrange(len(ks.f.rows[t][v]))]
    return ks.write(root)


def random_machine(seed: int) -> tf.KernelSim:
    """The simulated machine behind :func:`random_trace`."""
    rng = random.Random(seed)
    nv = rng.randint(1, 3)
    ks = tf.KernelSim(nvcpus=nv, rows_per_part=rng.choice([3, 7, 64]))
    keys = [0xFFFF888000000000 + 0x10000 * k for k in range(1, 7)]
    binaries = ["A", "B", "C"]
    # True state per thread: stack of categories; "blocked" threads are off-CPU.
    state: dict[int, list[str]] = {}
    cr3: dict[int, int] = {}
    binary: dict[int, str] = {}
    run: dict[int, int] = {}
    for v in range(nv):
        t = keys[v]
        state[t], cr3[t], binary[t], run[v] = ["app"], 0x1000 * (v + 1), rng.choice(binaries), t
        ks.user(v, binary[t])
    spare = keys[nv:]
    # Some spare threads were blocked in a system call before the trace, the others are
    # fork children that have not run yet, or kernel threads.
    for t in spare:
        kind = rng.choice(["blocked", "child", "kthread"])
        state[t] = {"blocked": ["app", "sys?"], "child": ["child"], "kthread": ["kth"]}[kind]
        # "lib": a process seen only in shared-library code (no program text in the trace)
        cr3[t], binary[t] = 0x1000 * rng.randint(1, 4), rng.choice(binaries + ["lib"])
    for _ in range(rng.randint(5, 60)):
        v = rng.randrange(nv)
        t = run[v]
        s = state[t]
        top = s[-1]
        r = rng.random()
        if top == "app":
            if r < 0.15 or (binary[t] == "lib" and r < 0.4):
                # library-only processes stay in the first 16 pages, which programs that call
                # the library often cover: both ways of the attach rule get exercised
                pages = range(16) if binary[t] == "lib" else range(24)
                ks.lib(v, rng.sample(pages, rng.randint(3, 14)))
            elif r < 0.4:
                ks.user(v, binary[t], rng.randint(1, 3))
            elif r < 0.75:
                nr = rng.choice([0, 1, 3, 59, 60, 231])
                ks.syscall(v, t, nr, binary[t], cr3=cr3[t], abi=rng.choice([64, 64, 32]))
                s.append(f"sys{nr}")
            else:
                ks.interrupt(v, t, rng.choice([14, 236]), user=1, cr3=cr3[t])
                s.append("int")
        elif top.startswith("sys") or top in ("kth", "child"):
            if top == "child":
                ks.kernel(v, "ret_from_fork")
                ks.sysret(v, t, cr3=cr3[t], matched=0)
                s[-1] = "app"
                continue
            if top in ("sys231", "sys60") and r < 0.5:
                ks.kernel(v, "do_exit")
                ks.kernel(v, "do_task_dead")
                others = [u for u in state if u not in run.values() and state[u]]
                nxt = rng.choice(others) if others else None
                if nxt is None:
                    continue
                ks.switch(v, t, nxt)
                state[t] = ["child"]              # the key may come back as a new task
                run[v] = nxt
                continue
            if r < 0.05:
                # a block that runs into the scheduler or into a softirq action mid-block
                ks.straddle(v, rng.choice(["schedule", "net_rx_action", "handle_softirqs"]),
                            rng.randint(1, 3), rng.randint(1, 3))
            elif r < 0.3:
                ks.kernel(v, rng.choice(["ksys_read", "copy_user_generic", "worker_thread"]))
            elif r < 0.5 and top.startswith("sys"):
                if top == "sys59":
                    binary[t] = rng.choice(binaries + ["lib"])
                    cr3[t] = 0x1000 * rng.randint(1, 4)
                ks.kernel(v, "ksys_read")
                ks.sysret(v, t, cr3=cr3[t], via_iret=rng.random() < 0.2)
                s.pop()
                if not s:
                    s.append("app")
            elif r < 0.7:
                ks.interrupt(v, t, rng.choice([14, 236, 251]), user=0, cr3=cr3[t])
                s.append("int")
            else:
                others = [u for u in state if u not in run.values() and state[u]]
                if others:
                    nxt = rng.choice(others)
                    ks.switch(v, t, nxt)
                    run[v] = nxt
                    ks.f.clock += rng.randint(0, 500)
        elif top == "int":
            if r < 0.3:
                ks.kernel(v, "handle_irq")
            elif r < 0.5:
                ks.kernel(v, "irq_exit_rcu")
                ks.softirq(v, rng.choice(["run_timer_softirq", "net_rx_action"]),
                           rng.randint(1, 2))
            elif r < 0.6 and len(s) < 6:
                ks.interrupt(v, t, 236, user=0, cr3=cr3[t])
                s.append("int")
            else:
                s.pop()
                to_user = s[-1] == "app"
                ks.iret(v, t, user=int(to_user), cr3=cr3[t])
    return ks


def test_twin_on_hand_made_trace(tmp_path: Path) -> None:
    ks = tf.KernelSim(nvcpus=2, rows_per_part=3)
    T1, T2 = 0xFFFF888000100000, 0xFFFF888000200000
    ks.user(0, "A", 2)
    ks.syscall(0, T1, 0)
    ks.interrupt(0, T1, 236, user=0)
    ks.softirq(0)
    ks.iret(0, T1, user=0)
    ks.straddle(0, "schedule", 2, 3)              # into the scheduler mid-block
    ks.switch(0, T1, T2)
    ks.kernel(0, "worker_thread", 3)
    ks.straddle(0, "net_rx_action", 1, 2)         # an action entered mid-block
    ks.kernel(0, "__run_timers")
    ks.straddle(0, "handle_softirqs", 2, 2)       # and the return into the dispatcher
    ks.user(1, "B", 2)
    root = ks.write(tmp_path / "t")
    compare(root, epoch_len=5)
    seg = segment(root)
    kinds = [(int(seg.instances.at[r.instance, "category"]), bool(r.sched), r.stop - r.start)
             for r in seg.pieces[seg.pieces["vcpu"] == 0].itertuples()]
    assert (int(Category.BOTTOM_HALF), False, 2 + 3 + 2) in kinds


@pytest.mark.parametrize("epoch_len", [3, 5, 64])
def test_twin_on_blocks_across_two_frames(tmp_path: Path, epoch_len: int) -> None:
    """Blocks whose instructions lie on two code frames have no page of their own: the
    kernel's per-instruction heat path."""
    ks = tf.KernelSim(nvcpus=1)
    T1 = 0xFFFF888000100000
    user = ks.f.block(0x400FF8, [4] * 4, paddrs=[0x5123FF8, 0x5123FFC, 0x6000000, 0x6000004])
    kern = ks.f.block(tf.KERNEL_SYMBOLS["ksys_read"] + 0x40, [4] * 3,
                      paddrs=[0x200FF8, 0x200FFC, 0x300000])
    ks.user(0, "A", 2)
    ks.f.run(0, user, user)
    ks.syscall(0, T1, 0)
    ks.f.run(0, kern, kern)
    ks.sysret(0, T1)
    ks.f.run(0, user)
    root = ks.write(tmp_path / "t")
    compare(root, epoch_len=epoch_len)
    assert {0x5123, 0x6000, 0x200, 0x300} <= set(segment(root, epoch_len=epoch_len).heat["pfn"])


@pytest.mark.parametrize("seed", range(12))
def test_twin_on_random_traces_fixed_seeds(tmp_path: Path, seed: int) -> None:
    compare(random_trace(seed, tmp_path / "t"), epoch_len=1 + seed % 23)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), epoch_len=st.integers(1, 50))
def test_twin_on_random_traces(tmp_path_factory, seed: int, epoch_len: int) -> None:
    compare(random_trace(seed, tmp_path_factory.mktemp("r") / "t"), epoch_len)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), drop=st.integers(1, 4))
def test_twin_on_damaged_traces(tmp_path_factory, seed: int, drop: int) -> None:
    """Missing events exercise the recovery paths (counted warnings); both must agree."""
    compare(random_trace(seed, tmp_path_factory.mktemp("d") / "t", drop), 9)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), drop=st.sampled_from([0, 0, 2]))
def test_pieces_tile_every_thread_and_categories_sum_to_one(tmp_path_factory, seed: int,
                                                            drop: int) -> None:
    from pysched.characterisation import instruction_breakup

    seg = segment(random_trace(seed, tmp_path_factory.mktemp("p") / "t", drop))
    p = seg.pieces.sort_values(["vcpu", "start"])
    for v, g in p.groupby("vcpu"):
        st_, sp = g["start"].to_numpy(), g["stop"].to_numpy()
        assert st_[0] == 0 and sp[-1] == seg.vcpu_insns[v]
        assert (sp > st_).all() and (st_[1:] == sp[:-1]).all()     # no gap, no overlap
    # Each thread's instructions: its pieces, disjoint, and the instances' counts add up.
    inst = seg.instances
    lens = (p["stop"] - p["start"]).to_numpy()
    per_inst = np.bincount(p["instance"], weights=lens, minlength=len(inst))
    np.testing.assert_array_equal(per_inst, inst["insns"].to_numpy())
    thread_of_piece = inst["thread_id"].to_numpy()[p["instance"].to_numpy()]
    for tid in np.unique(thread_of_piece):
        q = p[thread_of_piece == tid]
        # a thread runs on one vCPU at a time: its pieces never overlap in its own order
        assert int((q["stop"] - q["start"]).sum()) == int(inst.loc[inst["thread_id"] == tid,
                                                                   "insns"].sum())
    fr = instruction_breakup(seg).fractions(include_scheduler=True)
    assert sum(fr.values()) == pytest.approx(1.0)
    assert sum(instruction_breakup(seg).fractions().values()) == pytest.approx(1.0)
    assert instruction_breakup(seg).total + instruction_breakup(seg).scheduler == \
        sum(seg.vcpu_insns.values())
    assert set(pd.unique(inst["category"])) <= {int(c) for c in Category}


@pytest.mark.parametrize("seed", [3, 8, 21, 42])
def test_replay_gives_each_piece_exactly_its_instructions(tmp_path: Path, seed: int) -> None:
    from pysched.superfunctions import piece_instructions

    root = random_trace(seed, tmp_path / "t")
    seg = segment(root, epoch_len=10)
    trace = open_trace(root)
    for v in trace.vcpus:
        full = expand(trace, v)
        got: dict[int, list[np.ndarray]] = {}
        for label, pc, pa in piece_instructions(trace, seg, v):
            got.setdefault(label, []).append(pc)
            assert len(pc) == len(pa)
        pv = seg.pieces[seg.pieces["vcpu"] == v]
        assert list(got) == list(pv.index)
        for label, r in pv.iterrows():
            np.testing.assert_array_equal(np.concatenate(got[label]), full.pc[r.start:r.stop])
            # the piece's exec-row window holds its instructions
            w = expand(trace, v, int(r.row_start), int(r.row_stop))
            first = int(w.row_start[0])
            np.testing.assert_array_equal(w.pc[r.start - first:r.stop - first],
                                          full.pc[r.start:r.stop])
        # a narrowed subset
        sub = pv.iloc[::2].assign(stop=lambda d: d["start"] + (d["stop"] - d["start"] + 1) // 2)
        parts: dict[int, list[np.ndarray]] = {}
        for label, pc, _ in piece_instructions(trace, seg, v, sub):
            parts.setdefault(label, []).append(pc)
        for label, s in sub.iterrows():
            np.testing.assert_array_equal(np.concatenate(parts[label]), full.pc[s.start:s.stop])


@pytest.mark.parametrize("seed", [5, 17])
def test_tiny_output_arrays_give_the_same_result(tmp_path: Path, monkeypatch, seed: int) -> None:
    """Start the kernel with almost no room, so that it stops for space (and the heat table is
    rehashed) again and again; resuming must not change anything."""
    import sys

    segmod = sys.modules["pysched.superfunctions.segment"]
    root = random_trace(seed, tmp_path / "t")
    want = segment(root, epoch_len=7)
    init = segmod._State.__init__
    grows = []

    def tiny(self, *a, **k):
        init(self, *a, **k)
        self.inst = self.inst[:1].copy()
        self.pcs = self.pcs[:1].copy()
        self.hkeys = self.hkeys[:2].copy()

    def grow(self, _orig=segmod._State.grow):
        grows.append(1)
        _orig(self)

    monkeypatch.setattr(segmod._State, "__init__", tiny)
    monkeypatch.setattr(segmod._State, "grow", grow)
    got = segment(root, epoch_len=7)
    assert len(grows) >= 2
    pd.testing.assert_frame_equal(got.instances, want.instances)
    pd.testing.assert_frame_equal(got.pieces, want.pieces)
    pd.testing.assert_frame_equal(got.heat, want.heat)


def test_twin_on_library_only_processes(tmp_path: Path) -> None:
    """The attach rule, including a tie between two programs that cover the same frames."""
    ks = tf.KernelSim(nvcpus=4)
    ks.user(0, "B")
    ks.lib(0, list(range(20)))
    ks.user(1, "A")
    ks.lib(1, list(range(20)))
    ks.lib(2, list(range(2, 20)))              # covered by both A and B: a tie
    ks.lib(3, list(range(5)))                  # too few frames
    root = ks.write(tmp_path / "t")
    compare(root, 50)
    seg = segment(root)
    apps = seg.instances[seg.instances["category"] == int(Category.APPLICATION)]
    by_vcpu = apps.set_index("vcpu")["type"]
    # "A"'s text frames are lower than "B"'s (KernelSim numbers frames by name).
    assert by_vcpu[2] == by_vcpu[1] != by_vcpu[0]
    assert by_vcpu[3] not in (by_vcpu[0], by_vcpu[1])
