"""Segmentation of a real trace of the test guest, checked against what the guest ran."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pysched.capture.qemu import default_plugin_path
from pysched.superfunctions import Category, KernelSymbols, segment
from pysched.superfunctions.symbols import GUEST_SYSTEM_MAP, SCHEDULER_FUNCTIONS, base_name
from pysched.trace import expand, open_trace

SYSLOOP_N = 300

pytestmark = pytest.mark.skipif(
    not default_plugin_path().is_file() or not GUEST_SYSTEM_MAP.is_file(),
    reason="plugin or guest not built (make plugin guest)")


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sf") / "t"
    cmd = f"sysloop {SYSLOOP_N}; spin 20 & spin 20 & wait; ls -R /proc/sys > /dev/null"
    r = subprocess.run([sys.executable, "-m", "pysched.cli", "trace", "--cmd", cmd, "--out",
                        str(out), "--vcpus", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def seg(traced: Path):
    return segment(traced)


def test_symbols_copied_next_to_the_trace(traced: Path, seg) -> None:
    assert (traced / "System.map.gz").is_file()
    assert set(seg.actions.values()) >= {"run_timer_softirq", "rcu_core_si", "tasklet_action"}


def test_pieces_tile_the_streams(seg) -> None:
    for v, g in seg.pieces.groupby("vcpu"):
        assert g["start"].iloc[0] == 0 and g["stop"].iloc[-1] == seg.vcpu_insns[v]
        assert (g["start"].to_numpy()[1:] == g["stop"].to_numpy()[:-1]).all()


def test_sysloop_system_calls(traced: Path, seg) -> None:
    """sysloop makes N reads and N writes; its thread's instances say so."""
    markers = open_trace(traced).df("markers")
    thread = int(markers.loc[(markers["kind"] == 2) & (markers["value"] == 7), "thread"].iloc[0])
    i = seg.instances[seg.instances["thread"] == thread]
    calls = i[i["category"] == Category.SYSCALL]["number"].value_counts()
    assert calls.get(0, 0) >= SYSLOOP_N + 1 and calls.get(1, 0) >= SYSLOOP_N
    # Calls whose entry was recorded have their application instance as parent.
    seen = i[(i["category"] == Category.SYSCALL) & ~i["resolved"]]
    assert (inst_cat(seg, seen["parent"]) == Category.APPLICATION).all()


def inst_cat(seg, ids) -> np.ndarray:
    return seg.instances["category"].to_numpy()[np.asarray(ids)]


def test_two_spins_share_a_type_ls_does_not(seg) -> None:
    apps = seg.instances[seg.instances["category"] == Category.APPLICATION]
    big = apps.sort_values("insns", ascending=False)
    # the two spin processes (~20 M instructions each) run the most user code
    a, b = big.iloc[0], big.iloc[1]
    assert a.insns > 15e6 and b.insns > 15e6
    assert a.type == b.type and (a.cr3, a.generation) != (b.cr3, b.generation)
    assert apps["type"].nunique() >= 3


def test_instances_start_and_end_where_the_kernel_says(traced: Path, seg) -> None:
    syms = KernelSymbols.load(traced / "System.map.gz")
    trace = open_trace(traced)
    inst, p = seg.instances, seg.pieces
    stream = expand(trace, 0, 0, min(trace.num_rows("exec", 0), 2_000_000))
    n = len(stream)
    first = p[p["vcpu"] == 0].groupby("instance")["start"].min()
    # Every name of the symbol holding each address: the map has aliases (the device
    # interrupt stubs' irq_entries_start shares its address with __irqentry_text_start).
    aliases: dict[int, set[str]] = {}
    for a, name in zip(syms.addr.tolist(), syms.names):
        aliases.setdefault(a, set()).add(name)

    def names(pc: int) -> set[str]:
        k = int(np.searchsorted(syms.addr, np.uint64(pc), side="right")) - 1
        return aliases[int(syms.addr[k])] if k >= 0 and pc < int(syms.end[k]) else {"?"}

    seen = {c: 0 for c in Category}
    for iid, start in first.items():
        row = inst.loc[iid]
        if row.start_vcpu != 0 or row.start_icount != start or start >= n or row.resolved:
            continue
        here = names(int(stream.pc[start]))
        cat = Category(int(row.category))
        if cat == Category.SYSCALL:
            assert "entry_SYSCALL_64" in here, (iid, here)
        elif cat == Category.INTERRUPT:
            # IDT entry stubs: asm_* for exceptions and system vectors, the irq_entries_start
            # table for device interrupts.
            assert any(x.startswith(("asm_", "irq_entries_start", "spurious_entries_start"))
                       for x in here), (iid, here)
        elif cat == Category.BOTTOM_HALF:
            assert int(stream.pc[start]) == int(row.handler), iid
        seen[cat] += 1
    assert seen[Category.SYSCALL] > 10 and seen[Category.INTERRUPT] > 10
    # Scheduler pieces run only scheduler functions.
    sp = p[(p["vcpu"] == 0) & p["sched"] & (p["stop"] <= n)]
    names = {base_name(s) for a, b in zip(sp["start"], sp["stop"])
             for s in syms.symbolize(stream.pc[a:b])}
    assert names and names <= set(SCHEDULER_FUNCTIONS)
    # The only unknown contexts are the bottoms of threads that were inside the kernel when the
    # trace began (how much they then run varies: 0 to 127,444 instructions seen), and they
    # are a small share.
    unknown = inst[inst["category"] == Category.UNKNOWN]
    first_of_thread = inst.reset_index().groupby("thread_id")["id"].min()
    assert (unknown["parent"] == -1).all()
    assert (first_of_thread[unknown["thread_id"]].to_numpy() == unknown.index.to_numpy()).all()
    assert unknown["insns"].sum() < 0.01 * seg.total_insns
