"""SuperFunction segmentation: known answers on hand-built traces, types, symbols, bad input."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import tracefactory as tf

from pysched.superfunctions import (
    UNKNOWN_TYPE,
    Category,
    KernelSymbols,
    application_type,
    bottom_half_type,
    category_bits,
    describe,
    encode,
    find_system_map,
    interrupt_type,
    kernel_thread_type,
    page_checksum,
    segment,
    subcategory,
    syscall_type,
)
from pysched.superfunctions import symbols as symmod
from pysched.trace import TraceError, open_trace

T1, T2, T3 = 0xFFFF888000100000, 0xFFFF888000200000, 0xFFFF888000300000
S = tf.KERNEL_SYMBOLS
SYS, INT, BH, APP, KTH, UNK = (Category.SYSCALL, Category.INTERRUPT, Category.BOTTOM_HALF,
                               Category.APPLICATION, Category.KERNEL_THREAD, Category.UNKNOWN)


def spans(seg, vcpu: int = 0) -> list[tuple]:
    """(category, number, start, stop, sched) of each piece of ``vcpu``, in order."""
    p = seg.pieces[seg.pieces["vcpu"] == vcpu]
    i = seg.instances
    return [(Category(int(i.at[r.instance, "category"])), int(i.at[r.instance, "number"]),
             int(r.start), int(r.stop), bool(r.sched)) for r in p.itertuples()]


def merged(seg, vcpu: int = 0) -> list[tuple]:
    """Like :func:`spans` but adjacent pieces of one instance merged (sched label dropped)."""
    out: list[tuple] = []
    p = seg.pieces[seg.pieces["vcpu"] == vcpu]
    for r in p.itertuples():
        if out and out[-1][0] == r.instance and out[-1][2] == r.start:
            out[-1] = (r.instance, out[-1][1], int(r.stop))
        else:
            out.append((int(r.instance), int(r.start), int(r.stop)))
    i = seg.instances
    return [(Category(int(i.at[k, "category"])), int(i.at[k, "number"]), a, b)
            for k, a, b in out]


# --- superFuncType ------------------------------------------------------------------------

def test_functype_encoding_matches_table_1() -> None:
    # The paper's examples: read (3 on Linux 2.6 i386) is 3; keyboard interrupt 1 is 0x4..01.
    assert syscall_type(3) == 3
    assert interrupt_type(1) == 0x4000000000000001
    assert encode(2, 0x1234) == 0x8000000000001234
    assert category_bits(application_type([1, 2])) == 3
    assert subcategory(0xC000000000000007) == 7
    assert bottom_half_type(0xFFFFFFFF81154090) == (2 << 62) | (0xFFFFFFFF81154090 & (2**62 - 1))
    assert syscall_type(None) == (2**62 - 1)
    assert interrupt_type(None) == (1 << 62) | (2**62 - 1)
    with pytest.raises(ValueError, match="category"):
        encode(4, 1)
    with pytest.raises(ValueError, match="62 bits"):
        encode(0, 1 << 62)


def test_checksum_is_order_free_and_separates_sets() -> None:
    a = page_checksum(np.array([5, 9, 1000], dtype=np.uint64))
    assert a == page_checksum(np.array([1000, 5, 9, 9], dtype=np.uint64))
    assert a != page_checksum(np.array([5, 9, 1001], dtype=np.uint64))
    assert 0 <= a < 2**62 - 1
    assert application_type([]) == 3 << 62
    kt = kernel_thread_type([1, 2, 3])
    assert category_bits(kt) == 2 and not (kt >> 61) & 1  # never a kernel-text handler
    assert describe(UNKNOWN_TYPE) == "unknown"
    assert describe(syscall_type(0)) == "syscall 0"
    assert describe(syscall_type((1 << 32) + 3)) == "syscall ia32 3"
    assert describe(bottom_half_type(0xFFFFFFFF81000000), names={0xFFFFFFFF81000000: "x"}) == "bh x"


# --- System.map ------------------------------------------------------------------------------

def test_system_map_ranges_clones_and_gzip(tmp_path: Path) -> None:
    text = ("ffffffff81000000 T _stext\n"
            "ffffffff81000100 t finish_task_switch.isra.0\n"
            "ffffffff81000180 T schedule\n"
            "ffffffff81000200 d some_data\n"
            "ffffffff81000300 t __schedule.cold\n"
            "ffffffff81000400 T _etext\n")
    syms = KernelSymbols.parse(text, "m")
    assert syms.ranges(["finish_task_switch"]) == [
        ("finish_task_switch.isra.0", 0xFFFFFFFF81000100, 0xFFFFFFFF81000180)]
    # A data symbol does not end a function; the clone ends at _etext.
    assert syms.ranges(["schedule"])[0][2] == 0xFFFFFFFF81000300
    assert syms.ranges(["__schedule"])[0][1:] == (0xFFFFFFFF81000300, 0xFFFFFFFF81000400)
    assert syms.symbolize(np.array([0xFFFFFFFF81000104, 0x1000], dtype=np.uint64)) == [
        "finish_task_switch.isra.0", "?"]
    gz = tmp_path / "System.map.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(text)
    assert KernelSymbols.load(gz).names == syms.names
    # Module symbols (kallsyms form) join the kernel's; the kernel's last function still ends
    # at _etext.
    both = KernelSymbols.parse(text, "m", "ffffffffc0001000 t virtnet_poll\t[virtio_net]\n")
    assert both.ranges(["__schedule"])[0][2] == 0xFFFFFFFF81000400
    assert both.symbolize(np.array([0xFFFFFFFFC0001010], dtype=np.uint64)) == ["virtnet_poll"]
    with pytest.raises(TraceError, match=r"m:2: bad address"):
        KernelSymbols.parse("0 T a\nzz T b\n", "m")
    with pytest.raises(TraceError, match="no text symbols"):
        KernelSymbols.parse("0 d a\n", "m")


def _plain_trace(root: Path) -> Path:
    ks = tf.KernelSim()
    ks.user(0)
    return ks.f.write(root)


def test_find_system_map_order_and_fallback(tmp_path: Path, monkeypatch) -> None:
    guest = tmp_path / "guest" / "System.map"
    tf.write_system_map(guest.parent, S)
    (guest.parent / "kernel-package-version").write_text("6.1.1-1\n")
    monkeypatch.setattr(symmod, "GUEST_SYSTEM_MAP", guest)
    monkeypatch.setattr(symmod, "GUEST_PACKAGE_VERSION", guest.parent / "kernel-package-version")

    shipped = tmp_path / "data"
    t = _plain_trace(shipped / "t1")
    # Next to the trace (shipped data keep one map per directory of traces).
    tf.write_system_map(shipped, S, "System.map.gz")
    assert find_system_map(open_trace(t)) == shipped / "System.map.gz"
    # In the trace directory first.
    tf.write_system_map(t, S)
    assert find_system_map(open_trace(t)) == t / "System.map"

    # Fallback: the test guest's map, copied (gzip) into the trace directory.
    t2 = _plain_trace(tmp_path / "x" / "t2")
    (t2 / "manifest.json").write_text(json.dumps({"kernel_package_version": "6.1.1-1"}))
    got = find_system_map(open_trace(t2))
    assert got == t2 / "System.map.gz" and got.is_file()
    assert KernelSymbols.load(got).names == KernelSymbols.load(guest).names

    # A KASLR boot: the copy is the guest's map moved by the plugin's slide; an unknown slide
    # is refused rather than read at the link-time addresses.
    slide = 0x9200000
    for name, kaslr in (("t4", {"found": True, "virtual_slide": slide}),
                        ("t5", {"found": False, "reason": "no syscall seen"})):
        t4 = _plain_trace(tmp_path / "k" / name)
        (t4 / "manifest.json").write_text(json.dumps({"kernel_package_version": "6.1.1-1"}))
        info = json.loads((t4 / "plugin.json").read_text()) if (t4 / "plugin.json").is_file() \
            else {}
        (t4 / "plugin.json").write_text(json.dumps({**info, "kaslr": kaslr}))
        if kaslr["found"]:
            moved = KernelSymbols.load(find_system_map(open_trace(t4)))
            assert moved.names == KernelSymbols.load(guest).names
            assert moved.addr.tolist() == [a + slide for a in
                                           KernelSymbols.load(guest).addr.tolist()]
        else:
            with pytest.raises(TraceError, match="did not find the kernel's slide"):
                find_system_map(open_trace(t4))

    # Another kernel than the guest's: a clear error.
    t3 = _plain_trace(tmp_path / "y" / "t3")
    (t3 / "manifest.json").write_text(json.dumps({"kernel_package_version": "5.10.0-1"}))
    with pytest.raises(TraceError, match="for another kernel"):
        find_system_map(open_trace(t3))
    # No guest map either.
    monkeypatch.setattr(symmod, "GUEST_SYSTEM_MAP", tmp_path / "nowhere" / "System.map")
    with pytest.raises(TraceError, match="no kernel System.map found"):
        find_system_map(open_trace(t3))


# --- known answers -----------------------------------------------------------------------------

def test_interrupt_nested_in_a_system_call(tmp_path: Path) -> None:
    ks = tf.KernelSim()
    ks.user(0, blocks=2)                      # 8 user instructions
    ks.syscall(0, T1, 0)                      # + 3 (the syscall is the 11th): entry at 11
    ks.kernel(0, "ksys_read")                 # 11..17 kernel
    ks.interrupt(0, T1, 236, user=0)          # entry at 17, handler first block
    ks.kernel(0, "handle_irq")                # 17..23
    ks.iret(0, T1, user=0)                    # iretq: 23..25, return icount 25
    ks.kernel(0, "ksys_read")                 # 25..28
    ks.sysret(0, T1)                          # 28..30
    ks.user(0)                                # 30..34
    seg = segment(ks.write(tmp_path / "t"))
    assert merged(seg) == [(APP, -1, 0, 11), (SYS, 0, 11, 17), (INT, 236, 17, 25),
                           (SYS, 0, 25, 30), (APP, -1, 30, 34)]
    i = seg.instances
    assert list(i["category"]) == [APP, SYS, INT]
    assert list(i["parent"]) == [-1, 0, 1]                     # the interrupt paused the call
    assert list(i["insns"]) == [15, 11, 8]
    assert list(i["start_icount"]) == [0, 11, 17] and list(i["end_icount"]) == [34, 30, 25]
    assert i.at[1, "type"] == 0 and i.at[2, "type"] == 0x4000000000000000 + 236
    assert (i["thread"] == T1).all()
    assert seg.warnings == []
    assert seg.vcpu_insns == {0: 34}


def test_bottom_half_after_an_interrupt(tmp_path: Path) -> None:
    ks = tf.KernelSim()
    ks.user(0)                                # 0..4
    ks.interrupt(0, T1, 236, user=1)          # handler 4..7
    ks.kernel(0, "irq_exit_rcu")              # 7..10
    ks.softirq(0, "run_timer_softirq", 2)     # dispatcher 10..13, action 13..16, helper 16..22,
    ks.softirq(0, "net_rx_action", 1)         # back 22..25; again: 25..28, 28..31, 31..34, 34..37
    ks.iret(0, T1, user=1)                    # 37..39
    ks.user(0)                                # 39..43
    seg = segment(ks.write(tmp_path / "t"))
    got = merged(seg)
    assert got == [(APP, -1, 0, 4), (INT, 236, 4, 13), (BH, -1, 13, 22), (INT, 236, 22, 28),
                   (BH, -1, 28, 34), (INT, 236, 34, 39), (APP, -1, 39, 43)]
    i = seg.instances
    bh = i[i["category"] == BH]
    assert list(bh["handler"]) == [S["run_timer_softirq"], S["net_rx_action"]]
    assert list(bh["type"]) == [bottom_half_type(S["run_timer_softirq"]),
                                bottom_half_type(S["net_rx_action"])]
    assert list(bh["parent"]) == [1, 1]
    assert seg.actions[S["run_timer_softirq"]] == "run_timer_softirq"


def test_interrupts_nested_in_an_interrupt_and_in_a_bottom_half(tmp_path: Path) -> None:
    # Section 3: an interrupt pauses whatever runs, interrupts and bottom halves included, and
    # the paused instance resumes at the return.
    ks = tf.KernelSim()
    ks.user(0)                                # 0..4
    ks.interrupt(0, T1, 236, user=1)          # timer: handler 4..7
    ks.kernel(0, "handle_irq")                # 7..10
    ks.interrupt(0, T1, 14, user=0)           # a page fault inside it: 10..13
    ks.kernel(0, "handle_irq")                # 13..16
    ks.iret(0, T1, user=0)                    # 16..18
    ks.kernel(0, "irq_exit_rcu")              # 18..21
    ks.kernel(0, "handle_softirqs")           # 21..24
    ks.kernel(0, "run_timer_softirq")         # the action: 24..27
    ks.interrupt(0, T1, 33, user=0)           # an interrupt inside the bottom half: 27..30
    ks.iret(0, T1, user=0)                    # 30..32
    ks.kernel(0, "__run_timers", 1)           # 32..35
    ks.f.run(0, ks.kblock("handle_softirqs", 1))  # back in the dispatcher: 35..38
    ks.iret(0, T1, user=1)                    # 38..40
    ks.user(0)                                # 40..44
    seg = segment(ks.write(tmp_path / "t"))
    assert merged(seg) == [(APP, -1, 0, 4), (INT, 236, 4, 10), (INT, 14, 10, 18),
                           (INT, 236, 18, 24), (BH, -1, 24, 27), (INT, 33, 27, 32),
                           (BH, -1, 32, 35), (INT, 236, 35, 40), (APP, -1, 40, 44)]
    i = seg.instances
    assert list(i["category"]) == [APP, INT, INT, BH, INT]
    assert list(i["parent"]) == [-1, 0, 1, 1, 3]
    assert list(i["insns"]) == [8, 17, 8, 6, 5]
    assert seg.warnings == []


def test_context_switch_in_the_middle_of_a_system_call(tmp_path: Path) -> None:
    ks = tf.KernelSim()
    ks.f.marker(0, 0, thread=T1)
    ks.user(0, "A")                           # T1 user 0..4
    ks.syscall(0, T1, 0, "A")                 # 4..7 user, entry at 7; kernel 7..10
    ks.switch(0, T1, T2)                      # schedule.. 10..19, switch at 19, 19..28 tail
    ks.sysret(0, T2, matched=1)               # T2 was blocked before the trace: 28..30
    ks.user(0, "B")                           # T2 user 30..34
    ks.syscall(0, T2, 1, "B")                 # 34..37, entry 37; 37..40
    ks.switch(0, T2, T1)                      # 40..49 | 49..58
    ks.kernel(0, "ksys_read")                 # T1's read continues 58..61
    ks.sysret(0, T1)                          # 61..63
    ks.user(0, "A")                           # 63..67
    seg = segment(ks.write(tmp_path / "t"))
    assert merged(seg) == [(APP, -1, 0, 7), (SYS, 0, 7, 19), (SYS, -1, 19, 30),
                           (APP, -1, 30, 37), (SYS, 1, 37, 49), (SYS, 0, 49, 63),
                           (APP, -1, 63, 67)]
    i = seg.instances
    read = i[(i["category"] == SYS) & (i["number"] == 0)]
    assert len(read) == 1                     # one instance, two pieces around the switch
    assert int(read["insns"].iloc[0]) == (19 - 7) + (63 - 49)
    unseen = i[i["resolved"]]
    assert list(unseen["thread"]) == [T2] and unseen["number"].iloc[0] == -1
    assert unseen["type"].iloc[0] == syscall_type(None)
    # Scheduler code is labelled: schedule, __schedule, __switch_to_asm before the switch;
    # __switch_to, finish_task_switch, __schedule after it.
    assert [s[2:] for s in spans(seg) if s[4]] == [(10, 19, True), (19, 28, True),
                                                  (40, 49, True), (49, 58, True)]
    assert int(read["sched_insns"].iloc[0]) == 9 + 9
    codes = [w["code"] for w in seg.warnings]
    assert len(codes) == 1 and "entry was not recorded" in seg.warnings[0]["text"]
    assert "syscalls row 1" in seg.warnings[0]["where"]


def test_migration_keeps_the_instance_stack(tmp_path: Path) -> None:
    """A thread blocks in a system call on vCPU 0 and returns from it on vCPU 1."""
    ks = tf.KernelSim(nvcpus=2)
    ks.user(0, "A")                           # v0: T1 0..4
    ks.user(1, "B")                           # v1: T2 0..4
    ks.syscall(0, T1, 7, "A")                 # v0 4..7, entry 7, 7..10
    ks.switch(0, T1, T3)                      # v0: 10..19 | T3 (new) 19..28
    ks.f.clock += 1000                        # the next switch happens later in time
    ks.syscall(1, T2, 1, "B")                 # v1 4..7 | 7..10
    ks.switch(1, T2, T1)                      # v1 10..19 | T1 19..28
    ks.sysret(1, T1)                          # v1 28..30
    ks.user(1, "A")                           # v1 30..34
    ks.kernel(0, "worker_thread", 2)          # v0: T3 (a kernel thread) 28..34
    seg = segment(ks.write(tmp_path / "t"))
    i = seg.instances
    call = i[(i["category"] == SYS) & (i["number"] == 7)].iloc[0]
    assert (call.start_vcpu, call.start_icount, call.end_vcpu, call.end_icount) == (0, 7, 1, 30)
    assert call.insns == (19 - 7) + (30 - 19)
    app_t1 = i[(i["category"] == APP) & (i["thread"] == T1)]
    assert len(app_t1) == 1 and app_t1["insns"].iloc[0] == 7 + 4   # one instance, two vCPUs
    kth = i[i["thread"] == T3]
    assert list(kth["category"]) == [KTH] and kth["insns"].iloc[0] == 34 - 19
    assert merged(seg, 1)[-2:] == [(SYS, 7, 19, 30), (APP, -1, 30, 34)]
    assert seg.warnings == []


def test_execve_exit_and_key_reuse(tmp_path: Path) -> None:
    """execve starts a new application instance; after exit_group and do_task_dead the key is
    a new thread (a fork child whose first return the plugin marks unmatched)."""
    ks = tf.KernelSim()
    ks.user(0, "A")
    ks.syscall(0, T1, 59, "A", cr3=0x1000)    # execve
    ks.kernel(0, "ksys_read")
    ks.sysret(0, T1, cr3=0x2000)              # returns into the new program's address space
    ks.user(0, "B")
    ks.syscall(0, T1, 231, "B", cr3=0x2000)   # exit_group
    ks.kernel(0, "do_exit")
    ks.kernel(0, "do_task_dead")
    ks.switch(0, T1, T2)
    ks.kernel(0, "worker_thread")
    ks.switch(0, T2, T1)                      # the key comes back: a new task
    ks.kernel(0, "ret_from_fork")
    ks.sysret(0, T1, cr3=0x2000, matched=0)   # page-table root reused too
    ks.user(0, "C")
    seg = segment(ks.write(tmp_path / "t"))
    i = seg.instances
    apps = i[i["category"] == APP]
    assert list(apps["cr3"]) == [0x1000, 0x2000, 0x2000]
    assert list(apps["generation"]) == [1, 1, 2]
    assert apps["type"].nunique() == 3        # A, B, C: three binaries
    exit_call = i[i["number"] == 231].iloc[0]
    # do_task_dead is scheduler code; the call ends where the task switched away for good.
    assert exit_call.end_icount < int(apps["start_icount"].iloc[2])
    new_task = i[(i["thread"] == T1) & i["resolved"]]
    assert len(new_task) == 1 and new_task["parent"].iloc[0] == -1


def test_same_binary_same_type_different_binary_different_type(tmp_path: Path) -> None:
    ks = tf.KernelSim(nvcpus=2)
    for v, (t, cr3) in enumerate([(T1, 0x1000), (T2, 0x2000)]):
        ks.user(v, "spin", blocks=3)
        ks.syscall(v, t, 1, "spin", cr3=cr3)
        ks.sysret(v, t, cr3=cr3)
        ks.user(v, "spin", blocks=3)
    seg = segment(ks.write(tmp_path / "t"))
    apps = seg.instances[seg.instances["category"] == APP]
    assert len(apps) == 2 and apps["type"].nunique() == 1
    pages = np.unique(seg.heat.loc[seg.heat["type"] == apps["type"].iloc[0], "pfn"])
    assert apps["type"].iloc[0] == application_type(pages)

    ks2 = tf.KernelSim(nvcpus=2)
    ks2.user(0, "spin", blocks=3)
    ks2.user(1, "find", blocks=3)
    seg2 = segment(ks2.write(tmp_path / "t2"))
    assert seg2.instances["type"].nunique() == 2


def test_binary_identity_survives_different_paths_and_shared_libraries(tmp_path: Path) -> None:
    """Two processes of one binary that ran different parts of it still share a type; two
    binaries that ran the same shared-library code do not."""
    ks = tf.KernelSim(nvcpus=3)
    lib = ks.f.block(0x7F0000001000, [4, 4], paddrs=[0x99000000, 0x99000004])   # libc
    ks.f.run(0, ks.ublock("sqlite", 0), ks.ublock("sqlite", 1), lib)   # one query path
    ks.f.run(1, ks.ublock("sqlite", 0), ks.ublock("sqlite", 2), lib)   # another
    ks.f.run(2, ks.ublock("find", 0), lib)
    for v, t in enumerate((T1, T2, T3)):
        ks.syscall(v, t, 0, "sqlite" if v < 2 else "find", cr3=0x1000 * (v + 1))
        ks.sysret(v, t, cr3=0x1000 * (v + 1))
    seg = segment(ks.write(tmp_path / "t"))
    apps = seg.instances[seg.instances["category"] == APP].sort_values("vcpu")
    assert apps["type"].iloc[0] == apps["type"].iloc[1] != apps["type"].iloc[2]
    # The shared type is the checksum of everything both sqlite processes executed.
    frames = seg.heat.loc[seg.heat["type"] == apps["type"].iloc[0], "pfn"].unique()
    assert apps["type"].iloc[0] == application_type(frames) and 0x99000 in frames


def test_library_only_processes_join_their_program(tmp_path: Path) -> None:
    """A process seen only inside shared libraries (no program text in the trace) joins the
    program whose processes executed (nearly) all its frames; one with too few frames, or
    frames nobody else executed, keeps a type of its own."""
    ks = tf.KernelSim(nvcpus=4)
    ks.user(0, "sqlite")
    ks.lib(0, list(range(20)))                  # sqlite: its text and 20 library pages
    ks.lib(1, list(range(2, 20)))               # 18 of them, no program text
    ks.lib(2, list(range(5)))                   # 5: too few to say
    ks.lib(3, list(range(4, 24)))               # 20, 4 of them nobody else ran
    seg = segment(ks.write(tmp_path / "t"))
    apps = seg.instances[seg.instances["category"] == APP].set_index("vcpu")["type"]
    assert len(apps) == 4
    assert apps[0] == apps[1]
    assert apps[2] != apps[0] and apps[3] != apps[0] and apps[2] != apps[3]


def test_int80_system_calls_use_ia32_numbers(tmp_path: Path) -> None:
    ks = tf.KernelSim()
    ks.user(0)
    ks.syscall(0, T1, 3, abi=32)              # ia32 read
    ks.sysret(0, T1, via_iret=True)           # returns through iretq (abi 0)
    ks.syscall(0, T1, 3)                      # x86_64 close
    ks.sysret(0, T1)
    seg = segment(ks.write(tmp_path / "t"))
    calls = seg.instances[seg.instances["category"] == SYS]
    assert list(calls["number"]) == [(1 << 32) + 3, 3]
    assert list(calls["type"]) == [(1 << 32) + 3, 3]
    assert seg.label((1 << 32) + 3) == "syscall ia32 3" and seg.warnings == []


def test_unknown_start_contexts(tmp_path: Path) -> None:
    """A vCPU that starts in the kernel, inside an interrupt entered before the trace."""
    ks = tf.KernelSim()
    ks.kernel(0, "handle_irq")                # 0..3: unknown context
    ks.iret(0, T1, user=1)                    # resolved: an interrupt, vector unknown
    ks.user(0)
    seg = segment(ks.write(tmp_path / "t"))
    assert merged(seg) == [(INT, -1, 0, 5), (APP, -1, 5, 9)]
    assert seg.instances.at[0, "type"] == interrupt_type(None)
    assert [w["count"] for w in seg.warnings] == [1]


def test_epoch_heat_follows_epoch_boundaries(tmp_path: Path) -> None:
    ks = tf.KernelSim()
    ks.user(0, blocks=3)                      # 12 instructions over frames of blocks 0, 1, 2
    seg = segment(ks.write(tmp_path / "t"), epoch_len=6)
    frames = ks.f.blocks[ks.ublock("A", 0)].paddrs[0] >> 12
    got = {(int(e), int(p) - frames) for e, p in zip(seg.heat["epoch"], seg.heat["pfn"])}
    # epoch 0: block 0 (4) + 2 of block 1; epoch 1: 2 of block 1 + block 2.
    assert got == {(0, 0), (0, 1), (1, 1), (1, 2)}
    assert seg.nepochs == 2


# --- bad input -----------------------------------------------------------------------------

def _simple(tmp_path: Path | None = None, ks: tf.KernelSim | None = None) -> tf.KernelSim:
    """User code, a system call, an interrupt and user code again (on ``ks`` if given)."""
    ks = tf.KernelSim() if ks is None else ks
    ks.user(0)
    ks.syscall(0, T1, 0)
    ks.sysret(0, T1)
    ks.interrupt(0, T1, 236)
    ks.iret(0, T1)
    ks.user(0)
    return ks


def test_events_out_of_order(tmp_path: Path) -> None:
    root = _simple(tmp_path).write(tmp_path / "t")
    part = sorted((root / "syscalls").glob("*.parquet"))[0]
    t = pq.read_table(part)
    ic = t.column("icount").to_pylist()[::-1]
    t = t.set_column(t.schema.get_field_index("icount"), "icount",
                     tf.pa.array(ic, type=tf.U64))
    pq.write_table(t, part)
    with pytest.raises(TraceError, match=r"syscalls: vCPU 0 row 1: events out of order"):
        segment(root)


def test_event_beyond_the_stream(tmp_path: Path) -> None:
    ks = _simple(tmp_path)
    ks.f.rows["interrupts"][0][-1]["icount"] = 10_000
    with pytest.raises(TraceError, match=r"interrupts row 1 \(icount 10000\) lies beyond"):
        segment(ks.write(tmp_path / "t"))


def test_missing_column_and_block(tmp_path: Path) -> None:
    root = _simple(tmp_path).write(tmp_path / "t")
    bad = tmp_path / "b"
    shutil.copytree(root, bad)
    part = sorted((bad / "interrupts").glob("*.parquet"))[0]
    t = pq.read_table(part)
    pq.write_table(t.drop(["vector"]).replace_schema_metadata(t.schema.metadata), part)
    with pytest.raises(TraceError, match="missing column 'vector'"):
        segment(bad)
    ks = _simple(tmp_path)
    ks.f.exec[0][2] = 999                    # a block that is not in the blocks table
    with pytest.raises(TraceError, match=r"exec row 2: block 999 is not in the blocks table"):
        segment(ks.write(tmp_path / "c"))


def _windows(roi: str | None) -> tf.KernelSim:
    """A system call, an interrupt and user code, twice; with ``roi``, a begin/end marker
    pair around each pass (two windows with ``roi=marker``, labels with ``roi=all``)."""
    ks = tf.KernelSim()
    if roi is not None:
        ks.f.plugin_info = {"schema_version": 1, "options": {"roi": roi}}
    for _ in range(2):
        if roi is not None:
            ks.f.marker(0, 0)
        _simple(ks=ks)
        if roi is not None:
            ks.f.run(0, ks.ublock("A", 5, 3, tf.F_MARKER))  # the `roi end` instruction
            ks.f.marker(0, 1)
        else:
            ks.f.run(0, ks.ublock("A", 5, 3))
    return ks


def test_roi_all_markers_are_labels(tmp_path: Path) -> None:
    # With roi=all, begin/end pairs do not stop recording: the trace is one window and
    # segments exactly as the same execution without markers.
    plain = segment(_windows(None).write(tmp_path / "plain"))
    labelled = segment(_windows("all").write(tmp_path / "all"))
    assert spans(labelled) == spans(plain)
    assert [c for c, *_ in merged(labelled)] == [APP, SYS, INT, APP, SYS, INT, APP]
    assert labelled.vcpu_insns == plain.vcpu_insns


def test_two_windows_and_no_sysmap(tmp_path: Path) -> None:
    # roi=marker with two begin/end pairs: refused, saying what to record instead.
    root = _windows("marker").write(tmp_path / "w")
    with pytest.raises(TraceError, match=r"markers: vCPU 0 row 2: ROI begin at icount \d+, a "
                       r"second recording window \(roi=marker\).*record one window per trace"):
        segment(root)
    ks = _simple(tmp_path)
    ks.f.plugin_info = {"schema_version": 1, "options": {"roi": "marker"}, "windows": 3}
    with pytest.raises(TraceError, match=r"plugin.json: 3 recording windows .*roi=all"):
        segment(ks.write(tmp_path / "t"))
    ks = _simple(tmp_path)
    ks.f.plugin_info = {"schema_version": 1, "options": {"sysmap": ""},
                        "symbols": {"idt_table": 0, "__switch_to": 0}}
    with pytest.raises(TraceError, match="recorded without the kernel's System.map"):
        segment(ks.write(tmp_path / "u"))


def test_unmatched_returns_are_counted_with_their_location(tmp_path: Path) -> None:
    ks = tf.KernelSim()
    ks.user(0)
    ks.iret(0, T1, user=1)                    # an interrupt return while in user mode
    ks.user(0)
    ks.sysret(0, T1)                          # and a system call return
    ks.user(0)
    seg = segment(ks.write(tmp_path / "t"))
    texts = {w["text"]: w for w in seg.warnings}
    kin = texts["kernel instruction in an application instance without an entry event"]
    assert kin["where"] == "vCPU 0 icount 4" and kin["count"] == 2
    # Both returns find the unknown kernel context the stray kernel code opened.
    assert texts["interrupt return whose entry was not recorded: vector unknown"]["count"] == 1
    assert "syscalls row 0 (icount 12)" in texts[
        "system call return whose entry was not recorded (entered before the trace, or a new "
        "thread's first return): number unknown"]["where"]
    # Every instruction is still in exactly one piece.
    p = seg.pieces
    assert p["start"].iloc[0] == 0
    assert (p["start"].to_numpy()[1:] == p["stop"].to_numpy()[:-1]).all()
    assert p["stop"].iloc[-1] == seg.vcpu_insns[0]


def test_bad_epoch_length(tmp_path: Path) -> None:
    root = _simple(tmp_path).write(tmp_path / "t")
    with pytest.raises(ValueError, match="epoch_len"):
        segment(root, epoch_len=0)
