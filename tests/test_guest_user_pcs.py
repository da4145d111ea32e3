"""User-mode PCs belong to the process that ran them (issue 16 item 1), on the Debian guest.

QEMU shares one translation of a code page among every virtual address that maps its frame,
so two runs of one position-independent binary (``cat``, with its ``libc.so.6`` and
``ld-linux``, each loaded at a random address) run the same translations at other addresses.
Each ``cat`` prints its own ``/proc/self/maps``; every system-call PC and every user
instruction it executed must lie in its own executable mappings, not in the other's.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from guest_capture import capture
from pysched.capture.guest import locate_debian_guest
from pysched.capture.qemu import default_plugin_path
from pysched.trace import expand, open_trace
from pysched.trace.schema import KIND_ENTRY, KIND_RETURN, MARKER_MARK

USER_END = 0x0000800000000000
NR_EXECVE, NR_EXIT_GROUP = 59, 231

pytestmark = pytest.mark.skipif(
    not default_plugin_path().is_file(), reason="plugin not built (make plugin)"
)

# Marks 1..3 bracket the two runs; the maps are printed after the region's work.
CMD = ("roi mark 1; cat /proc/self/maps > /tmp/m1; roi mark 2; "
       "cat /proc/self/maps > /tmp/m2; roi mark 3; "
       "echo '=== m1'; cat /tmp/m1; echo '=== m2'; cat /tmp/m2; echo '=== end'")


def pysched(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pysched.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Path:
    return capture(tmp_path_factory, "userpcs", locate_debian_guest, "--cmd", CMD,
                   "--vcpus", "2", timeout=300)


def code_ranges(console: str, name: str, after: str) -> list[tuple[int, int]]:
    """The executable mappings of one printed ``/proc/self/maps``."""
    section = console.split(f"=== {name}\n", 1)[1].split(f"=== {after}", 1)[0]
    out = []
    for line in section.splitlines():
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S{4})", line.strip())
        if m and m.group(3)[2] == "x":
            out.append((int(m.group(1), 16), int(m.group(2), 16)))
    assert out, f"no executable mapping in {name}"
    return out


def inside(pcs: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    pcs = np.asarray(pcs, dtype=np.uint64)
    ok = np.zeros(len(pcs), dtype=bool)
    for lo, hi in ranges:
        ok |= (pcs >= np.uint64(lo)) & (pcs < np.uint64(hi))
    return ok


def cat_rows(trace, i: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The system calls and user-mode returns of the i-th ``cat``: its thread's rows after its
    ``execve`` (which runs the shell's code) up to its ``exit_group``, between marks i, i+1.

    Page tables and task structs are reused, so ``cr3`` and ``thread`` alone do not tell the
    ``cat`` from the ``roi`` process that ran just before it.
    """
    mk = trace.df("markers")
    t0, t1 = (int(mk[(mk.kind == MARKER_MARK) & (mk.value == v)].time_ns.iloc[0])
              for v in (i, i + 1))
    sc = trace.df("syscalls").sort_values("time_ns")
    win = sc[(sc.time_ns > t0) & (sc.time_ns < t1)]
    exit_ = win[(win.kind == KIND_ENTRY) & (win.nr == NR_EXIT_GROUP)].iloc[-1]
    mine = win[win.thread == exit_.thread]
    execve = mine[(mine.kind == KIND_ENTRY) & (mine.nr == NR_EXECVE)].iloc[-1]
    lo, hi = execve.time_ns, exit_.time_ns
    calls = mine[(mine.time_ns > lo) & (mine.time_ns <= hi)]
    ir = trace.df("interrupts")
    iret = ir[(ir.kind == KIND_RETURN) & (ir.user == 1) & (ir.thread == exit_.thread)
              & (ir.time_ns > lo) & (ir.time_ns <= hi)]
    resumes = pd.concat([calls[calls.kind == KIND_RETURN][["vcpu", "exec_row"]],
                         iret[["vcpu", "exec_row"]]])
    return calls[calls.kind == KIND_ENTRY], resumes


def user_pcs_after(trace, resumes: pd.DataFrame) -> np.ndarray:
    """User-mode PCs executed from each return to user mode up to the vCPU's next system call
    or interrupt (the next kernel entry)."""
    out = []
    for v, rows in resumes.groupby("vcpu"):
        v = int(v)
        events = np.sort(np.concatenate([trace.df("syscalls", v).exec_row.to_numpy(),
                                         trace.df("interrupts", v).exec_row.to_numpy()]))
        starts = rows.exec_row.to_numpy()
        ends = events[np.searchsorted(events, starts, side="right")]
        st = expand(trace, v)
        for a, b in zip(starts, ends):
            pcs = st.pc[st.row_start[a]:st.row_start[b]]
            out.append(pcs[pcs < np.uint64(USER_END)])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.uint64)


def test_each_process_runs_at_its_own_addresses(traced: Path) -> None:
    trace = open_trace(traced)
    console = (traced / "console.log").read_text()
    maps = {1: code_ranges(console, "m1", "m2"), 2: code_ranges(console, "m2", "end")}
    # ASLR put the two processes' code elsewhere: otherwise this test shows nothing.
    assert not set(maps[1]) & set(maps[2])
    for i, other in ((1, 2), (2, 1)):
        calls, resumes = cat_rows(trace, i)
        assert len(calls) >= 20, calls
        assert inside(calls.pc, maps[i]).all(), [hex(p) for p in calls.pc[~inside(calls.pc,
                                                                                  maps[i])]]
        assert not inside(calls.pc, maps[other]).any()
        pcs = user_pcs_after(trace, resumes)
        assert len(pcs) > 10_000
        assert inside(pcs, maps[i]).all(), f"cat {i}: {(~inside(pcs, maps[i])).sum()} PCs"
    info = json.loads((traced / "plugin.json").read_text())
    assert info["user_pcs"] == "run" and info["user_variants"] > 0
    assert info["user_rip_offset_mismatches"] == 0


def test_check_verifies_user_returns(traced: Path) -> None:
    r = pysched("check", str(traced))
    assert r.returncode == 0, r.stdout
    assert "check user_pcs: ok" in r.stdout
    ir = open_trace(traced).df("interrupts")
    assert ((ir.kind == KIND_RETURN) & (ir.user == 1)).sum() > 50  # returns it compared
