"""The workload the sandbox replays: a trace's SuperFunction instances as work items.

A :class:`Workload` is what one copy of the traced machine had to do, cut into **items**:

* *thread items*: per thread, its ordered work. A new item starts wherever the thread's
  SuperFunction instance changes (an application piece, then the system call it made, then the
  application again: nested as traced) and wherever the thread was switched out and back in.
  An item whose instance began with it is a SuperFunction *start*; one that goes back to an
  instance that ran before is a *return* (``parentSuperFuncPtr``, paper section 5.1).
* *async items*: each interrupt and bottom-half instance (in parts, where its exit path
  switched threads and it finished later on another vCPU). An interrupt arrives when it
  arrived in the trace; a bottom half raised by an interrupt is ready when that interrupt's
  item ends (it ran on the interrupt's exit, nested in it in the trace).

Each item replays the trace's instructions: a list of **runs** ``(vcpu, start, stop)`` of the
instruction stream (the instance's pieces, with the Linux scheduler's own code left out: the
simulated scheduler replaces it, as the paper leaves scheduler routines out of its breakup,
section 4.3).

**Dependencies.** A thread item that followed a context switch in the trace either was
*preempted* (runnable all along: ready as soon as the thread's previous item ends) or *blocked*
and was woken. With a ``wakeups`` table the waker is known: the item becomes ready when the
waking item has executed the instructions it executed before the wake-up (``dep_item``,
``dep_offset``), so a policy that runs the waker sooner wakes the sleeper sooner. The first
wake-up of the thread after its switch-out is the one that made it runnable. Traces with
effect rows (``ttwu_do_wakeup``, kind 3) count only wake-ups that took effect, placed at the
waker's call; older traces count every call (a call on a task that was only preempted then
makes a dependency that the trace did not have: the shipped traces predate effect rows). Without a
``wakeups`` table (traces recorded before it existed) every switched-in item is released at its
traced time instead (``release``): a fixed schedule, which :attr:`Workload.dependencies` says.
A device interrupt that answers a traced request (or, for a network peer, follows the guest's
transmit) also records that request (``req_item``, ``req_offset``, ``req_delay``): in the
default closed loop it arrives a traced latency after the request ran in the simulation
(:mod:`.device_loop`).

**Time of the trace.** Arrival times use the trace's machine time
(:meth:`pysched.trace.clock.TraceClock.seconds`): instruction ``i`` of vCPU ``v`` happened at
``M / (nvcpus * CLOCK_HZ * IPC)`` seconds, ``M`` being the machine-wide instructions retired
by then in the trace's cross-vCPU order. It is the clock of the analysis's epochs (3 ms of it
each), so the sandbox's epochs (3 ms of simulated time, :class:`~.engine.SandboxConfig`) are
the trace's epochs when the sandbox runs the work at the nominal clock and IPC on as many cores
as the trace had vCPUs, all busy; a vCPU that idled in the trace adds no time (an idle vCPU
retires no instructions), so its work arrives no later than it would have on a busy machine,
and an interrupt of a busy vCPU beside an idle one arrives up to ``nvcpus`` times earlier than
that vCPU's own instruction count says. QEMU's own clock runs at emulation speed and is not
used.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pysched.superfunctions.functype import Category
from pysched.trace.schema import WAKE_DONE

from .device_loop import device_links


#: Item kinds.
THREAD_ITEM, ASYNC_ITEM = 0, 1
#: How a thread item begins: the thread's first item, a new SuperFunction, a return to a parent
#: instance, or the same instance continued after a context switch.
FIRST, START, RETURN, RESUME = 0, 1, 2, 3

_ASYNC = (int(Category.INTERRUPT), int(Category.BOTTOM_HALF))


@dataclass
class Workload:
    """Work items of one copy of a traced machine (see the module docstring).

    All per-item arrays have one element per item; ``run_*`` arrays one per run, item ``i``'s
    runs being ``run_ptr[i]:run_ptr[i+1]``; ``task_ptr`` does the same for each thread's items.

    Attributes
    ----------
    kind : int8
        :data:`THREAD_ITEM` or :data:`ASYNC_ITEM`.
    task : int64
        Thread (dense id) of a thread item; -1 for async items.
    instance : int64
        SuperFunction instance (row of the segmentation's ``instances``).
    type_id : int64
        Dense id of the superFuncType (``types[type_id]``).
    category : int8
        :class:`~pysched.superfunctions.functype.Category`.
    begins : int8
        Thread items: :data:`FIRST`, :data:`START`, :data:`RETURN` or :data:`RESUME`.
    insns : int64
        Instructions the item executes.
    number : int64
        System call number or interrupt vector (-1 otherwise).
    release : float64
        Seconds (trace clock) before which the item cannot start: arrivals of interrupts, and
        the fixed schedule of a trace without wake-ups; 0 when unconstrained.
    arrival_vcpu : int64
        vCPU where the item began in the trace (interrupts arrive there).
    dep_item, dep_offset : int64
        The item must wait until item ``dep_item`` has executed ``dep_offset`` instructions
        (-1: no dependency).
    run_vcpu, run_start, run_stop : int64
        The trace's instructions each run replays.
    types : numpy.ndarray of uint64
        superFuncType of each ``type_id``.
    type_category : numpy.ndarray of int8
    task_keys : numpy.ndarray of uint64
        Thread key of each task.
    dependencies : str
        ``"wakeups"`` or ``"traced-time"`` (no wakeups table).
    req_item, req_offset : int64
        The device request that releases an interrupt item in a closed loop
        (:mod:`.device_loop`): the item may start ``req_delay`` seconds after item
        ``req_item`` has executed ``req_offset`` instructions (-1: at ``release``).
    req_delay : float64
        The traced latency from that request to the interrupt (trace clock seconds).
    device_completions, device_arrivals : int
        Interrupt items released by the request they answer, and by the transmit they follow.
    """

    kind: np.ndarray
    task: np.ndarray
    instance: np.ndarray
    type_id: np.ndarray
    category: np.ndarray
    begins: np.ndarray
    insns: np.ndarray
    number: np.ndarray
    release: np.ndarray
    arrival_vcpu: np.ndarray
    dep_item: np.ndarray
    dep_offset: np.ndarray
    run_ptr: np.ndarray
    run_vcpu: np.ndarray
    run_start: np.ndarray
    run_stop: np.ndarray
    task_ptr: np.ndarray
    task_items: np.ndarray
    types: np.ndarray
    type_category: np.ndarray
    task_keys: np.ndarray
    dependencies: str
    vcpus: list[int] = field(default_factory=list)
    name: str = ""
    req_item: np.ndarray | None = None
    req_offset: np.ndarray | None = None
    req_delay: np.ndarray | None = None
    device_completions: int = 0
    device_arrivals: int = 0

    def __post_init__(self) -> None:
        n = len(self.kind)
        if self.req_item is None:
            self.req_item = np.full(n, -1, dtype=np.int64)
        if self.req_offset is None:
            self.req_offset = np.zeros(n, dtype=np.int64)
        if self.req_delay is None:
            self.req_delay = np.zeros(n, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def ntasks(self) -> int:
        return len(self.task_ptr) - 1

    @property
    def total_insns(self) -> int:
        return int(self.insns.sum())

    def runs(self, item: int) -> slice:
        """Slice of the ``run_*`` arrays that item ``item`` replays."""
        return slice(int(self.run_ptr[item]), int(self.run_ptr[item + 1]))

    def validate(self) -> None:
        """Check the structural invariants; raise ``ValueError`` naming the first broken one."""
        n = len(self)
        for name in ("task", "instance", "type_id", "category", "begins", "insns", "number",
                     "release", "arrival_vcpu", "dep_item", "dep_offset", "req_item",
                     "req_offset", "req_delay"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"Workload.{name} has {len(getattr(self, name))} elements, "
                                 f"expected {n}")
        if len(self.run_ptr) != n + 1 or self.run_ptr[0] != 0 \
                or self.run_ptr[-1] != len(self.run_start) or (np.diff(self.run_ptr) < 0).any():
            raise ValueError("Workload.run_ptr is not a valid index into the runs")
        lens = self.run_stop - self.run_start
        if (lens <= 0).any():
            raise ValueError("Workload has an empty or reversed run")
        per_item = np.add.reduceat(lens, self.run_ptr[:-1]) if len(lens) else np.zeros(0)
        if n and not np.array_equal(per_item[np.diff(self.run_ptr) > 0],
                                    self.insns[np.diff(self.run_ptr) > 0]):
            raise ValueError("Workload.insns differs from the sum of its runs")
        if ((self.dep_item >= n) | (self.dep_item < -1)).any():
            raise ValueError("Workload.dep_item names an item that does not exist")
        if (self.dep_offset[self.dep_item >= 0] > self.insns[self.dep_item[self.dep_item >= 0]]).any():
            raise ValueError("Workload.dep_offset lies beyond its waker's instructions")
        req = self.req_item >= 0
        if ((self.req_item >= n) | (self.req_item < -1)).any():
            raise ValueError("Workload.req_item names an item that does not exist")
        if (self.req_offset[req] > self.insns[self.req_item[req]]).any():
            raise ValueError("Workload.req_offset lies beyond its request's instructions")
        if not (np.isfinite(self.req_delay) & (self.req_delay >= 0)).all():
            raise ValueError("Workload.req_delay must be finite and non-negative")
        thread_items = np.sort(self.task_items)
        if not np.array_equal(thread_items, np.flatnonzero(self.kind == THREAD_ITEM)):
            raise ValueError("Workload.task_items must list every thread item exactly once")


def _switch_runs(trace, vcpus: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per vCPU: icount and time_ns of its context switches (sorted)."""
    out = {}
    for v in vcpus:
        if trace.parts("switches", v) or trace.parts("switches"):
            t = trace.table("switches", v)
            ic = t.column("icount").to_numpy().astype(np.int64)
            tm = t.column("time_ns").to_numpy().astype(np.int64)
        else:
            ic = tm = np.zeros(0, dtype=np.int64)
        order = np.argsort(ic, kind="stable")
        out[v] = (ic[order], tm[order])
    return out


def _trace_wakeups(trace) -> pd.DataFrame | None:
    """The ``wakeups`` table as a frame (vcpu, icount, time_ns, woken), or None without one."""
    try:
        if not trace.parts("wakeups"):
            return None
        return trace.df("wakeups")
    except (KeyError, ValueError):
        return None


def build_workload(seg, trace=None, wakeups: pd.DataFrame | None = None,
                   name: str = "", keep_harness: bool = False) -> Workload:
    """The :class:`Workload` of a segmented trace.

    Parameters
    ----------
    seg : pysched.superfunctions.Segmentation
    trace : Trace, optional
        The segmented trace (default: opened from ``seg.path``); its ``switches`` and, when
        present, ``wakeups`` tables give the dependencies.
    wakeups : pandas.DataFrame, optional
        Wake-ups to use instead of the trace's table (columns ``vcpu``, ``icount``,
        ``time_ns``, ``woken``).
    name : str
        Label of the workload (e.g. the trace directory's name).
    keep_harness : bool
        Replay the capture harness's own work too (``seg.instances["harness"]``,
        :mod:`pysched.superfunctions.harness`); by default it is left out, like a thread
        the workload does not have.
    """
    from pysched.trace import open_trace
    if trace is None:
        trace = open_trace(seg.path)
    if wakeups is None:
        wakeups = _trace_wakeups(trace)
    inst = seg.instances
    pcs = seg.counted_pieces(keep_harness)
    pcs = pcs[~pcs["sched"].to_numpy()]
    p_inst = pcs["instance"].to_numpy().astype(np.int64)
    p_vcpu = pcs["vcpu"].to_numpy().astype(np.int64)
    p_start = pcs["start"].to_numpy().astype(np.int64)
    p_stop = pcs["stop"].to_numpy().astype(np.int64)
    cat = inst["category"].to_numpy().astype(np.int8)
    tid = inst["thread_id"].to_numpy().astype(np.int64)
    types, type_id = np.unique(inst["type"].to_numpy().astype(np.uint64), return_inverse=True)
    type_cat = np.zeros(len(types), dtype=np.int8)
    type_cat[type_id] = cat
    vcpus = sorted(int(v) for v in seg.vcpu_insns)
    switches = _switch_runs(trace, vcpus)

    # Each piece's run between switches on its vCPU, and that run's start time.
    p_run = np.zeros(len(pcs), dtype=np.int64)
    p_time = np.zeros(len(pcs), dtype=np.int64)
    for v in vcpus:
        m = p_vcpu == v
        ic, tm = switches[v]
        r = np.searchsorted(ic, p_start[m], side="right")
        p_run[m] = r
        if len(tm):  # a vCPU without switches has one run, started before the trace
            p_time[m] = np.where(r > 0, tm[np.maximum(r - 1, 0)], -1)
        else:
            p_time[m] = -1

    is_async = np.isin(cat[p_inst], _ASYNC)
    # Interrupts seen so far on each piece's vCPU: a thread item never spans one, so that
    # every vCPU's work is a sequence of whole items (the as-traced replay relies on it).
    p_gap = np.zeros(len(pcs), dtype=np.int64)
    for v in vcpus:
        m = np.flatnonzero(p_vcpu == v)
        m = m[np.argsort(p_start[m], kind="stable")]
        p_gap[m] = np.cumsum(is_async[m])
    items: list[tuple] = []        # (kind, task, instance, begins, release, arrival_vcpu)
    item_runs: list[list[tuple[int, int, int]]] = []
    task_lists: dict[int, list[int]] = {}
    item_switch: dict[int, tuple[int, int, int, int]] = {}  # item -> (vcpu, run, prev v, prev run)
    clock = seg.clock
    # Each instance's start in machine time (an interrupt's arrival).
    i_vcpu = inst["start_vcpu"].to_numpy().astype(np.int64)
    i_start = inst["start_icount"].to_numpy().astype(np.int64)
    inst_time = np.zeros(len(inst), dtype=np.float64)
    for v in vcpus:
        m = i_vcpu == v
        inst_time[m] = clock.seconds(v, i_start[m])

    # Thread items: each thread's pieces in run order ((start time, vCPU) of the run, as the
    # segmentation walks them), cut where the instance or the run changes.
    th = np.flatnonzero(~is_async)
    order = np.lexsort((p_start[th], p_vcpu[th], p_time[th], tid[p_inst[th]]))
    th = th[order]
    seen_inst: set[int] = set()
    last_key = None
    for k in th.tolist():
        i, t = int(p_inst[k]), int(tid[p_inst[k]])
        key = (t, i, int(p_vcpu[k]), int(p_run[k]), int(p_gap[k]))
        if last_key is not None and key == last_key:
            item_runs[-1].append((int(p_vcpu[k]), int(p_start[k]), int(p_stop[k])))
            continue
        lst = task_lists.setdefault(t, [])
        if not lst:
            begins = FIRST
        elif i not in seen_inst:
            begins = START
        elif last_key[1] == i:
            begins = RESUME
        else:
            begins = RETURN
        it = len(items)
        if lst and (last_key[2], last_key[3]) != (key[2], key[3]):
            item_switch[it] = (key[2], key[3], last_key[2], last_key[3])
        elif not lst:
            item_switch[it] = (key[2], key[3], -1, -1)
        seen_inst.add(i)
        items.append((THREAD_ITEM, t, i, begins, 0.0, int(p_vcpu[k])))
        item_runs.append([(int(p_vcpu[k]), int(p_start[k]), int(p_stop[k]))])
        lst.append(it)
        last_key = key

    # Async items: one per interrupt or bottom-half instance and run between switches, its
    # pieces in order. An interrupt whose exit path switched threads finishes when (and where)
    # the interrupted thread resumes: that later part is an item of its own that follows the
    # first part (``cont``).
    asy = np.flatnonzero(is_async)
    asy = asy[np.lexsort((p_start[asy], p_vcpu[asy], p_time[asy], p_inst[asy]))]
    inst_item: dict[int, int] = {}     # instance -> its first item
    inst_last: dict[int, tuple[int, int, int]] = {}  # instance -> (item, vcpu, run) of its last
    cont: list[tuple[int, int]] = []   # (later part, earlier part)
    for k in asy.tolist():
        i, v, r = int(p_inst[k]), int(p_vcpu[k]), int(p_run[k])
        run = (v, int(p_start[k]), int(p_stop[k]))
        if i in inst_last and inst_last[i][1:] == (v, r):
            item_runs[inst_last[i][0]].append(run)
            continue
        it = len(items)
        if i in inst_last:
            cont.append((it, inst_last[i][0]))
            items.append((ASYNC_ITEM, -1, i, RESUME, 0.0, v))
        else:
            inst_item[i] = it
            arrival = float(inst_time[i])
            items.append((ASYNC_ITEM, -1, i, START, arrival, v))
        inst_last[i] = (it, v, r)
        item_runs.append([run])

    n = len(items)
    kind = np.array([x[0] for x in items], dtype=np.int8)
    task = np.array([x[1] for x in items], dtype=np.int64)
    instance = np.array([x[2] for x in items], dtype=np.int64)
    begins = np.array([x[3] for x in items], dtype=np.int8)
    release = np.array([x[4] for x in items], dtype=np.float64)
    arrival_vcpu = np.array([x[5] for x in items], dtype=np.int64)
    run_ptr = np.zeros(n + 1, dtype=np.int64)
    run_ptr[1:] = np.cumsum([len(r) for r in item_runs])
    flat = [r for rs in item_runs for r in rs]
    run_vcpu = np.array([r[0] for r in flat], dtype=np.int64)
    run_start = np.array([r[1] for r in flat], dtype=np.int64)
    run_stop = np.array([r[2] for r in flat], dtype=np.int64)
    lens = run_stop - run_start
    insns = np.add.reduceat(lens, run_ptr[:-1]) if len(lens) else np.zeros(n, np.int64)
    insns = np.where(np.diff(run_ptr) > 0, insns, 0).astype(np.int64)

    dep_item = np.full(n, -1, dtype=np.int64)
    dep_offset = np.zeros(n, dtype=np.int64)
    # The later part of an interrupt is ready when its earlier part has ended. A bottom half
    # raised by an interrupt ran nested in the interrupt's exit path (irq_exit): it is ready
    # once the interrupt has executed what it executed before it, i.e. the work on its vCPU
    # up to where the bottom half began (not the interrupt's end: the interrupt's rest may
    # have continued later, on another vCPU, after a switch).
    for later, earlier in cont:
        dep_item[later] = earlier
        dep_offset[later] = insns[earlier]
    locate = _Locator(run_vcpu, run_start, run_stop, run_ptr, vcpus)
    parent = inst["parent"].to_numpy().astype(np.int64)
    for i, it in inst_item.items():
        p = int(parent[i])
        if cat[i] == int(Category.BOTTOM_HALF) and p >= 0 and p in inst_item:
            r = int(run_ptr[it])
            w_item, w_off = locate(int(run_vcpu[r]), int(run_start[r]))
            if w_item >= 0 and w_item != it:
                dep_item[it] = w_item
                dep_offset[it] = w_off
                release[it] = 0.0
    task_keys = np.asarray(seg.thread_keys, dtype=np.uint64)
    if wakeups is not None:
        dependencies = "wakeups"
        _wakeup_dependencies(item_switch, task, task_keys, switches, wakeups, locate,
                             dep_item, dep_offset)
    else:
        dependencies = "traced-time"
        for it, (v, r, _, _) in item_switch.items():
            if r > 0:
                release[it] = float(clock.seconds(v, switches[v][0][r - 1]))
    ntask = int(tid.max()) + 1 if len(tid) else 0
    task_ptr = np.zeros(ntask + 1, dtype=np.int64)
    counts = np.zeros(ntask, dtype=np.int64)
    for t, lst in task_lists.items():
        counts[t] = len(lst)
    task_ptr[1:] = np.cumsum(counts)
    task_items = np.zeros(int(task_ptr[-1]), dtype=np.int64)
    for t, lst in task_lists.items():
        task_items[task_ptr[t]:task_ptr[t + 1]] = lst
    keys = np.zeros(ntask, dtype=np.uint64)
    keys[:min(ntask, len(task_keys))] = task_keys[:ntask]
    irq_item = {i: it for i, it in inst_item.items() if cat[i] == int(Category.INTERRUPT)}
    dev = device_links(trace, n, irq_item, i_vcpu, i_start, inst_time, locate, clock)
    w = Workload(kind, task, instance, type_id[instance].astype(np.int64), cat[instance],
                 begins, insns, inst["number"].to_numpy().astype(np.int64)[instance], release,
                 arrival_vcpu, dep_item, dep_offset, run_ptr, run_vcpu, run_start, run_stop,
                 task_ptr, task_items, types, type_cat, keys, dependencies, vcpus, name,
                 dev.item, dev.offset, dev.delay, dev.completions, dev.arrivals)
    w.validate()
    return w


class _Locator:
    """From a trace position (vCPU, icount) to the item executing there and its offset."""

    def __init__(self, run_vcpu, run_start, run_stop, run_ptr, vcpus) -> None:
        run_item = np.repeat(np.arange(len(run_ptr) - 1), np.diff(run_ptr))
        lens = run_stop - run_start
        before = np.zeros(len(lens), dtype=np.int64)   # item instructions before each run
        for i in range(len(run_ptr) - 1):
            lo, hi = run_ptr[i], run_ptr[i + 1]
            if hi > lo:
                before[lo:hi] = np.cumsum(lens[lo:hi]) - lens[lo:hi]
        self.by_vcpu = {}
        for v in vcpus:
            m = np.flatnonzero(run_vcpu == v)
            m = m[np.argsort(run_start[m], kind="stable")]
            self.by_vcpu[v] = (run_start[m], run_stop[m], run_item[m], before[m])

    def __call__(self, vcpu: int, icount: int) -> tuple[int, int]:
        """Item and offset that had executed up to ``icount`` (scheduler code counts as the
        item whose run precedes it); (-1, 0) before any run of the vCPU."""
        if vcpu not in self.by_vcpu:
            return -1, 0
        st, sp, item, before = self.by_vcpu[vcpu]
        j = int(np.searchsorted(st, icount, side="right")) - 1
        if j < 0:
            return -1, 0
        return int(item[j]), int(before[j] + min(icount - st[j], sp[j] - st[j]))


def _effective_wakeups(wk: pd.DataFrame) -> pd.DataFrame:
    """Wake-ups that took effect: one row per ``ttwu_do_wakeup`` row (kind 3), at its time but
    at the place (vCPU, icount) of the latest call row (kind 1 or 2) for the same task before
    it, on any vCPU (a remote wake list runs the effect on the woken task's CPU), since the
    call is where the waker decided; an effect without a call keeps its own place. Calls
    without an effect (the task was running or runnable: preempted, not blocked) drop out."""
    done = wk[wk["kind"] == WAKE_DONE]
    calls = wk[wk["kind"] != WAKE_DONE]
    by_task = {int(k): g for k, g in calls.groupby("woken", sort=False)}
    rows = []
    for r in done.itertuples(index=False):
        c = by_task.get(int(r.woken))
        j = -1 if c is None else int(np.searchsorted(c["time_ns"].to_numpy(), r.time_ns,
                                                     side="right")) - 1
        src = r if j < 0 else c.iloc[j]
        rows.append((int(r.time_ns), int(src.vcpu), int(src.icount), int(r.woken)))
    return pd.DataFrame(rows, columns=["time_ns", "vcpu", "icount", "woken"])


def _wakeup_dependencies(item_switch, task, task_keys, switches, wakeups, locate,
                         dep_item, dep_offset) -> None:
    """Set ``dep_item``/``dep_offset`` of every thread item that a traced wake-up released."""
    wk = wakeups.sort_values("time_ns", kind="stable")
    if "kind" in wk.columns and (wk["kind"] == WAKE_DONE).any():
        wk = _effective_wakeups(wk)
    by_task: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for key, g in wk.groupby("woken", sort=False):
        by_task[int(key)] = (g["time_ns"].to_numpy().astype(np.int64),
                             g["vcpu"].to_numpy().astype(np.int64),
                             g["icount"].to_numpy().astype(np.int64))
    for it, (v, r, pv, pr) in item_switch.items():
        key = int(task_keys[task[it]]) if task[it] < len(task_keys) else 0
        if key == 0 or key not in by_task:
            continue
        times, wv, wic = by_task[key]
        t_in = switches[v][1][r - 1] if r > 0 else -1
        if pv >= 0:
            ic, tm = switches[pv]
            t_out = tm[pr] if pr < len(tm) else t_in
        else:
            t_out = -1  # the thread's first item: a wake-up before it (a new task) counts
        if t_in < 0:
            continue
        j = int(np.searchsorted(times, t_out, side="right"))
        if j >= len(times) or times[j] > t_in:
            continue  # no wake-up in between: preempted, runnable all along
        w_item, w_off = locate(int(wv[j]), int(wic[j]))
        if w_item < 0 or w_item == it or (task[w_item] == task[it] and task[it] >= 0):
            continue  # a thread does not wait for itself
        dep_item[it] = w_item
        dep_offset[it] = w_off
