"""Per-vCPU checks: executed blocks exist (check a) and event counters add up (check b).

Notation: ``S[r]`` is the number of instructions retired by exec rows before ``r`` (see
:func:`pysched.trace.expand.block_start_icount`). Events recorded at a block boundary
(interrupt entries, context switches) have ``icount == S[exec_row]``. Events recorded by an
instruction callback inside block ``exec_row - 1`` (system call entries and returns, interrupt
returns, markers, device requests) count that instruction, so ``S[exec_row-1] < icount <= S[exec_row]`` and the
instruction at stream index ``icount - 1`` is the one that raised the event. A ROI begin is
either (with ``roi=marker`` it is recorded at the block boundary where recording starts).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..blockindex import BlockIndex
from .static import BLOCKS, FRAMES
from ..execstream import ExecChunk, exec_chunks
from ..reader import Trace
from .findings import Location, Report
from .health import chunk_unknown, unknown_per_block
from ..schema import (
    BLOCK_NONE,
    EVENT_TABLES,
    FLAG_INT80,
    FLAG_IRETQ,
    FLAG_MARKER,
    FLAG_SYSCALL,
    FLAG_SYSRETQ,
    KIND_ENTRY,
    KIND_RETURN,
    MARKER_BEGIN,
    UNKNOWN_PADDR,
)

ICOUNT = "icount"
DEVICE_REQUESTS = "device_requests"
USER_PCS = "user_pcs"

# How an event's icount relates to S (see the module docstring).
_BOUNDARY, _INSIDE, _EITHER = 0, 1, 2


@dataclass
class VcpuStreams:
    """What the event checks need of one vCPU's exec stream, gathered in one walk.

    Only the exec rows that events point at (``exec_row`` and ``exec_row - 1``) are kept, so a
    stream of billions of rows costs no more memory than its events.

    Attributes
    ----------
    vcpu : int
    n : int
        Exec rows.
    total : int or None
        Instructions retired; None when a block is unusable (then counters are not checked).
    events : dict of str to pyarrow.Table
        The vCPU's event tables.
    need : numpy.ndarray of int64
        Sorted exec rows in ``[0, n]`` described by ``s``, ``pos`` and ``block``.
    s : numpy.ndarray of int64
        ``S[row]``: instructions retired before the row.
    pos : numpy.ndarray of int64
        Block-index position of the row's block (-1 at row ``n`` or when not in ``blocks``).
    block : numpy.ndarray of uint32
        Block id of the row (0 at row ``n``).
    """

    vcpu: int
    n: int
    total: int | None
    events: dict[str, pa.Table]
    need: np.ndarray
    s: np.ndarray
    pos: np.ndarray
    block: np.ndarray
    unknown_frames: int = 0  # executed instructions with an unknown frame (check health)

    def at(self, rows: np.ndarray) -> np.ndarray:
        """Indices into ``need``/``s``/``pos``/``block`` of ``rows`` (which must be in ``need``)."""
        return np.searchsorted(self.need, rows)


def _needed_rows(events: dict[str, pa.Table], n: int) -> np.ndarray:
    parts = [np.array([0, n], dtype=np.int64)]
    for t in events.values():
        r = np.clip(t.column("exec_row").to_numpy().astype(np.int64), 0, n)
        parts += [r, np.maximum(r - 1, 0)]
    return np.unique(np.concatenate(parts))


def check_exec(trace: Trace, idx: BlockIndex, vcpu: int, report: Report) -> VcpuStreams:
    """Check a for one vCPU's exec rows, and gather what the event checks need of the stream."""
    events = {name: trace.table(name, vcpu) for name in EVENT_TABLES}
    n = trace.num_rows("exec", vcpu)
    need = _needed_rows(events, n)
    s = np.zeros(len(need), dtype=np.int64)
    pos = np.full(len(need), -1, dtype=np.int64)
    block = np.zeros(len(need), dtype=np.uint32)
    total, usable, unknown = 0, True, 0
    unk = unknown_per_block(idx)
    for c in exec_chunks(trace, vcpu, strict=False):
        def describe(i: int, c: ExecChunk = c) -> tuple[Location, str]:
            p = int(c.pos[i])
            if p < 0:
                why = "not in the blocks table"
            elif idx.count[p] == 0:
                why = "has no rows in the insns table"
            else:
                why = "has malformed insns rows (see above)"
            return (Location("exec", vcpu, row=c.start_row + i, block=int(c.blocks[i])),
                    f"executed block {why}")

        report.add_mask(BLOCKS, ~c.usable, describe)
        usable &= bool(c.usable.all())
        lo, hi = np.searchsorted(need, [c.start_row, c.stop_row])
        if lo < hi:
            local = need[lo:hi] - c.start_row
            s[lo:hi] = c.row_icount()[local]
            pos[lo:hi] = c.pos[local]
            block[lo:hi] = c.blocks[local]
        total += int(c.sizes.sum())
        unknown += chunk_unknown(unk, c.pos, c.usable, c.sizes)
    s[-1] = total  # need[-1] == n
    if not usable:
        report.note(ICOUNT, f"vCPU {vcpu}: counters not checked, its exec stream has "
                            "unusable blocks")
    return VcpuStreams(vcpu, n, total if usable else None, events, need, s, pos, block,
                       unknown)


def _col(t: pa.Table, name: str) -> np.ndarray:
    return t.column(name).to_numpy()


def _rules(name: str, t: pa.Table) -> np.ndarray:
    kind = _col(t, "kind") if "kind" in t.column_names else None
    rule = np.full(t.num_rows, _INSIDE, dtype=np.int8)
    if name in ("switches", "wakeups"):
        # both are taken as the first block of a kernel function starts
        rule[:] = _BOUNDARY
    elif name == "interrupts":
        rule[kind == KIND_ENTRY] = _BOUNDARY
    elif name == "markers":
        # With roi=marker the begin instruction's own block is not recorded.
        rule[kind == MARKER_BEGIN] = _EITHER
    return rule


def _expected_insn(name: str, t: pa.Table) -> tuple[np.ndarray, np.ndarray | None]:
    """Per row: the flag bits the instruction at ``icount-1`` must have (0: do not check) and
    the address it must be at (None: no address column)."""
    n = t.num_rows
    want = np.zeros(n, dtype=np.uint8)
    if name == "syscalls":
        kind, abi = _col(t, "kind"), _col(t, "abi")
        want[(kind == KIND_ENTRY) & (abi == 64)] = FLAG_SYSCALL
        want[(kind == KIND_ENTRY) & (abi == 32)] = FLAG_INT80
        want[(kind == KIND_RETURN) & (abi == 64)] = FLAG_SYSRETQ
        want[(kind == KIND_RETURN) & (abi == 0)] = FLAG_IRETQ
        return want, _col(t, "pc")
    if name == "interrupts":
        want[_col(t, "kind") == KIND_RETURN] = FLAG_IRETQ
        return want, _col(t, "handler")
    if name == "markers":
        want[_col(t, "kind") != MARKER_BEGIN] = FLAG_MARKER
    if name == DEVICE_REQUESTS:  # a store or `out`: no flag, its address only
        return want, _col(t, "pc")
    return want, None


def _check_table(name: str, t: pa.Table, vs: VcpuStreams, idx: BlockIndex,
                 report: Report) -> None:
    v, n = vs.vcpu, vs.n
    icount = _col(t, "icount").astype(np.int64)
    r = _col(t, "exec_row").astype(np.int64)

    def loc(i: int) -> Location:
        return Location(name, v, row=i, icount=int(icount[i]), exec_row=int(r[i]))

    col_vcpu = _col(t, "vcpu")
    report.add_mask(ICOUNT, col_vcpu != v, lambda i: (
        loc(i), f"vcpu column is {col_vcpu[i]} in a part of vCPU {v}"))
    for col in ("icount", "exec_row", "time_ns"):
        a = _col(t, col)
        down = np.concatenate([[False], a[1:] < a[:-1]])
        report.add_mask(ICOUNT, down, lambda i, a=a, col=col: (
            loc(i), f"{col} decreases (previous row has {a[i - 1]})"))

    inside = (r >= 0) & (r <= n)
    report.add_mask(ICOUNT, ~inside, lambda i: (
        loc(i), f"exec_row beyond the exec stream ({n} rows)"))
    rc = np.clip(r, 0, n)
    i_at, i_before = vs.at(rc), vs.at(np.maximum(rc - 1, 0))
    s_at, s_before = vs.s[i_at], vs.s[i_before]
    at_boundary = icount == s_at
    in_block = (rc >= 1) & (s_before < icount) & (icount <= s_at)
    rule = _rules(name, t)
    ok = np.where(rule == _BOUNDARY, at_boundary,
                  np.where(rule == _INSIDE, in_block, at_boundary | in_block))

    def bad_count(i: int) -> tuple[Location, str]:
        if rule[i] == _BOUNDARY:
            return loc(i), f"icount != S[exec_row] = {s_at[i]}"
        if rc[i] == 0:
            return loc(i), "exec_row 0 for an event raised by an instruction of block exec_row-1"
        return loc(i), f"icount not in (S[exec_row-1], S[exec_row]] = ({s_before[i]}, {s_at[i]}]"

    report.add_mask(ICOUNT, inside & ~ok, bad_count)

    # The instruction at icount-1 must be the one that raised an instruction event.
    want, addr = _expected_insn(name, t)
    raised = (want != 0) | (name == DEVICE_REQUESTS)  # rows an instruction raised
    probe = inside & ok & in_block & raised
    sel = np.flatnonzero(probe)
    at = idx.start[vs.pos[i_before[sel]]] + (icount[sel] - 1 - s_before[sel])
    flags = np.zeros(len(r), dtype=np.uint8)
    where = np.zeros(len(r), dtype=np.uint64)
    flags[sel], where[sel] = idx.insn_flags[at], idx.insn_vaddr[at]
    report.add_mask(ICOUNT, probe & (want != 0) & ((flags & want) == 0), lambda i: (
        loc(i), f"the instruction at icount-1 ({where[i]:#x}, flags {flags[i]:#x}) lacks "
                f"flag {want[i]:#x}"))
    if addr is not None:
        report.add_mask(ICOUNT, probe & (addr != where), lambda i: (
            loc(i), f"pc {addr[i]:#x} but the instruction at icount-1 is at {where[i]:#x}"))

    if name == "interrupts":
        _check_interrupt_entries(t, vs, idx, report, loc, rc, i_at, i_before, inside)


def _check_interrupt_entries(t: pa.Table, vs: VcpuStreams, idx: BlockIndex, report: Report,
                             loc: Callable[[int], Location], rc: np.ndarray, i_at: np.ndarray,
                             i_before: np.ndarray, inside: np.ndarray) -> None:
    """Entries: the handler's first block is exec row ``exec_row``; block_retired <= ninsn of
    block ``exec_row - 1``, and a cut block stops at the saved RIP."""
    kind0 = inside & (_col(t, "kind") == KIND_ENTRY)
    starts = kind0 & (rc < vs.n)
    first = np.zeros(len(rc), dtype=np.uint64)
    first[starts] = idx.vaddr[vs.pos[i_at[starts]]]
    handler = _col(t, "handler")
    report.add_mask(ICOUNT, starts & (handler != first), lambda i: (
        loc(i), f"handler {handler[i]:#x} but the block at exec_row starts at {first[i]:#x}"))

    retired = _col(t, "block_retired").astype(np.int64)
    # BLOCK_NONE: no recorded block was interrupted (the first block of a window)
    entry = kind0 & (rc >= 1) & (retired != BLOCK_NONE)
    p = vs.pos[i_before]
    cut_block = vs.block[i_before]
    ninsn = np.zeros(len(rc), dtype=np.int64)
    ninsn[entry] = idx.ninsn[p[entry]]
    report.add_mask(ICOUNT, entry & (retired > ninsn), lambda i: (
        loc(i), f"block_retired {retired[i]} > ninsn {ninsn[i]} of block {cut_block[i]}"))
    cut = entry & (retired < ninsn)
    where = np.zeros(len(rc), dtype=np.uint64)
    where[cut] = idx.insn_vaddr[idx.start[p[cut]] + retired[cut]]
    pc = _col(t, "pc")
    report.add_mask(ICOUNT, cut & (pc != where), lambda i: (
        loc(i), f"interrupted pc {pc[i]:#x} but instruction {retired[i]} of the cut block "
                f"{cut_block[i]} is at {where[i]:#x}"))


def check_events(vs: VcpuStreams, idx: BlockIndex, report: Report) -> None:
    """Check b for one vCPU's event tables (skipped when its stream could not be resolved)."""
    report.start(ICOUNT)
    if vs.total is None:
        return
    for name, t in vs.events.items():
        if t.num_rows:
            _check_table(name, t, vs, idx, report)


def check_mem(trace: Trace, vs: VcpuStreams, report: Report) -> None:
    """``mem`` rows: icount inside the stream and non-decreasing; count unknown paddrs.

    Read part by part: with ``data=on`` this is the largest table.
    """
    v = vs.vcpu
    row0, last, unknown, rows = 0, None, 0, 0
    for part in trace.parts("mem", v):
        t = trace.read_part(part)
        if t.num_rows == 0:
            continue
        icount = _col(t, "icount")

        def loc(i: int, icount: np.ndarray = icount, row0: int = row0) -> Location:
            return Location("mem", v, row=row0 + i, icount=int(icount[i]))

        if vs.total is not None:
            report.add_mask(ICOUNT, icount >= np.uint64(vs.total), lambda i, loc=loc: (
                loc(i), f"icount beyond the vCPU's {vs.total} instructions"))
        prev = np.concatenate([[icount[0] if last is None else last], icount[:-1]])
        report.add_mask(ICOUNT, icount < prev, lambda i, loc=loc, prev=prev: (
            loc(i), f"icount decreases (previous {prev[i]})"))
        unknown += int((_col(t, "paddr") == np.uint64(UNKNOWN_PADDR)).sum())
        rows += t.num_rows
        row0 += t.num_rows
        last = icount[-1]
    if unknown:
        report.note(FRAMES, f"vCPU {v}: {unknown} of {rows} data accesses have no paddr")


def check_user_returns(vs: VcpuStreams, idx: BlockIndex, report: Report) -> None:
    """Interrupt and exception returns to user mode resume at the PC the trace records.

    The block at a return's ``exec_row`` must start at its ``pc`` (the RIP ``iretq`` returns
    to), unless an interrupt or exception is taken before that block runs (QEMU delivers a
    pending interrupt there, and a fault on fetching the code raises one): that entry is then
    at the same ``exec_row`` and its saved ``pc`` is the return's. An entry there that
    interrupted kernel mode (the ``iretq`` itself faulted) leaves nothing to compare. Only
    meaningful for traces whose user blocks are recorded at the address they ran at
    (``plugin.json`` ``user_pcs: "run"``).
    """
    report.start(USER_PCS)
    t = vs.events["interrupts"]
    if vs.total is None or t.num_rows == 0:
        return
    kind, user, pc = _col(t, "kind"), _col(t, "user"), _col(t, "pc")
    r = _col(t, "exec_row").astype(np.int64)
    ret = np.flatnonzero((kind == KIND_RETURN) & (user == 1) & (r >= 0) & (r < vs.n))
    nxt = np.minimum(ret + 1, t.num_rows - 1)
    entry = (ret + 1 < t.num_rows) & (kind[nxt] == KIND_ENTRY) & (r[nxt] == r[ret])
    pos = vs.pos[vs.at(r[ret])]
    start = np.zeros(len(ret), dtype=np.uint64)
    start[pos >= 0] = idx.vaddr[pos[pos >= 0]]

    def loc(k: int) -> Location:
        i = int(ret[k])
        return Location("interrupts", vs.vcpu, row=i, icount=int(_col(t, "icount")[i]),
                        exec_row=int(r[i]))

    report.add_mask(USER_PCS, ~entry & (pos >= 0) & (start != pc[ret]), lambda k: (
        loc(k), f"returns to user pc {pc[ret[k]]:#x} but the block at exec_row starts at "
                f"{start[k]:#x}"))
    report.add_mask(USER_PCS, entry & (user[nxt] == 1) & (pc[nxt] != pc[ret]), lambda k: (
        loc(k), f"returns to user pc {pc[ret[k]]:#x} but the interrupt taken before its first "
                f"block saved pc {pc[nxt[k]]:#x}"))


def check_user_pcs_recorded(info: dict | None, report: Report) -> bool:
    """Whether the plugin recorded user blocks where they ran (``plugin.json`` ``user_pcs``).

    Traces recorded before it did get an info line; a plugin that found a user block's rip at
    another page offset than the block (``user_rip_offset_mismatches``) fails the check.
    """
    info = info or {}
    if info.get("user_pcs") != "run":
        report.note(USER_PCS, "recorded before per-process user PCs; user PCs of shared code "
                              "may be another process's")
        return False
    report.start(USER_PCS)
    bad = int(info.get("user_rip_offset_mismatches", 0) or 0)
    if bad:
        report.add(USER_PCS, Location("plugin.json"),
                   f"{bad} user blocks started at a rip with another page offset than the "
                   "block's (recorded at their translated address)")
    return True
