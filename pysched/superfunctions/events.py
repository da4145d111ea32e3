"""The event tables of one trace, merged per vCPU into the arrays the segmentation kernel reads.

Per vCPU, the rows of ``syscalls``, ``interrupts`` and ``switches`` become one stream ordered
by instruction counter, ties broken by ``time_ns`` (events that share a counter, such as an
interrupt return followed at once by another entry, happened in the order the plugin
timestamped them) and then by table and row. Thread keys become dense thread ids, ``cr3``
values dense address-space ids, system call numbers and vectors the ids of their heat slots.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pysched.trace import Trace, TraceError
from pysched.trace.schema import KIND_ENTRY, KIND_RETURN, MARKER_BEGIN

from .functype import IA32_OFFSET

# Event kinds of the kernel.
EV_SYS_ENTRY = 0
EV_SYS_RETURN = 1
EV_INT_ENTRY = 2
EV_INT_RETURN = 3
EV_SWITCH = 4

SOURCE_TABLES = ("syscalls", "interrupts", "switches")
_NEEDED = {
    "syscalls": ("icount", "time_ns", "kind", "thread", "cr3", "abi", "nr", "matched"),
    "interrupts": ("icount", "time_ns", "kind", "thread", "cr3", "vector", "user"),
    "switches": ("icount", "time_ns", "prev", "next"),
}


@dataclass
class VcpuEvents:
    """One vCPU's events in processing order (all arrays int64 unless noted).

    Attributes
    ----------
    icount : numpy.ndarray
    kind : numpy.ndarray of int8
        ``EV_*``.
    thread : numpy.ndarray
        Dense id of the event's thread (the incoming one for a switch); -1 when the key is 0.
    prev : numpy.ndarray
        Switches: dense id of the outgoing thread (-1 when its key is 0); else -1.
    arg : numpy.ndarray
        System call number or vector on entries, else -1.
    slot : numpy.ndarray
        Heat slot of the system call number or vector on entries, else -1.
    aspace : numpy.ndarray
        Dense address-space id (``cr3``) where it names a user address space: system call
        rows, interrupt rows with ``user`` set; else -1.
    user : numpy.ndarray of int8
        Interrupts: the ``user`` column; system calls: 1; switches: 0.
    table : numpy.ndarray of int8
        Index into :data:`SOURCE_TABLES` of the row the event came from.
    row : numpy.ndarray
        Row in that table (of this vCPU), for messages.
    time_ns : numpy.ndarray
    """

    icount: np.ndarray
    kind: np.ndarray
    thread: np.ndarray
    prev: np.ndarray
    arg: np.ndarray
    slot: np.ndarray
    aspace: np.ndarray
    user: np.ndarray
    table: np.ndarray
    row: np.ndarray
    time_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.icount)

    def where(self, k: int) -> str:
        """``syscalls v0 row 12 (icount 345)`` for event ``k``, for messages."""
        return (f"{SOURCE_TABLES[int(self.table[k])]} row {int(self.row[k])} "
                f"(icount {int(self.icount[k])})")


@dataclass
class TraceEvents:
    """Events of every vCPU plus the id tables they refer to.

    Attributes
    ----------
    vcpus : dict of int to VcpuEvents
    thread_keys : numpy.ndarray of uint64
        Thread key of each dense thread id; ids ``>= len(thread_keys)`` are the per-vCPU
        placeholders for a vCPU whose running thread is never named.
    aspaces : numpy.ndarray of uint64
        ``cr3`` of each address-space id.
    syscall_nrs, vectors : numpy.ndarray of int64
        System call numbers and vectors that have entries; their slots are ``0..`` and
        ``len(syscall_nrs)..`` respectively.
    first_thread : dict of int to int
        Dense id of the thread running on each vCPU at its first instruction.
    """

    vcpus: dict[int, VcpuEvents]
    thread_keys: np.ndarray
    aspaces: np.ndarray
    syscall_nrs: np.ndarray
    vectors: np.ndarray
    first_thread: dict[int, int] = field(default_factory=dict)

    @property
    def nthreads(self) -> int:
        """Dense thread ids in use, placeholders included."""
        return len(self.thread_keys) + len(self.vcpus)


def _require(trace: Trace, name: str, t: pa.Table, vcpu: int) -> None:
    missing = [c for c in _NEEDED[name] if c not in t.column_names]
    if missing:
        raise TraceError(f"{trace.path / name}: vCPU {vcpu}: missing column(s) "
                         f"{', '.join(missing)}")


def _check_sorted(trace: Trace, name: str, vcpu: int, icount: np.ndarray) -> None:
    """Each table's rows must come in instruction-counter order (the plugin writes them so)."""
    if len(icount) > 1:
        bad = np.flatnonzero(icount[1:] < icount[:-1])
        if len(bad):
            r = int(bad[0]) + 1
            raise TraceError(f"{trace.path / name}: vCPU {vcpu} row {r}: events out of order "
                             f"(icount {int(icount[r])} after {int(icount[r - 1])})")


#: What to do instead of a trace of several ROI windows (see :func:`_check_windows`).
ONE_WINDOW_HINT = (
    "record one window per trace: a single `roi begin` ... `roi end` around the whole region "
    "of interest, with `roi mark N` to label phases inside it (the markers table keeps the "
    "labels and their icounts), or one trace per window; or record with roi=all, where "
    "begin/end markers are only labels and the recording is one continuous window")


def _check_windows(trace: Trace) -> None:
    """Segmentation follows thread state through the trace, so it needs the trace to be one
    continuous recording.

    With ``roi=all`` it always is: markers are recorded but do not stop recording, so begin
    and end rows are labels. With ``roi=marker`` each ``begin`` after an ``end`` starts a new
    window after a gap the trace does not show (threads entered and left the kernel, switched,
    exited), and the plugin writes the begin/end rows only on the vCPU that executed the
    marker: where the other vCPUs' streams cross a window boundary is not recorded, so they
    cannot be cut per window. Such traces are refused with :data:`ONE_WINDOW_HINT`.
    """
    if trace.roi == "all":
        return
    info = trace.plugin_info or {}
    windows = info.get("windows")
    why = ("the plugin records where a window starts and ends only on the vCPU that ran the "
           "marker, so the other vCPUs' streams cannot be cut at the window boundaries, and "
           "what threads did in the gaps between windows is not in the trace")
    if isinstance(windows, int) and windows > 1:
        raise TraceError(f"{trace.path / 'plugin.json'}: {windows} recording windows (roi=marker "
                         f"with several begin/end pairs); segmentation needs one: {why}. "
                         f"Instead, {ONE_WINDOW_HINT}")
    for v in trace.all_vcpus():
        m = trace.table("markers", v)
        kind = m.column("kind").to_numpy()
        ic = m.column("icount").to_numpy()
        late = np.flatnonzero((kind == MARKER_BEGIN) & (ic > 0))
        if len(late):
            raise TraceError(f"{trace.path / 'markers'}: vCPU {v} row {int(late[0])}: ROI begin "
                             f"at icount {int(ic[late[0]])}, a second recording window "
                             f"(roi=marker); segmentation needs one: {why}. Instead, "
                             f"{ONE_WINDOW_HINT}")


def _check_sysmap(trace: Trace) -> None:
    """Interrupts and switches exist only when the plugin had the kernel's map."""
    info = trace.plugin_info or {}
    opts = info.get("options") if isinstance(info.get("options"), dict) else {}
    syms = info.get("symbols")
    no_map = "sysmap" in opts and not opts.get("sysmap")
    if isinstance(syms, dict):
        # The plugin writes 0 for a symbol it did not have.
        no_map |= not (syms.get("idt_table") and syms.get("__switch_to"))
    if no_map:
        raise TraceError(f"{trace.path / 'plugin.json'}: recorded without the kernel's "
                         "System.map (sysmap=): the interrupts and switches tables, which "
                         "segmentation needs, were not recorded")


def _numbers(s: pa.Table) -> np.ndarray:
    """System call numbers of ``syscalls`` rows, ia32 ones offset by :data:`IA32_OFFSET`."""
    nr = s.column("nr").to_numpy().astype(np.int64)
    return np.where(s.column("abi").to_numpy() == 32, nr + IA32_OFFSET, nr)


def load_events(trace: Trace) -> TraceEvents:
    """Merge the event tables of every vCPU (see the module docstring).

    Raises
    ------
    TraceError
        On a missing column, rows out of ``icount`` order within a table, more than one
        recording window (``roi=marker``, see :func:`_check_windows`), or a trace recorded
        without kernel symbols.
    """
    _check_windows(trace)
    _check_sysmap(trace)
    vcpus = trace.vcpus
    raw: dict[int, dict[str, pa.Table]] = {}
    keys, cr3s, nrs, vecs = [], [], [], []
    for v in vcpus:
        raw[v] = {}
        for name in SOURCE_TABLES:
            t = trace.table(name, v)
            _require(trace, name, t, v)
            _check_sorted(trace, name, v, t.column("icount").to_numpy())
            raw[v][name] = t
        s, i, w = raw[v]["syscalls"], raw[v]["interrupts"], raw[v]["switches"]
        keys += [s.column("thread").to_numpy(), i.column("thread").to_numpy(),
                 w.column("prev").to_numpy(), w.column("next").to_numpy()]
        cr3s += [s.column("cr3").to_numpy(),
                 i.column("cr3").to_numpy()[i.column("user").to_numpy() != 0]]
        sk = s.column("kind").to_numpy()
        nrs.append(_numbers(s)[sk == KIND_ENTRY])
        ik = i.column("kind").to_numpy()
        vecs.append(i.column("vector").to_numpy()[ik == KIND_ENTRY].astype(np.int64))
    def cat(xs: list[np.ndarray], dt: type) -> np.ndarray:
        return np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)

    thread_keys = np.unique(cat(keys, np.uint64))
    thread_keys = thread_keys[thread_keys != 0]
    aspaces = np.unique(cat(cr3s, np.uint64))
    syscall_nrs = np.unique(cat(nrs, np.int64))
    vectors = np.unique(cat(vecs, np.int64))

    def tid(k: np.ndarray) -> np.ndarray:
        k = k.astype(np.uint64)
        out = np.searchsorted(thread_keys, k).astype(np.int64)
        out[k == 0] = -1
        return out

    out: dict[int, VcpuEvents] = {}
    first: dict[int, int] = {}
    for n, v in enumerate(vcpus):
        s, i, w = raw[v]["syscalls"], raw[v]["interrupts"], raw[v]["switches"]
        ns, ni, nw = s.num_rows, i.num_rows, w.num_rows
        def col(t: pa.Table, c: str) -> np.ndarray:
            return t.column(c).to_numpy()

        sk, ik = col(s, "kind"), col(i, "kind")
        for name, kind in (("syscalls", sk), ("interrupts", ik)):
            bad = np.flatnonzero((kind != KIND_ENTRY) & (kind != KIND_RETURN))
            if len(bad):
                raise TraceError(f"{trace.path / name}: vCPU {v} row {int(bad[0])}: kind "
                                 f"{int(kind[bad[0]])} is neither 0 (entry) nor 1 (return)")
        kind = np.concatenate([np.where(sk == KIND_ENTRY, EV_SYS_ENTRY, EV_SYS_RETURN),
                               np.where(ik == KIND_ENTRY, EV_INT_ENTRY, EV_INT_RETURN),
                               np.full(nw, EV_SWITCH)]).astype(np.int8)
        icount = np.concatenate([col(s, "icount"), col(i, "icount"),
                                 col(w, "icount")]).astype(np.int64)
        time_ns = np.concatenate([col(s, "time_ns"), col(i, "time_ns"),
                                  col(w, "time_ns")]).astype(np.int64)
        thread = np.concatenate([tid(col(s, "thread")), tid(col(i, "thread")),
                                 tid(col(w, "next"))])
        prev = np.concatenate([np.full(ns + ni, -1, np.int64), tid(col(w, "prev"))])
        nr = _numbers(s)
        vec = col(i, "vector").astype(np.int64)
        arg = np.concatenate([np.where(sk == KIND_ENTRY, nr, -1), np.where(ik == KIND_ENTRY,
                                                                           vec, -1),
                              np.full(nw, -1, np.int64)])
        sslot = np.searchsorted(syscall_nrs, nr)
        vslot = len(syscall_nrs) + np.searchsorted(vectors, vec)
        slot = np.concatenate([np.where(sk == KIND_ENTRY, sslot, -1),
                               np.where(ik == KIND_ENTRY, vslot, -1),
                               np.full(nw, -1, np.int64)]).astype(np.int64)
        iuser = col(i, "user").astype(np.int8)
        asp_s = np.searchsorted(aspaces, col(s, "cr3").astype(np.uint64)).astype(np.int64)
        asp_i = np.searchsorted(aspaces, col(i, "cr3").astype(np.uint64)).astype(np.int64)
        aspace = np.concatenate([asp_s, np.where(iuser != 0, asp_i, -1),
                                 np.full(nw, -1, np.int64)])
        user = np.concatenate([np.ones(ns, np.int8), iuser, np.zeros(nw, np.int8)])
        table = np.concatenate([np.zeros(ns, np.int8), np.ones(ni, np.int8),
                                np.full(nw, 2, np.int8)])
        row = np.concatenate([np.arange(ns), np.arange(ni), np.arange(nw)]).astype(np.int64)
        order = np.lexsort((row, table, time_ns, icount))
        ev = VcpuEvents(icount[order], kind[order], thread[order], prev[order], arg[order],
                        slot[order], aspace[order], user[order], table[order], row[order],
                        time_ns[order])
        out[v] = ev
        # Who runs first: the first switch's outgoing thread, else the first named thread,
        # else this vCPU's placeholder.
        placeholder = len(thread_keys) + n
        sw = np.flatnonzero(ev.kind == EV_SWITCH)
        if len(sw) and ev.prev[sw[0]] >= 0:
            first[v] = int(ev.prev[sw[0]])
        else:
            named = np.flatnonzero((ev.thread >= 0) & (ev.kind != EV_SWITCH))
            lim = sw[0] if len(sw) else len(ev)
            named = named[named < lim]
            first[v] = int(ev.thread[named[0]]) if len(named) else placeholder
    return TraceEvents(out, thread_keys, aspaces, syscall_nrs, vectors, first)
