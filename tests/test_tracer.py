"""End-to-end tests of the tracer: a real guest under QEMU with the plugin, checked against
the guest kernel's own accounting."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pysched.capture.guest import locate_guest, write_run_initrd
from pysched.capture.qemu import default_plugin_path, plugin_options, qemu_argv
from pysched.trace import block_sizes, expand, open_trace
from pysched.trace.insns_codec import INSNS_GAP
from pysched.trace.schema import EVENT_TABLES

KTEXT = 0xFFFFFFFF80000000
LOCAL_TIMER_VECTOR = 0xEC  # LOC in /proc/interrupts
SYSLOOP_N = 300
INT80_N = 50

pytestmark = pytest.mark.skipif(
    not default_plugin_path().is_file(), reason="plugin not built (make plugin)"
)


def pysched(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pysched.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trace") / "t"
    # The harness reads /proc/interrupts outside the region: the command reads it inside,
    # between marks, for test_timer_interrupts_match_proc_interrupts.
    cmd = ("roi mark 101; cat /proc/interrupts > /tmp/i0; roi mark 102; "
           f"sysloop {SYSLOOP_N}; int80 {INT80_N}; spin 20 & spin 20 & wait; "
           "roi mark 103; cat /proc/interrupts > /tmp/i1; roi mark 104; "
           "echo '=== test interrupts before ==='; cat /tmp/i0; "
           "echo '=== test interrupts after ==='; cat /tmp/i1")
    r = pysched("trace", "--guest", "busybox", "--cmd", cmd, "--out", str(out), "--vcpus", "2")
    assert r.returncode == 0, r.stderr
    return out


def test_trace_command_outputs(traced: Path) -> None:
    manifest = json.loads((traced / "manifest.json").read_text())
    for key in ("command", "kernel_version", "qemu_version", "plugin_options", "date"):
        assert manifest.get(key), key
    assert "SPIN done" in (traced / "console.log").read_text()
    info = json.loads((traced / "plugin.json").read_text())
    assert info["final"] and info["ram_base_mismatches"] == 0


def test_check_passes(traced: Path) -> None:
    r = pysched("check", str(traced))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check timer: ok" in r.stdout


def test_instruction_clock_runs_the_vcpus_round_robin_and_tells_them_apart(traced: Path,
                                                                          woken: Path) -> None:
    """The default clock: QEMU's -icount, one thread for both vCPUs; the plugin finds which
    vCPU runs (qemu-plugin/README.md, round-robin TCG) and every callback was resolved. The
    host-clock capture runs each vCPU on its own thread."""
    manifest = json.loads((traced / "manifest.json").read_text())
    assert manifest["guest_clock"]["source"] == "insns"
    assert manifest["guest_clock"]["insn_rate_per_vcpu"] == 5e8
    assert "-icount" in manifest["qemu_argv"]
    info = json.loads((traced / "plugin.json").read_text())
    assert info["round_robin"] is True and info["vcpu_unresolved"] == 0
    trace = open_trace(traced)
    assert all(trace.num_rows("switches", v) for v in trace.vcpus)
    host = json.loads((woken / "plugin.json").read_text())
    assert host["round_robin"] is False
    assert json.loads((woken / "manifest.json").read_text())["guest_clock"]["source"] == "host"


def test_counters_are_sums_of_retired_blocks(traced: Path) -> None:
    trace = open_trace(traced)
    info = json.loads((traced / "plugin.json").read_text())
    for v in trace.vcpus:
        assert int(block_sizes(trace, v).sum()) == info["icount"][v]


def sysloop_thread(trace) -> tuple[int, dict[str, int]]:
    console = (trace.path / "console.log").read_text()
    m = re.search(r"SYSLOOP (.*)", console)
    assert m, "sysloop output missing from the console"
    counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}
    markers = trace.df("markers")
    rows = markers[(markers.kind == 2) & (markers.value == 7)]
    assert len(rows) == 1
    return int(rows.thread.iloc[0]), counts


def test_syscalls_match_kernel_accounting(traced: Path) -> None:
    trace = open_trace(traced)
    thread, kernel = sysloop_thread(trace)
    sc = trace.df("syscalls").sort_values("time_ns")
    mine = sc[(sc.thread == thread) & (sc.kind == 0)]
    # /proc/self/io is read twice (openat + read each); between those two reads the program
    # made exactly the loop's reads and writes, and the kernel counted the first read too.
    reads = mine[mine.nr == 0].reset_index(drop=True)
    proc_reads = reads.index[reads.arg2 == 4095].tolist()  # the /proc reads use a 4095-byte buffer
    assert len(proc_reads) == 2, reads
    first, last = proc_reads
    between = mine[(mine.time_ns >= reads.time_ns[first]) & (mine.time_ns < reads.time_ns[last])]
    assert (between.nr == 0).sum() == kernel["syscr"] - kernel["syscr0"] == SYSLOOP_N + 1
    assert (between.nr == 1).sum() == kernel["syscw"] - kernel["syscw0"] == SYSLOOP_N
    # every return of this thread has its entry
    rets = sc[(sc.thread == thread) & (sc.kind == 1)]
    assert rets.matched.all()
    assert len(rets) in (len(mine), len(mine) - 1)  # exit_group does not return


def test_int80_syscalls(traced: Path) -> None:
    trace = open_trace(traced)
    pid = int(re.search(r"INT80 pid=(\d+)", (traced / "console.log").read_text()).group(1))
    markers = trace.df("markers")
    thread = int(markers[(markers.kind == 2) & (markers.value == 8)].thread.iloc[0])
    sc = trace.df("syscalls")
    mine = sc[(sc.thread == thread) & (sc.time_ns > markers[markers.value == 8].time_ns.iloc[0])]
    entries = mine[(mine.kind == 0) & (mine.abi == 32)]
    assert len(entries) == INT80_N and (entries.nr == 20).all()
    rets = mine[(mine.kind == 1) & (mine.ret == pid)]
    assert len(rets) >= INT80_N and rets.matched.all()


def proc_interrupt_counts(console: str, which: str) -> list[int]:
    section = console.split(f"=== test interrupts {which} ===", 1)[1]
    for line in section.splitlines():
        if line.strip().startswith("LOC:"):
            return [int(x) for x in line.split()[1:3]]
    raise AssertionError("LOC line missing")


def test_timer_interrupts_match_proc_interrupts(traced: Path) -> None:
    trace = open_trace(traced)
    console = (traced / "console.log").read_text()
    before, after = (proc_interrupt_counts(console, w) for w in ("before", "after"))
    it = trace.df("interrupts")
    marks = trace.df("markers").set_index("value").time_ns
    # /proc/interrupts was read between marks 101 and 102 (before) and 103 and 104 (after):
    # the traced count over the inner window is a lower bound, the outer window an upper one.
    loc = it[(it.kind == 0) & (it.vector == LOCAL_TIMER_VECTOR)]
    assert len(loc) > 0
    for cpu in trace.vcpus:
        t = loc[loc.vcpu == cpu].time_ns
        inner = ((t > marks[102]) & (t < marks[103])).sum()
        outer = ((t > marks[101]) & (t < marks[104])).sum()
        assert inner <= after[cpu] - before[cpu] <= outer, (cpu, inner, outer, before, after)


def test_kernel_text_frames_follow_the_fixed_mapping(traced: Path) -> None:
    # The default boots with KASLR: the kernel image is at vaddr - KTEXT + phys_base, both
    # moved by the kernel at boot and found by the plugin (plugin.json). The plugin writes
    # insns gap-encoded: the frames below are the reader's, derived from the block's rows.
    trace = open_trace(traced)
    assert {p.encoding for p in trace.parts("insns")} == {INSNS_GAP}
    info = trace.plugin_info
    assert info["kaslr"]["found"] and info["kaslr"]["verified_by_idt"], info["kaslr"]
    assert info["phys_base_found"]
    base = info["phys_base"]
    insns = trace.df("insns")
    k = insns[(insns.vaddr >= KTEXT) & (insns.vaddr < 0xFFFFFFFFC0000000)]
    assert len(k) > 1000
    want = (k.vaddr.to_numpy() - np.uint64((KTEXT - base) % 2**64)) >> np.uint64(12)
    assert ((k.paddr.to_numpy() >> np.uint64(12)) == want).all()


def test_processes_of_one_binary_share_frames(traced: Path) -> None:
    trace = open_trace(traced)
    sw = trace.df("switches")
    # (pc, thread, frame) of every user-mode instruction, the thread from the last context
    # switch before it. Static binaries all load at the same addresses, so one pc can belong to
    # several programs: the two spin processes are the threads that ran its hot loop millions
    # of times. (Threads, not cr3: a forked shell that execs spin gets a new address space with
    # no context switch in between, so the cr3 of the last switch can be the shell's.)
    pcs, threads, frames = [], [], []
    for v in trace.vcpus:
        s = expand(trace, v)
        user = s.pc < 0x800000000000
        swv = sw[sw.vcpu == v]
        at = np.searchsorted(swv.exec_row.to_numpy(), s.block_row[user], "right") - 1
        known = at >= 0
        pcs.append(s.pc[user][known])
        threads.append(swv.next.to_numpy()[at[known]])
        frames.append(s.paddr[user][known] >> 12)
    pc, thread, frame = (np.concatenate(a) for a in (pcs, threads, frames))
    values, counts = np.unique(pc, return_counts=True)
    hot = pc == values[counts.argmax()]
    spinners, per_thread = np.unique(thread[hot], return_counts=True)
    spin_threads = spinners[per_thread > 1_000_000]
    assert len(spin_threads) == 2, dict(zip(spinners, per_thread))
    # They run it from one frame of the page cache. The kernel may migrate that page while
    # they run (compaction: the busybox guest's root is tmpfs, whose pages are movable), and
    # then both move to the new frame together: so the two threads' frame sets share a frame,
    # and most of the hot loop's executions come from frames both used. Private copies would
    # give two disjoint sets.
    a, b = (hot & (thread == t) for t in spin_threads)
    common = np.intersect1d(frame[a], frame[b])
    assert len(common), (np.unique(frame[a]), np.unique(frame[b]))
    assert np.isin(frame[a | b], common).mean() > 0.5, (np.unique(frame[a]), np.unique(frame[b]))


# --- wake-ups ------------------------------------------------------------------------------

# System calls whose switch-out is a block, not a preemption: a sleep, and a wait for a child
# (ash's wait4) that is still running.
NR_NANOSLEEP, NR_WAIT4, NR_CLOCK_NANOSLEEP = 35, 61, 230
WAKE_TTWU, WAKE_NEW, WAKE_DONE = 1, 2, 3


@pytest.fixture(scope="module")
def woken(tmp_path_factory) -> Path:
    """A short run whose threads block: sleeps (woken by the timer interrupt), a pipe reader
    woken by its writer, and the shell waiting for its children. On the host's clock
    (multi-threaded TCG), so that this module also records without -icount."""
    out = tmp_path_factory.mktemp("wake") / "t"
    cmd = "sleep 0.05; (sleep 0.03; echo piped) | cat; sleep 0.02 & sleep 0.02 & wait"
    r = pysched("trace", "--guest", "busybox", "--cmd", cmd, "--out", str(out), "--vcpus", "2",
                "--clock", "host")
    assert r.returncode == 0, r.stderr
    return out


def blocking_gaps(trace) -> list[tuple[int, int, int, int, int]]:
    """(thread, nr, time switched out, time switched in again, time the system call was
    entered) of every switch-out that came while the thread was inside a blocking system call
    of the list above."""
    sw = trace.df("switches").sort_values("time_ns")
    sc = trace.df("syscalls").sort_values("time_ns")
    gaps = []
    for thread, rows in sc.groupby("thread"):
        outs = sw[sw.prev == thread].time_ns.to_numpy()
        ins = sw[sw.next == thread].time_ns.to_numpy()
        times, kinds, nrs = rows.time_ns.to_numpy(), rows.kind.to_numpy(), rows.nr.to_numpy()
        for t_out in outs:
            last = np.searchsorted(times, t_out) - 1
            later = ins[ins > t_out]
            if last < 0 or kinds[last] != 0 or not len(later):
                continue  # not inside a system call, or never ran again while recorded
            if nrs[last] in (NR_NANOSLEEP, NR_WAIT4, NR_CLOCK_NANOSLEEP):
                gaps.append((int(thread), int(nrs[last]), int(t_out), int(later[0]),
                             int(times[last])))
    return gaps


def test_woken_trace_checks(woken: Path) -> None:
    r = pysched("check", str(woken))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check wakeups: ok" in r.stdout


def test_every_blocked_thread_that_ran_again_was_woken(woken: Path) -> None:
    trace = open_trace(woken)
    wk = trace.df("wakeups")
    gaps = blocking_gaps(trace)
    woken_gaps = []
    for thread, nr, t_out, t_in, t_call in gaps:
        mine = wk[(wk.woken == thread) & (wk.time_ns > t_out) & (wk.time_ns < t_in)]
        # its effect (the task made runnable) while it was switched out; a gap without one is
        # a preemption inside the system call (runnable all along, qemu-plugin/README.md),
        # which happens now and then, e.g. to the shell in wait4 while its children start
        if not (mine.kind == WAKE_DONE).any():
            continue
        woken_gaps.append(nr)
        # and the call (in the waker's context) before that effect, since the system call
        # began: a waker on another vCPU may call try_to_wake_up while the sleeper is still
        # switching out (p->on_cpu), before its switches row; the kernel then queues the
        # wake-up on the sleeper's CPU (ttwu_queue_wakelist), whose kind-3 row comes later
        done = mine.time_ns[mine.kind == WAKE_DONE].max()
        calls = wk[(wk.woken == thread) & (wk.kind == WAKE_TTWU) & (wk.time_ns > t_call)
                   & (wk.time_ns <= done)]
        assert len(calls), (hex(thread), nr)
    assert NR_WAIT4 in woken_gaps and len(woken_gaps) >= 4, (woken_gaps, gaps)
    assert {NR_NANOSLEEP, NR_CLOCK_NANOSLEEP} & set(woken_gaps), (woken_gaps, gaps)
    # the children the shell forked were woken as new tasks before they first ran
    assert (wk.kind == WAKE_NEW).sum() >= 4


def test_timer_sleep_is_woken_from_the_timer_interrupt(woken: Path) -> None:
    """The waking context is the segmentation's instance at the call's vCPU and icount."""
    from pysched.superfunctions import segment
    from pysched.superfunctions.functype import Category
    trace = open_trace(woken)
    seg = segment(trace)
    pieces, inst = seg.pieces, seg.instances
    wk = trace.df("wakeups")
    sleeps = [g for g in blocking_gaps(trace) if g[1] in (NR_NANOSLEEP, NR_CLOCK_NANOSLEEP)]
    checked = 0
    for thread, _, t_out, t_in, t_call in sleeps:
        mine = wk[(wk.woken == thread) & (wk.time_ns > t_out) & (wk.time_ns < t_in)]
        if not (mine.kind == WAKE_DONE).any():
            continue  # preempted inside the sleep, runnable all along (the test above)
        # the call that made it runnable: since the sleep began (it may precede the switch-out,
        # the test above says why), up to the effect
        done = mine.time_ns[mine.kind == WAKE_DONE].max()
        call = wk[(wk.woken == thread) & (wk.kind == WAKE_TTWU) & (wk.time_ns > t_call)
                  & (wk.time_ns <= done)].iloc[-1]
        checked += 1
        p = pieces[(pieces.vcpu == call.vcpu) & (pieces.start <= call.icount)
                   & (pieces.stop > call.icount)]
        assert len(p) == 1
        waker = inst.loc[int(p.instance.iloc[0])]
        assert waker.category == Category.INTERRUPT, waker
        assert waker.number == LOCAL_TIMER_VECTOR, waker
    assert checked, sleeps


def plugin_refuses(tmp_path: Path, options: str) -> str:
    """Start QEMU with the plugin and ``options`` (after ``out=``); it must fail. Its stderr."""
    guest = locate_guest()
    argv = qemu_argv(guest.vmlinuz, guest.initramfs, 256, 1, default_plugin_path(),
                     f"out={tmp_path / 'o'},{options}")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    return r.stderr


def test_bad_option_fails_cleanly(tmp_path: Path) -> None:
    assert "bogus" in plugin_refuses(tmp_path, "bogus=1")


@pytest.mark.parametrize("value", ["0", "-5", "12M", "1e6", "", "20000000x"])
def test_bad_roi_insns_fails_cleanly(tmp_path: Path, value: str) -> None:
    err = plugin_refuses(tmp_path, f"roi_insns={value}")
    assert f"roi_insns={value}: expected a positive instruction count" in err


@pytest.mark.parametrize("key", ["zstd", "exec_zstd"])
@pytest.mark.parametrize("value", ["0", "23", "x"])
def test_bad_zstd_level_fails_cleanly(tmp_path: Path, key: str, value: str) -> None:
    assert f"{key}={value}: expected a level from 1 to 22" in plugin_refuses(tmp_path,
                                                                           f"{key}={value}")


def test_roi_insns_needs_marker_mode(tmp_path: Path) -> None:
    err = plugin_refuses(tmp_path, "roi=all,roi_insns=1000")
    assert "roi_insns=1000: needs roi=marker" in err


ROI_INSNS = 30_000_000
MAX_BLOCK_INSNS = 512  # QEMU's largest translation block (TCG_MAX_INSNS)


def test_roi_insns_stops_every_vcpu_at_the_bound(tmp_path: Path) -> None:
    out = tmp_path / "roi"
    # Each spin retires about 200 M instructions: far more than the bound, so the plugin ends
    # the region, and the command then runs to its end untraced.
    r = pysched("trace", "--guest", "busybox", "--cmd", "spin 200 & spin 200 & wait",
                "--out", str(out), "--vcpus", "2", "--roi-insns", str(ROI_INSNS))
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr
    assert (out / "console.log").read_text().count("SPIN done") == 2
    info = json.loads((out / "plugin.json").read_text())
    assert info["final"] and info["options"]["roi_insns"] == ROI_INSNS
    assert info["windows"] == 1 and info["roi_insns_ends"] == 1 and not info["recording"]
    trace = open_trace(out)
    assert trace.vcpus == [0, 1]
    for v in trace.vcpus:
        sizes = block_sizes(trace, v)
        total = int(sizes.sum())
        assert total == info["icount"][v] == info["window_icount"][v]
        # stopped at the first block boundary at or after the bound
        assert int(sizes[:-1].sum()) < ROI_INSNS <= total < ROI_INSNS + MAX_BLOCK_INSNS, v
        # one stop in the one region, taken after the vCPU's last row (pysched check's
        # wake-up check relies on it)
        last = max(int(trace.df(t, v).time_ns.max()) for t in EVENT_TABLES
                   if len(trace.df(t, v)))
        assert len(info["bound_stop_ns"][v]) == 1 and info["bound_stop_ns"][v][0] >= last, v
    manifest = json.loads((out / "manifest.json").read_text())
    assert f"roi_insns={ROI_INSNS}" in manifest["plugin_options"]
    assert manifest["roi_bound"]["insns_bound_reached"] is True
    # the region's end is the bound's, not a marker
    assert set(trace.df("markers").kind) <= {0, 2}
    c = pysched("check", str(out))
    assert c.returncode == 0, c.stdout + c.stderr


@pytest.mark.slow
def test_roi_insns_idle_vcpu_ends_at_the_timeout(tmp_path: Path) -> None:
    out = tmp_path / "idle"
    # One busy vCPU (the spin is pinned to vCPU 0), one idle: the idle one cannot reach the
    # bound before the timeout.
    r = pysched("trace", "--guest", "busybox", "--cmd", "taskset 1 spin 100000", "--out", str(out),
                "--vcpus", "2", "--roi-insns", "300M", "--timeout", "60")
    assert r.returncode == 1
    assert "timed out after 60 s" in r.stderr
    assert "the region was still open" in r.stderr and "vCPU" in r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["roi_bound"]["insns_bound_reached"] is False
    info = json.loads((out / "plugin.json").read_text())
    assert info["final"] and info["roi_insns_ends"] == 0
    # the idle vCPU fell short (how far the busy one got depends on the host's speed)
    assert min(info["window_icount"]) < 300_000_000
    assert max(info["window_icount"]) > min(info["window_icount"])
    idle = info["window_icount"].index(min(info["window_icount"]))
    assert info["bound_stop_ns"][idle] == []


def test_unwritable_output_fails_cleanly(tmp_path: Path) -> None:
    guest = locate_guest()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    argv = qemu_argv(guest.vmlinuz, guest.initramfs, 256, 1, default_plugin_path(),
                     f"out={blocker / 'sub'}")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    assert "out=" in r.stderr and "cannot create" in r.stderr


def test_sigkill_keeps_completed_parts(tmp_path: Path) -> None:
    guest = locate_guest()
    initrd = write_run_initrd(guest.initramfs, "spin 3000", tmp_path / "run.img")
    out = tmp_path / "killed"
    opts = plugin_options(out, guest.system_map, 256) + ",rows=65536"
    argv = qemu_argv(guest.vmlinuz, initrd, 256, 2, default_plugin_path(), opts)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(list((out / "exec").glob("*.parquet"))) < 6:
            assert time.monotonic() < deadline and proc.poll() is None, "no parts written"
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    parts = sorted(out.rglob("*.parquet"))
    rows = 0
    for p in parts:  # every visible part is a whole Parquet file
        meta = pq.read_metadata(p)
        assert meta.metadata[b"pysched.schema_version"] == b"1"
        if p.parent.name == "exec":  # a successor-encoded part: its decoded rows
            assert meta.metadata[b"pysched.encoding"] == b"exec-successor/2"
            rows += int(meta.metadata[b"pysched.exec_rows"])
    assert rows >= 6 * 65536
    trace = open_trace(out)
    for v in trace.vcpus:
        assert block_sizes(trace, v).sum() > 0


def test_whole_run_mode_records_the_boot(tmp_path: Path) -> None:
    out = tmp_path / "all"
    # One vCPU: the whole boot is recorded either way, and a second vCPU triples the time
    # (other tests record several vCPUs in the region).
    r = pysched("trace", "--guest", "busybox", "--roi", "all", "--cmd", "true", "--out", str(out),
                "--vcpus", "1")
    assert r.returncode == 0, r.stderr
    info = json.loads((out / "plugin.json").read_text())
    assert info["final"] and info["options"]["roi"] == "all"
    assert (info["options"]["zstd"], info["options"]["exec_zstd"]) == (1, 9)  # the defaults
    assert all(n > 10_000_000 for n in info["icount"])  # the boot itself is recorded
    trace = open_trace(out)
    it = trace.df("interrupts")
    assert (it.vector == LOCAL_TIMER_VECTOR).any()  # the IDT was picked up during the boot
    kinds = set(trace.df("markers").kind)
    assert {0, 1} <= kinds  # begin/end of init.sh recorded as plain markers


def test_blocked_threads_have_the_wakeup_that_released_them(traced: Path) -> None:
    """Wake-up rows name the running thread as waker and a real task as woken: every task
    that clone made runnable ran later, and a shell blocked in wait4 was woken."""
    from pysched.trace import open_trace
    t = open_trace(traced)
    wk = t.df("wakeups")
    sw = t.df("switches").sort_values("time_ns")
    assert len(wk) > 0 and set(wk["kind"]) <= {1, 2, 3}
    assert (wk["woken"] != 0).all()
    # every new task made runnable by clone appears as a switch's next later on
    new = set(wk.loc[wk["kind"] == 2, "woken"])
    assert new and new <= set(sw["next"])
    # the waker is the thread running on that vCPU: the one its last switch brought in
    checked = 0
    for v, w in wk.groupby("vcpu"):
        s_v = sw[sw["vcpu"] == v].sort_values("icount")
        j = np.searchsorted(s_v["icount"].to_numpy(), w["icount"].to_numpy(), "right") - 1
        ok = j >= 0
        assert (s_v["next"].to_numpy()[j[ok]] == w["waker"].to_numpy()[ok]).all()
        checked += int(ok.sum())
    assert checked > 0.9 * len(wk)
    # the shell waiting for its children (wait4) blocked and was woken at least once
    sc = t.df("syscalls")
    waiters = set(sc.loc[(sc["kind"] == 0) & (sc["nr"] == 61), "thread"])
    assert waiters & set(wk["woken"])


def test_a_corrupted_page_is_named_not_a_traceback(traced: Path, tmp_path: Path) -> None:
    """The plugin writes page checksums; a byte flipped inside a part's data is reported by
    check and analyse as a damaged file of its table (issue 12)."""
    import shutil
    copy = tmp_path / "t"
    shutil.copytree(traced, copy)
    part = max((copy / "syscalls").glob("*.parquet"), key=lambda p: p.stat().st_size)
    data = bytearray(part.read_bytes())
    mid = len(data) // 3  # inside the column chunks, before the footer
    data[mid] ^= 0xFF
    part.write_bytes(bytes(data))
    for args in (("check", str(copy)), ("analyse", str(copy), "--out", str(tmp_path / "r"))):
        r = pysched(*args)
        assert r.returncode != 0
        text = r.stdout + r.stderr
        assert "Traceback" not in text
        assert part.name in text and "syscalls" in text
