"""Segmentation of a trace into SuperFunction instances: the driver around :mod:`.segment_kernel`.

vCPUs are walked in context-switch order: a vCPU's run between two switches is processed when
every run that started earlier (by the switches' ``time_ns``) has been, so a thread that
migrates continues on its new vCPU with the instance stack it left on the old one. Each vCPU's
exec stream is read one part file at a time, so memory is bounded by a part per vCPU plus the
outputs (instances, pieces and the set of (epoch, slot, page) heat entries).

After the walk, kernel-thread contexts are told from unresolved ones, and every instance gets
its superFuncType; applications and kernel threads need the pages they executed over the whole
trace for that, which is why types are assigned at the end (heat is first gathered per slot).
An application's type is the checksum of the code frames that all processes of its binary
executed: processes that executed a common frame of a program's own text (user code below
``codemap.EXECUTABLE_TOP``; shared libraries live above) run the same binary; one that ran only
library code in the trace joins the binary that covers its frames (:func:`_programs`).
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pysched.constants import CLOCK_HZ, DEFAULT_EPOCH, EPOCH_SECONDS, IPC  # noqa: F401
from pysched.trace import Part, Trace, TraceError, open_trace
from pysched.trace.clock import TraceClock, trace_clock
from pysched.trace.execstream import truncations

from . import segment_kernel as K
from .codemap import CodeMap, trace_codemap
from .events import EV_SWITCH, TraceEvents, VcpuEvents, load_events
from .harness import harness_mask, harness_threads
from .functype import (
    UNKNOWN_TYPE,
    Category,
    application_type,
    bottom_half_type,
    describe,
    interrupt_type,
    kernel_thread_type,
    syscall_type,
)
from .symbols import KernelSymbols, trace_symbols

# Default epoch (pysched.constants): 3 ms (the paper's, section 4.4) at 2 GHz and an IPC of
# 1.0, i.e. 6 million instructions of each vCPU. Epochs are counted in machine-wide
# instructions (pysched.trace.clock): epoch k is the machine's instructions
# [k * E, (k + 1) * E), E = len * nvcpus, each vCPU's share placed by the trace's clock.

MAX_DEPTH = 64
_INF = 1 << 62


@dataclass
class Segmentation:
    """SuperFunction instances of a trace, the pieces of the instruction streams they ran, and
    the code pages each superFuncType executed per epoch.

    Attributes
    ----------
    path : str
        The trace directory.
    epoch_len : int
        Instructions per vCPU per epoch: an epoch is ``epoch_len * nvcpus`` instructions of
        the whole machine (:mod:`pysched.trace.clock`).
    instances : pandas.DataFrame
        One row per instance, ``id`` = row index: ``type`` (uint64 superFuncType),
        ``category`` (:class:`Category`), ``parent`` (instance id, -1 at a thread's bottom),
        ``thread`` (task_struct key, 0 for a vCPU whose thread is never named), ``thread_id``
        (dense), ``vcpu`` (where it started), ``start_vcpu``/``start_icount`` and
        ``end_vcpu``/``end_icount`` (vCPU and counter of its first instruction and one past its
        last; a migrated instance ends on another vCPU), ``insns`` (all its instructions),
        ``sched_insns`` (those in scheduler code), ``number`` (system call number or vector;
        -1 unknown or not applicable), ``handler`` (bottom half: the action's address),
        ``cr3`` (application: its address space) and ``generation`` (which use of that ``cr3``:
        page-table roots are reused once a process is gone), ``resolved`` (category learned
        from a return whose entry the trace does not have), ``popped`` (closed by a return
        that did not match it), ``harness`` (the capture harness's own work, which analysis
        leaves out by default: :mod:`pysched.superfunctions.harness`).
    pieces : pandas.DataFrame
        Maximal runs of one instance on one vCPU: ``instance``, ``vcpu``, ``start``, ``stop``
        (instruction counters, ``stop`` exclusive), ``row_start``, ``row_stop`` (exec rows that
        hold them: expand that window and keep counters ``[start, stop)``), ``sched`` (all
        scheduler code, or none). They tile every vCPU's stream in order.
    heat : pandas.DataFrame
        ``epoch``, ``type``, ``pfn``: the code frames each superFuncType executed in each epoch
        (scheduler code left out), one row per distinct triple.
    types : pandas.DataFrame
        Per superFuncType: ``type``, ``category``, ``label``, ``instances``, ``insns``
        (excluding scheduler code), ``sched_insns``.
    warnings : list of dict
        Counted irregularities: ``code``, ``text``, ``count``, the first ``where``, and
        ``severity``: ``info`` for what every trace has (returns whose entries predate the
        trace, new threads' first returns), ``warning`` for what a well-formed trace should
        not have (missing or unmatched events).
    vcpu_insns : dict of int to int
        Instructions of each vCPU's stream.
    unknown_frame_insns : int
        Instructions with an unknown frame (left out of the heat).
    actions : dict of int to str
        Softirq action address -> name, as found in ``System.map``.
    thread_keys : numpy.ndarray of uint64
        Thread key of each ``thread_id`` (placeholders: 0).
    clock : TraceClock
        The trace's machine-wide instruction clock.
    epoch_bounds : dict of int to numpy.ndarray
        Per vCPU, the icount at which each epoch after the first begins
        (:meth:`TraceClock.epoch_bounds`).
    """

    path: str
    epoch_len: int
    instances: pd.DataFrame
    pieces: pd.DataFrame
    heat: pd.DataFrame
    types: pd.DataFrame
    warnings: list[dict]
    vcpu_insns: dict[int, int]
    unknown_frame_insns: int
    actions: dict[int, str]
    thread_keys: np.ndarray = field(repr=False)
    clock: TraceClock = field(repr=False)
    epoch_bounds: dict[int, np.ndarray] = field(repr=False)

    @property
    def total_insns(self) -> int:
        return sum(self.vcpu_insns.values())

    @property
    def nepochs(self) -> int:
        """Epochs of the trace (the last one may be partial)."""
        if not self.total_insns:
            return 0
        return len(next(iter(self.epoch_bounds.values()), ())) + 1

    @property
    def complete_epochs(self) -> int:
        """Epochs whose whole work the trace holds (:meth:`TraceClock.complete_epochs`)."""
        return self.clock.complete_epochs(self.epoch_len)

    def counted_pieces(self, keep_harness: bool = False) -> pd.DataFrame:
        """:attr:`pieces`, without the capture harness's own unless ``keep_harness``
        (``instances["harness"]``, :mod:`pysched.superfunctions.harness`): what the
        characterisation counts."""
        if keep_harness or "harness" not in self.instances:
            return self.pieces
        harness = self.instances["harness"].to_numpy(bool)
        return self.pieces.loc[~harness[self.pieces["instance"].to_numpy()]]

    def label(self, functype: int) -> str:
        """Human label of a superFuncType of this trace."""
        row = self.types.loc[self.types["type"] == np.uint64(functype)]
        if len(row):
            return str(row["label"].iloc[0])
        return describe(functype, names=self.actions)

    def warning_summary(self) -> str:
        """One line per warning kind, with its count and first location."""
        return "\n".join(f"{w['count']:>8}  {w['severity']}: {w['text']} (first: {w['where']})"
                         for w in self.warnings)


class _Reader:
    """One vCPU's exec stream, one part file at a time; the next part is read in a background
    thread while the kernel (which releases the GIL) works on the current one."""

    def __init__(self, trace: Trace, vcpu: int, cm: CodeMap, pool: ThreadPoolExecutor) -> None:
        self.trace, self.vcpu, self.cm, self.pool = trace, vcpu, cm, pool
        self._parts = iter(trace.parts("exec", vcpu))
        self.row0 = 0
        self.part = None
        self.blocks = np.zeros(0, dtype=np.uint32)
        self.ids = self.blocks
        self._next = self._prefetch()

    def _read(self, part: Part) -> tuple[Part, np.ndarray, np.ndarray]:
        blocks = self.trace.read_part(part).column("block").to_numpy()
        return part, blocks, self.cm.kernel_ids(blocks)

    def _prefetch(self) -> Future | None:
        part = next(self._parts, None)
        return None if part is None else self.pool.submit(self._read, part)

    def next(self) -> bool:
        """Load the next part; False at the end of the stream."""
        if self._next is None:
            return False
        self.row0 += len(self.blocks)
        self.part, self.blocks, self.ids = self._next.result()
        self._next = self._prefetch()
        return True

    def bad_block(self, row: int) -> str:
        """Message for an unusable block at exec ``row`` (in the loaded part)."""
        b = int(self.blocks[row - self.row0])
        p = int(self.cm.idx.lookup(np.array([b], dtype=np.uint32))[0])
        why = ("is not in the blocks table" if p < 0 else
               "has malformed insns rows (run `pysched check`)")
        return f"{self.part.path}: vCPU {self.vcpu} exec row {row}: block {b} {why}"


def _segments(events: TraceEvents, order: list[int]) -> list[tuple[int, int, int, int]]:
    """``(start_time, vcpu slot, stop event, stop icount)`` of every run between switches, in
    processing order."""
    out = []
    for n, v in enumerate(order):
        ev = events.vcpus[v]
        sw = np.flatnonzero(ev.kind == EV_SWITCH)
        starts = [-1] + [int(ev.time_ns[k]) for k in sw]
        stops = [(int(k), int(ev.icount[k])) for k in sw] + [(len(ev), _INF)]
        out += [(s, n, e, ic) for s, (e, ic) in zip(starts, stops)]
    out.sort(key=lambda x: (x[0], x[1]))
    return out


class _State:
    """The kernel's arrays, grown on demand."""

    def __init__(self, nvcpu: int, nthreads: int, naspaces: int, params: np.ndarray) -> None:
        self.vs = np.zeros((nvcpu, K.NV), dtype=np.int64)
        self.th = np.zeros((nthreads, K.NT), dtype=np.int64)
        self.th[:, K.T_RUNNING] = -1
        self.th[:, K.T_AS] = -1
        self.asp = np.zeros((max(naspaces, 1), K.NA), dtype=np.int64)
        self.tstack = np.zeros((nthreads, MAX_DEPTH), dtype=np.int64)
        self.inst = np.zeros((1 << 14, K.NI), dtype=np.int64)
        self.pcs = np.zeros((1 << 16, K.NP), dtype=np.int64)
        self.hkeys = np.full(1 << 18, -1, dtype=np.int64)
        self.hcache = np.full((nvcpu, K.HCACHE), -1, dtype=np.int64)
        self.cnt = np.zeros(K.NC, dtype=np.int64)
        self.warn = np.zeros((K.NW, 4), dtype=np.int64)
        self.params = params

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The state as :func:`kernel._advance` takes it."""
        return (self.vs, self.th, self.tstack, self.inst, self.pcs, self.hkeys, self.hcache,
                self.cnt, self.params, self.warn, self.asp)

    def grow(self) -> None:
        """Double whichever output array keeps :func:`kernel._budget` at zero."""
        c, m, d = self.cnt, int(self.params[K.PR_MARGIN]), MAX_DEPTH
        while len(self.inst) - c[K.C_NINST] < 2 * (m + d):
            self.inst = np.concatenate([self.inst, np.zeros_like(self.inst)])
        while len(self.pcs) - c[K.C_NPIECE] < m:
            self.pcs = np.concatenate([self.pcs, np.zeros_like(self.pcs)])
        size = len(self.hkeys)
        while size // 2 - c[K.C_NHEAT] < m:
            size *= 2
        if size != len(self.hkeys):
            self.hkeys = K._rehash(self.hkeys, size)


def segment(trace: Trace | str | Path, epoch_len: int = DEFAULT_EPOCH,
            system_map: str | Path | None = None,
            symbols: KernelSymbols | None = None) -> Segmentation:
    """Cut a trace into SuperFunction instances (see the module docstring).

    Parameters
    ----------
    trace : Trace or path
    epoch_len : int
        Instructions per vCPU per epoch for the heat (default :data:`DEFAULT_EPOCH`); an
        epoch is ``epoch_len * nvcpus`` machine-wide instructions (:mod:`pysched.trace.clock`).
    system_map : path, optional
        The guest kernel's ``System.map`` (default: found by
        :func:`pysched.superfunctions.symbols.find_system_map`).
    symbols : KernelSymbols, optional
        Already loaded symbols (overrides ``system_map``).

    Returns
    -------
    Segmentation

    Raises
    ------
    TraceError
        On a trace the segmentation cannot follow: missing tables or columns, events out of
        order or beyond the end of their vCPU's stream, several recording windows
        (``roi=marker`` with more than one begin/end pair: the message says what to record
        instead; ``roi=all`` traces are one window whatever their markers), unusable blocks,
        no System.map. Irregularities it can follow (unmatched returns,
        thread mismatches, ...) are counted in :attr:`Segmentation.warnings` instead.
    """
    if not isinstance(trace, Trace):
        trace = open_trace(trace)
    if int(epoch_len) <= 0:
        raise ValueError(f"epoch_len must be a positive number of instructions, got {epoch_len}")
    epoch_len = int(epoch_len)
    syms = symbols if symbols is not None else trace_symbols(trace, system_map)
    cm = trace_codemap(trace, syms)
    ev = load_events(trace)
    order = trace.vcpus
    nv = len(order)
    # Heat slots: system call numbers, vectors and softirq actions are known up front;
    # every application, unknown-context or kernel-thread instance gets a slot of its own,
    # grouped into a type at the end.
    bh_base = len(ev.syscall_nrs) + len(ev.vectors)
    nstatic = bh_base + len(cm.actions)
    max_block = int(cm.blk_n.max()) if len(cm.blk_n) else 1
    clock = trace_clock(trace)
    bounds = clock.epoch_bounds(epoch_len)
    nepochs = len(bounds[order[0]]) + 1 if order else 0
    if nepochs >= 1 << K.EPOCH_BITS:
        raise ValueError(f"{trace.path}: epoch_len {epoch_len} gives {nepochs} epochs; at most "
                         f"{(1 << K.EPOCH_BITS) - 1} are supported, use longer epochs")
    if len(cm.pfns) >= 1 << K.PAGE_BITS or nstatic >= K.MAX_SLOTS:
        raise TraceError(f"{trace.path}: {len(cm.pfns)} distinct code frames and {nstatic} "
                         "system call/vector/action types exceed the heat key fields")
    params = np.zeros(K.NPR, dtype=np.int64)
    params[K.PR_NSTATIC] = nstatic
    params[K.PR_BHBASE] = bh_base
    params[K.PR_MARGIN] = max_block + 64
    params[K.PR_PLACEHOLDER] = len(ev.thread_keys)

    st = _State(nv, ev.nthreads, len(ev.aspaces), params)
    for n, v in enumerate(order):
        st.vs[n, K.V_THREAD] = ev.first_thread[v]
        st.vs[n, K.V_PIECE] = -1
        st.vs[n, K.V_PENDING] = 1
        st.vs[n, K.V_VCPU] = v
        st.th[ev.first_thread[v], K.T_RUNNING] = v
    with ThreadPoolExecutor(max_workers=1) as pool:
        _walk(trace, st, ev, cm, order, [_Reader(trace, v, cm, pool) for v in order], bounds)
    for n in range(nv):
        K._finish(n, st.vs, st.pcs, st.inst)
    seg = _assemble(trace, epoch_len, st, ev, cm, order, clock, bounds)
    seg.instances["harness"] = harness_mask(seg.instances, harness_threads(trace, clock), clock)
    return seg


def _event_columns(e: VcpuEvents) -> np.ndarray:
    """The kernel's view of one vCPU's events: one int64 row per event, columns ``K.E_*``
    (a copy, small: the shipped traces have one event per ~2500 instructions)."""
    out = np.empty((len(e), K.NE), dtype=np.int64)
    for c, col in ((K.E_ICOUNT, e.icount), (K.E_KIND, e.kind), (K.E_THREAD, e.thread),
                   (K.E_PREV, e.prev), (K.E_ARG, e.arg), (K.E_SLOT, e.slot),
                   (K.E_ASPACE, e.aspace), (K.E_USER, e.user)):
        out[:, c] = col
    return out


def _walk(trace: Trace, st: _State, ev: TraceEvents, cm: CodeMap, order: list[int],
          readers: list[_Reader], bounds: dict[int, np.ndarray]) -> None:
    """Run every vCPU through the kernel, run by run in switch order (module docstring)."""
    code = (cm.table, cm.ins_flags, cm.ins_action, cm.ins_page)
    trunc = [np.column_stack(truncations(trace, v)).astype(np.int64).reshape(-1, 2)
             for v in order]
    evs = [_event_columns(ev.vcpus[v]) for v in order]
    for _, n, stop_ev, stop_ic in _segments(ev, order):
        v, rd = order[n], readers[n]
        e = ev.vcpus[v]
        while True:
            status = K._advance(n, stop_ev, stop_ic, rd.ids, rd.row0, code, trunc[n], evs[n],
                                st.arrays(), bounds[v])
            if status == K.DONE:
                break
            if status == K.NEED_SPACE:
                st.grow()
            elif status == K.NEED_CHUNK:
                if not rd.next():
                    k = int(st.vs[n, K.V_EV])
                    if k < min(stop_ev, len(e)):
                        raise TraceError(
                            f"{trace.path}: vCPU {v}: {e.where(k)} lies beyond the end of "
                            f"the exec stream ({int(st.vs[n, K.V_IC])} instructions)")
                    break
            elif status == K.ERR_BLOCK:
                raise TraceError(rd.bad_block(int(st.cnt[K.C_ERR_ROW])))
            else:
                k = int(st.cnt[K.C_ERR_EV])
                at = e.where(k) if 0 <= k < len(e) else f"icount {int(st.cnt[K.C_ERR_IC])}"
                raise TraceError(f"{trace.path}: vCPU {v}: "
                                 f"{K.ERROR_TEXT.get(status, status)} at {at}")


#: A process that ran only library code joins the program whose processes executed at least
#: this share of its frames, if it has at least LIBRARY_ONLY_MIN_FRAMES of them.
LIBRARY_ONLY_COVER = 0.9
LIBRARY_ONLY_MIN_FRAMES = 16


def _programs(gkeys: list[tuple], gpages: list[np.ndarray],
              executable: np.ndarray) -> np.ndarray:
    """Cluster id of each group (a process, or a kernel thread).

    Processes that executed a common frame of a program's own text run the same binary, so
    they share a type. A process that executed no such frame in the trace (it spent the whole
    window in shared libraries, e.g. a long SQLite query started before the trace) joins the
    program whose processes executed at least :data:`LIBRARY_ONLY_COVER` of its frames, when
    it has at least :data:`LIBRARY_ONLY_MIN_FRAMES` (fewer, such as a process seen only in a
    libc wrapper, say nothing about the binary). Kernel threads and everything else are
    clusters of their own.
    """
    n = len(gkeys)
    parent = list(range(n))

    def root(g: int) -> int:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    owner: dict[int, int] = {}
    has_exe = np.zeros(n, dtype=bool)
    for g, key in enumerate(gkeys):
        if key[0] == "kthread":
            continue
        exe = gpages[g][executable[gpages[g]]]
        has_exe[g] = len(exe) > 0
        for page in exe.tolist():
            if page in owner:
                parent[root(g)] = root(owner[page])
            else:
                owner[page] = g
    programs: dict[int, np.ndarray] = {}
    first_text: dict[int, int] = {}
    for g in np.flatnonzero(has_exe).tolist():
        r = root(g)
        programs[r] = np.union1d(programs.get(r, np.zeros(0, np.int64)), gpages[g])
        low = int(gpages[g][executable[gpages[g]]].min())
        first_text[r] = min(first_text.get(r, low), low)
    for g, key in enumerate(gkeys):
        mine = np.unique(gpages[g])
        if key[0] == "kthread" or has_exe[g] or len(mine) < LIBRARY_ONLY_MIN_FRAMES:
            continue
        best, cover, tie = -1, 0.0, 0
        for r, pages in programs.items():
            c = np.isin(mine, pages, assume_unique=True).mean()
            # Ties go to the program with the lowest text frame: an order that does not
            # depend on how the groups were numbered.
            if c > cover or (c == cover and c > 0 and first_text[r] < tie):
                best, cover, tie = r, c, first_text[r]
        if cover >= LIBRARY_ONLY_COVER:
            parent[g] = best
    return np.array([root(g) for g in range(n)], dtype=np.int64)


def _assemble(trace: Trace, epoch_len: int, st: _State, ev: TraceEvents, cm: CodeMap,
              order: list[int], clock: TraceClock,
              bounds: dict[int, np.ndarray]) -> Segmentation:
    """Turn the kernel's arrays into :class:`Segmentation` (categories and types included)."""
    inst = st.inst[:int(st.cnt[K.C_NINST])]
    cat = _categories(inst)
    keys = st.hkeys[st.hkeys >= 0]
    h_page = keys & ((1 << K.PAGE_BITS) - 1)
    h_slot = (keys >> K.PAGE_BITS) & (K.MAX_SLOTS - 1)
    h_epoch = keys >> (K.PAGE_BITS + K.SLOT_BITS)
    slot_type = _slot_types(st, ev, cm, inst, cat, h_page, h_slot)
    heat = pd.DataFrame({"epoch": h_epoch.astype(np.int64), "type": slot_type[h_slot],
                         "pfn": (cm.pfns[h_page] if len(keys)
                                 else np.zeros(0, dtype=np.uint64)).astype(np.uint64)})
    heat = heat.drop_duplicates().sort_values(["epoch", "type", "pfn"], ignore_index=True)
    tkeys = np.concatenate([ev.thread_keys, np.zeros(len(order), np.uint64)])
    instances = _instances_frame(inst, cat, slot_type, tkeys, ev, cm)
    pieces = _pieces_frame(st.pcs[:int(st.cnt[K.C_NPIECE])])
    names = {int(pc): name for name, pc in cm.actions}
    vcpu_insns = {v: int(st.vs[n, K.V_IC]) for n, v in enumerate(order)}
    return Segmentation(str(trace.path), epoch_len, instances, pieces, heat,
                        _types_frame(instances, names), _warnings(st, ev), vcpu_insns,
                        int(st.cnt[K.C_UNKPAGE]), names, tkeys, clock, bounds)


def _categories(inst: np.ndarray) -> np.ndarray:
    """Instances' categories, with kernel threads told apart: a thread with no application
    or system call instance is a kernel thread, so its contexts of unknown start are its own
    code."""
    cat = inst[:, K.I_CAT].copy()
    tid = inst[:, K.I_THREAD]
    user_threads = np.unique(tid[(cat == K.CAT_APP) | (cat == K.CAT_SYSCALL)])
    cat[(cat == K.CAT_UNKNOWN) & ~np.isin(tid, user_threads)] = int(Category.KERNEL_THREAD)
    return cat


def _slot_types(st: _State, ev: TraceEvents, cm: CodeMap, inst: np.ndarray, cat: np.ndarray,
                h_page: np.ndarray, h_slot: np.ndarray) -> np.ndarray:
    """The superFuncType of every slot of the kernel.

    Every slot has a type known up front, or belongs to a group whose type is the checksum
    of the frames the group executed over the whole trace: an address space's generation
    (a process), an application instance whose space never showed, or a kernel thread.
    Processes of one binary (see _programs) share the checksum of all their frames.
    """
    aux, tid, slot, gen = (inst[:, K.I_AUX], inst[:, K.I_THREAD], inst[:, K.I_SLOT],
                           inst[:, K.I_GEN])
    nsys = len(ev.syscall_nrs)
    bh_base, nstatic = int(st.params[K.PR_BHBASE]), int(st.params[K.PR_NSTATIC])
    nslots = nstatic + int(st.cnt[K.C_NDYN])
    slot_type = np.zeros(nslots, dtype=np.uint64)
    slot_group = np.full(nslots, -1, dtype=np.int64)
    for s_, nr in enumerate(ev.syscall_nrs.tolist()):
        slot_type[s_] = syscall_type(nr)
    for s_, vec in enumerate(ev.vectors.tolist()):
        slot_type[nsys + s_] = interrupt_type(vec)
    for s_, (_, pc) in enumerate(cm.actions):
        slot_type[bh_base + s_] = bottom_half_type(pc)
    groups: dict[tuple, int] = {}
    for i in np.flatnonzero(slot >= nstatic).tolist():
        c, s_ = int(cat[i]), int(slot[i])
        if c == K.CAT_APP:
            key = ("app", int(aux[i]), int(gen[i])) if aux[i] >= 0 else ("instance", i)
            slot_group[s_] = groups.setdefault(key, len(groups))
        elif c == int(Category.KERNEL_THREAD):
            slot_group[s_] = groups.setdefault(("kthread", int(tid[i])), len(groups))
        elif c == K.CAT_SYSCALL:
            slot_type[s_] = syscall_type(None)
        elif c == K.CAT_INT:
            slot_type[s_] = interrupt_type(None)
        else:
            slot_type[s_] = UNKNOWN_TYPE
    gkeys = list(groups)
    hg = slot_group[h_slot]
    order_g = np.argsort(hg, kind="stable")
    bounds = np.searchsorted(hg[order_g], np.arange(len(gkeys) + 1))
    gpages = [h_page[order_g[bounds[g]:bounds[g + 1]]] for g in range(len(gkeys))]
    cluster = _programs(gkeys, gpages, cm.pfn_executable)
    gtype = np.zeros(len(gkeys), dtype=np.uint64)
    for c in np.unique(cluster):
        members = np.flatnonzero(cluster == c)
        pages = cm.pfns[np.unique(np.concatenate([gpages[g] for g in members]))]
        kthread = gkeys[members[0]][0] == "kthread"
        gtype[members] = kernel_thread_type(pages) if kthread else application_type(pages)
    has_group = slot_group >= 0
    slot_type[has_group] = gtype[slot_group[has_group]]
    return slot_type


def _instances_frame(inst: np.ndarray, cat: np.ndarray, slot_type: np.ndarray,
                     tkeys: np.ndarray, ev: TraceEvents, cm: CodeMap) -> pd.DataFrame:
    """One row per SuperFunction instance (see :class:`Segmentation`)."""
    aux = inst[:, K.I_AUX]
    number = np.where((cat == K.CAT_SYSCALL) | (cat == K.CAT_INT), aux, -1)
    act_pc = np.array([pc for _, pc in cm.actions], dtype=np.uint64)
    handler = np.zeros(len(inst), dtype=np.uint64)
    bh = cat == K.CAT_BH
    handler[bh] = act_pc[aux[bh]]
    cr3 = np.zeros(len(inst), dtype=np.uint64)
    app = (cat == K.CAT_APP) & (aux >= 0)
    cr3[app] = ev.aspaces[aux[app]]
    instances = pd.DataFrame({
        "type": slot_type[inst[:, K.I_SLOT]],
        "category": cat.astype(np.int8),
        "parent": inst[:, K.I_PARENT],
        "thread": tkeys[inst[:, K.I_THREAD]],
        "thread_id": inst[:, K.I_THREAD],
        "vcpu": inst[:, K.I_START_V].astype(np.int32),
        "start_vcpu": inst[:, K.I_START_V].astype(np.int32),
        "start_icount": inst[:, K.I_START_IC],
        "end_vcpu": inst[:, K.I_END_V].astype(np.int32),
        "end_icount": inst[:, K.I_END_IC],
        "insns": inst[:, K.I_INSNS],
        "sched_insns": inst[:, K.I_SCHED],
        "number": number,
        "handler": handler,
        "cr3": cr3,
        "generation": np.where(app, inst[:, K.I_GEN], -1),
        "resolved": (inst[:, K.I_FLAGS] & K.IF_RESOLVED) != 0,
        "popped": (inst[:, K.I_FLAGS] & K.IF_POPPED) != 0,
    })
    instances.index.name = "id"
    return instances


def _pieces_frame(pcs: np.ndarray) -> pd.DataFrame:
    """One row per piece, in order of vCPU and start."""
    pieces = pd.DataFrame({
        "instance": pcs[:, K.P_INST],
        "vcpu": pcs[:, K.P_VCPU].astype(np.int32),
        "start": pcs[:, K.P_START],
        "stop": pcs[:, K.P_STOP],
        "row_start": pcs[:, K.P_ROW0],
        "row_stop": pcs[:, K.P_ROW1],
        "sched": pcs[:, K.P_SCHED].astype(bool),
    })
    return pieces.sort_values(["vcpu", "start"], ignore_index=True)


def _types_frame(instances: pd.DataFrame, names: dict[int, str]) -> pd.DataFrame:
    """One row per superFuncType: category, instances, instructions, label."""
    types = (instances.assign(work=instances["insns"] - instances["sched_insns"])
             .groupby("type", sort=True)
             .agg(category=("category", "first"), instances=("category", "size"),
                  insns=("work", "sum"), sched_insns=("sched_insns", "sum"))
             .reset_index())
    types["label"] = [describe(t, c, names) for t, c in zip(types["type"], types["category"])]
    return types


def _warnings(st: _State, ev: TraceEvents) -> list[dict]:
    """The kernel's warning counters as records, each with where it first happened."""
    warnings = []
    for w in range(K.NW):
        count, v, ic, k = (int(x) for x in st.warn[w])
        if count:
            where = f"vCPU {v} icount {ic}"
            if k >= 0 and v in ev.vcpus and k < len(ev.vcpus[v]):
                where = f"vCPU {v} {ev.vcpus[v].where(k)}"
            warnings.append({"code": w, "text": K.WARNING_TEXT[w], "count": count,
                             "where": where,
                             "severity": "info" if w in K.EXPECTED_WARNINGS else "warning"})
    return warnings
