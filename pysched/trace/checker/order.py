"""Checks across vCPUs, in ``time_ns`` order: system call pairing (c), ROI markers (e) and
wake-ups (f).

``time_ns`` is only an approximate global order, but a thread's system call entry and return
(even on two vCPUs, after a migration) are separated by far more than the clock's error; ties
are broken by vCPU and row.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...constants import KERNEL_SPACE
from ..schema import (
    KIND_ENTRY,
    KIND_RETURN,
    MARKER_BEGIN,
    MARKER_END,
    MARKER_MARK,
    WAKE_DONE,
    WAKE_SYMBOLS,
    WAKE_TTWU,
)
from .findings import Location, Report

if TYPE_CHECKING:
    from ..blockindex import BlockIndex
    from .vcpu import VcpuStreams

SYSCALLS = "syscalls"
MARKERS = "markers"
WAKEUPS = "wakeups"


def _merged(tables: dict[int, pa.Table], columns: list[str]) -> dict[str, np.ndarray]:
    """Columns of all vCPUs' tables plus ``vcpu``/``row``, sorted by (time_ns, vcpu, row)."""
    out: dict[str, list[np.ndarray]] = {c: [] for c in columns + ["_vcpu", "_row"]}
    for v, t in sorted(tables.items()):
        for c in columns:
            out[c].append(t.column(c).to_numpy())
        out["_vcpu"].append(np.full(t.num_rows, v, dtype=np.int64))
        out["_row"].append(np.arange(t.num_rows, dtype=np.int64))
    arrays = {c: (np.concatenate(a) if a else np.zeros(0, dtype=np.int64))
              for c, a in out.items()}
    order = np.lexsort((arrays["_row"], arrays["_vcpu"], arrays["time_ns"]))
    return {c: a[order] for c, a in arrays.items()}


def _loc(table: str, m: dict[str, np.ndarray], i: int) -> Location:
    return Location(table, int(m["_vcpu"][i]), row=int(m["_row"][i]),
                    icount=int(m["icount"][i]), exec_row=int(m["exec_row"][i]))


def _check_syscall_values(m: dict[str, np.ndarray], report: Report) -> None:
    kind, abi = m["kind"], m["abi"]
    entry, ret = kind == KIND_ENTRY, kind == KIND_RETURN
    checks = [
        (~(entry | ret), lambda i: f"kind {kind[i]} is neither 0 (entry) nor 1 (return)"),
        (entry & (abi != 64) & (abi != 32), lambda i: f"entry abi {abi[i]} is not 64 or 32"),
        (ret & (abi != 64) & (abi != 0), lambda i: f"return abi {abi[i]} is not 64 or 0"),
        (ret & (m["nr"] != -1), lambda i: f"return has nr {m['nr'][i]}, expected -1"),
        (entry & (m["ret"] != 0), lambda i: f"entry has ret {m['ret'][i]}, expected 0"),
        (ret & (m["matched"] > 1), lambda i: f"matched {m['matched'][i]} is not 0 or 1"),
    ]
    for mask, msg in checks:
        report.add_mask(SYSCALLS, mask, lambda i, msg=msg: (_loc(SYSCALLS, m, i), msg(i)))


def check_syscalls(tables: dict[int, pa.Table], report: Report) -> None:
    """Check c: every return with ``matched == 1`` closes an open entry of its thread.

    Walking all vCPUs' rows in time order, each thread (nonzero key) has a count of open
    entries: an entry opens one, a matched return must find one open and closes it. Returns with
    ``matched == 0`` and rows of unknown threads (key 0) are counted as info, not violations;
    so are entries still open at the end (``exit``, or blocked when recording stopped).

    Parameters
    ----------
    tables : dict of int to pyarrow.Table
        Each vCPU's ``syscalls`` table.
    report : Report
        Receives violations under ``"syscalls"``.
    """
    report.start(SYSCALLS)
    m = _merged(tables, ["time_ns", "icount", "exec_row", "kind", "thread", "abi", "nr",
                         "ret", "matched"])
    _check_syscall_values(m, report)
    open_: Counter[int] = Counter()
    unknown_thread = unmatched = unmatched_open = reentered = 0
    for i, (kind, thread, matched) in enumerate(zip(m["kind"].tolist(), m["thread"].tolist(),
                                                    m["matched"].tolist())):
        if thread == 0:
            unknown_thread += 1
        elif kind == KIND_ENTRY:
            reentered += open_[thread] > 0
            open_[thread] += 1
        elif kind == KIND_RETURN and matched == 0:
            unmatched += 1
            unmatched_open += open_[thread] > 0
        elif kind == KIND_RETURN and matched == 1:
            if open_[thread] > 0:
                open_[thread] -= 1
            else:
                report.add(SYSCALLS, _loc(SYSCALLS, m, i),
                           f"return with matched=1 but thread {thread:#x} has no open entry")
    for count, what in [
        (unknown_thread, "rows with unknown thread (key 0), not paired"),
        (unmatched, "returns with matched=0 (entered before recording, or a new thread)"),
        (unmatched_open, "of those matched=0 returns came while the thread had an open entry"),
        (reentered, "entries while the thread already had an open entry"),
        (sum(1 for c in open_.values() if c > 0), "threads with entries still open at the end"),
    ]:
        if count:
            report.note(SYSCALLS, f"{count} {what}")


def check_markers(tables: dict[int, pa.Table], roi: str, report: Report,
                  bound_ends: int = 0) -> None:
    """Check e: in time order over all vCPUs, begin and end alternate starting with a begin,
    and marks lie between a begin and its end.

    With ``roi=all`` markers do not switch recording, so a broken structure is the guest's
    business: it is reported as info instead. ``bound_ends`` is ``plugin.json``'s
    ``roi_insns_ends``: regions the plugin's ``roi_insns`` bound ended, which leave no end row.
    """
    report.start(MARKERS)
    m = _merged(tables, ["time_ns", "icount", "exec_row", "kind"])
    strict = roi != "all"
    inside = False
    # Regions the bound ended have no end row: that many begins may follow an open region.
    bound_left = bound_ends
    for i, kind in enumerate(m["kind"].tolist()):
        problem = None
        if kind == MARKER_BEGIN:
            if inside and bound_left > 0:
                bound_left -= 1
            elif inside:
                problem = "begin inside a region (no end since the previous begin)"
            inside = True
        elif kind == MARKER_END:
            problem = None if inside else "end outside a region (no begin before it)"
            inside = False
        elif kind == MARKER_MARK:
            problem = None if inside else "mark outside a region"
        else:
            report.add(MARKERS, _loc(MARKERS, m, i), f"kind {kind} is not 0, 1 or 2")
        if problem and strict:
            report.add(MARKERS, _loc(MARKERS, m, i), problem)
        elif problem:
            report.note(MARKERS, f"{_loc(MARKERS, m, i)}: {problem} (roi=all)")
    if len(m["kind"]) == 0:
        report.note(MARKERS, "no markers")
    elif inside and bound_left > 0:
        report.note(MARKERS, "the last region was ended by the roi_insns bound (no end marker)")
    elif inside:
        report.note(MARKERS, "the trace ends inside a region (no final end marker)")


def _entered_functions(streams: dict[int, VcpuStreams], idx: BlockIndex) -> dict[int, np.ndarray]:
    """Per vCPU, the address of the block each wakeups row's ``exec_row`` starts (0: none)."""
    out = {}
    for v, vs in streams.items():
        r = vs.events[WAKEUPS].column("exec_row").to_numpy().astype(np.int64)
        where = np.zeros(len(r), dtype=np.uint64)
        ok = (r >= 0) & (r < vs.n)
        pos = np.full(len(r), -1, dtype=np.int64)
        pos[ok] = vs.pos[vs.at(r[ok])]
        where[pos >= 0] = idx.vaddr[pos[pos >= 0]]
        out[v] = where
    return out


def _stopped_before(streams: dict[int, VcpuStreams], plugin_info: dict[str, Any] | None
                    ) -> Callable[[float, int], list[int]] | None:
    """From ``plugin.json``'s ``bound_stop_ns``: which other vCPUs were not recording at a time.

    A vCPU stopped by the ``roi_insns`` bound at time ``s`` records nothing until the next
    region begins (a ``markers`` begin row, at the region's start): it is stopped at ``t`` when
    its latest stop before ``t`` follows the latest begin before ``t``. Returns
    ``f(t, vcpu)``, the vCPUs other than ``vcpu`` stopped at ``t``, or None when the trace has
    no ``bound_stop_ns`` (a plugin from before it was written).
    """
    stops = (plugin_info or {}).get("bound_stop_ns")
    if stops is None:
        return None
    stops_ns = {v: np.sort(np.asarray(s, dtype=np.int64)) for v, s in enumerate(stops)}
    begins = [vs.events[MARKERS].filter(pc.equal(vs.events[MARKERS].column("kind"),
                                                 MARKER_BEGIN)).column("time_ns").to_numpy()
              for vs in streams.values()]
    begin_ns = np.sort(np.concatenate(begins).astype(np.int64)) if begins else np.zeros(0)

    def latest_before(a: np.ndarray, t: float) -> float:
        i = np.searchsorted(a, t, side="left")
        return float(a[i - 1]) if i else -np.inf

    def stopped(t: float, vcpu: int) -> list[int]:
        b = latest_before(begin_ns, t)
        return [w for w, s in stops_ns.items() if w != vcpu and latest_before(s, t) > b]
    return stopped


def check_wakeups(streams: dict[int, VcpuStreams], idx: BlockIndex,
                  plugin_info: dict[str, Any] | None, report: Report) -> None:
    """Check f: ``wakeups`` rows (their counters are checked with the other event tables).

    Violations: an unknown ``kind``; a ``woken`` that is not a kernel address; a row whose
    ``exec_row`` block does not start at its kind's function (``plugin.json`` symbols); in time
    order over all vCPUs, a ``ttwu_do_wakeup`` row (kind 3) without an earlier
    ``try_to_wake_up`` call (kind 1) for its task, unless it is the task's first row (the call
    may have come before recording began) or another vCPU had already been stopped by the
    ``roi_insns`` bound (``plugin.json``'s ``bound_stop_ns``: the call may have been made there,
    unrecorded); both are counted as info. The second excuse is coarse: once a vCPU has stopped,
    no missing call is a violation until the next region begins, also one whose call should have
    been recorded on a vCPU still recording (the trace does not say where a call was made).
    Woken tasks never seen running are counted as info
    (woken near the end of the recording, or a task that was not scheduled while recorded).

    Parameters
    ----------
    streams : dict of int to VcpuStreams
        Every vCPU's streams (from :func:`pysched.trace.checker.vcpu.check_exec`).
    idx : BlockIndex
    plugin_info : dict or None
        ``plugin.json``; its ``symbols`` give each kind's function address.
    report : Report
        Receives violations under ``"wakeups"``.
    """
    report.start(WAKEUPS)
    entered = _entered_functions(streams, idx)
    tables = {v: vs.events[WAKEUPS].append_column("entered", pa.array(entered[v]))
              for v, vs in streams.items()}
    m = _merged(tables, ["time_ns", "icount", "exec_row", "kind", "woken", "entered"])
    kind, woken = m["kind"], m["woken"]
    symbols = (plugin_info or {}).get("symbols") or {}
    known_kind = np.isin(kind, np.array(sorted(WAKE_SYMBOLS), dtype=kind.dtype))
    report.add_mask(WAKEUPS, ~known_kind, lambda i: (
        _loc(WAKEUPS, m, i), f"kind {kind[i]} is not one of {sorted(WAKE_SYMBOLS)}"))
    report.add_mask(WAKEUPS, woken < np.uint64(KERNEL_SPACE), lambda i: (
        _loc(WAKEUPS, m, i), f"woken {woken[i]:#x} is not a kernel (task_struct) address"))
    for k, name in WAKE_SYMBOLS.items():
        addr = int(symbols.get(name) or 0)
        bad = (kind == k) & (m["entered"] != 0) & (m["entered"] != np.uint64(addr))
        report.add_mask(WAKEUPS, bad if addr else np.zeros(len(kind), dtype=bool), lambda i: (
            _loc(WAKEUPS, m, i), f"the block at exec_row starts at {m['entered'][i]:#x}, not at "
                                 f"{WAKE_SYMBOLS[int(kind[i])]} ({addr:#x})"))
    stopped = _stopped_before(streams, plugin_info)
    seen: set[int] = set()
    called: set[int] = set()
    before_recording = 0
    after_stop: Counter[tuple[int, ...]] = Counter()
    missing = 0
    for i, (k, task) in enumerate(zip(kind.tolist(), woken.tolist())):
        if k == WAKE_TTWU:
            called.add(task)
        elif k == WAKE_DONE and task not in called:
            # The call may have been made on a vCPU that the roi_insns bound had stopped.
            gone = stopped(float(m["time_ns"][i]), int(m["_vcpu"][i])) if stopped else []
            if gone:
                after_stop[tuple(gone)] += 1
            elif task in seen:
                missing += 1
                report.add(WAKEUPS, _loc(WAKEUPS, m, i), f"ttwu_do_wakeup of task {task:#x} "
                           "without an earlier try_to_wake_up call for it")
            else:
                before_recording += 1
        seen.add(task)
    if before_recording:
        report.note(WAKEUPS, f"{before_recording} first wake-ups took effect without a recorded "
                             "call (called before recording began)")
    for ws, n in sorted(after_stop.items()):
        names = ", ".join(f"v{w}" for w in ws)
        report.note(WAKEUPS, f"{n} wake-ups took effect without a recorded call after {names} "
                             "had reached the roi_insns bound and stopped recording (the call "
                             "may have been made there)")
    if stopped is None and missing and \
            int(((plugin_info or {}).get("options") or {}).get("roi_insns") or 0):
        report.note(WAKEUPS, "plugin.json has no bound_stop_ns (a plugin from before it was "
                             "written): a call made on a vCPU after the roi_insns bound stopped "
                             "it cannot be told from a missing one")
    known: set[int] = set()
    for vs in streams.values():
        for name, t in vs.events.items():
            for col in ("thread", "prev", "next"):
                if col in t.column_names and name != WAKEUPS:
                    known.update(np.unique(t.column(col).to_numpy()).tolist())
    never = set(woken.tolist()) - known
    if never:
        report.note(WAKEUPS, f"{len(never)} woken tasks never seen running or switched while "
                             "recorded")
