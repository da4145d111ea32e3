"""The sandbox engine: a discrete-event replay of a :class:`Workload` on simulated cores.

Rules (each an approximation of a real machine, written down here where it is made):

* **Epochs** are :attr:`SandboxConfig.epoch_s` (3 ms, section 4.4) of simulated time. The
  trace's epochs are 3 ms of its machine time (machine-wide instructions at the nominal clock
  and IPC on every vCPU, :mod:`pysched.trace.clock`), and the workload's arrival times are on
  that clock (:mod:`.workload`): one definition, the same 3 ms wherever the sandbox runs the
  trace's work at the nominal clock and IPC on as many busy cores as it had vCPUs. Simulated
  time also passes while cores idle or stall, which the trace's clock does not see.
* **Time** is simulated seconds. A core runs an item in *chunks* of at most
  :attr:`SandboxConfig.max_chunk` instructions; a chunk's accesses go through the core's
  private L1i/L1d/L2 and the shared L3 (:class:`~pysched.models.caches.hierarchy.Hierarchy`,
  whose contents persist across epochs) when the chunk starts, and it lasts
  ``instructions * base_cpi + stall cycles`` (:mod:`pysched.models.cores.timing`) at the core's
  DVFS frequency. Events that happen during a chunk (an interrupt arriving, a time slice
  ending, an item becoming ready for an idle core) take effect at its end, so they are late by
  at most one chunk (20,000 instructions, about 10 us at 2 GHz, by default).
* **Order across cores**: the chunk that ends first is processed first; the shared L3 sees the
  cores' accesses interleaved chunk by chunk.
* **Dependencies**: an item runs once its thread's previous item has ended, its waker has
  executed as far as the traced wake-up (:mod:`.workload`), and its release time has passed
  (interrupt arrivals; the fixed schedule of a trace without wake-ups). Chunks end at every
  instruction offset where an item wakes another (or makes a device request, below), so the
  woken item is ready then; wake-ups are released only at the end of a chunk. A wake-up at
  offset 0 ends a chunk of no instructions: the waker reaches it once its core has paid the
  switch or migration cost the waker's first chunk carries (immediately when there is none),
  not when its core picks it.
* **Costs** (:mod:`.switch_cost`): a thread starting on a core where another thread ran last
  pays a context switch. Under the ``traced`` model (``switch_cycles = None``: the default of
  ``pysched evaluate`` and :func:`pysched.evaluation.runner.evaluate`, which have the trace)
  the switch *runs* the traced kernel's switch path: the next ``per_switch`` instructions of the
  trace's scheduler code (the code the segmentation leaves out of every SuperFunction), taken
  in trace order and cyclically, go through the core's caches with their traced fetch lines
  and data accesses, and cost ``instructions * base CPI + stall cycles`` like any chunk
  (cache class :attr:`Engine.sched_class`). A constant ``switch_cycles`` charges that instead
  (``flat``: seed 001's 1,000; ``zero``). A thread the OS moved from another core pays
  :attr:`SandboxConfig.os_migration_cycles` on top (0 under ``traced``: its cold caches are
  modelled; None: the core's ``migration_cycles``). Interrupt and bottom-half items switch
  no thread. A policy may charge the work of its own routines with :meth:`SimView.charge`
  (SchedTask's TMigrate and TAlloc, :mod:`pysched.policies.schedtask`); the cycles go to the
  core's next chunk.
* **Idle cores look for work** (:attr:`SandboxConfig.idle_retry`, as Linux's do): when an
  item is queued on a busy core while other cores are idle, each idle core is sent an IPI and
  runs its policy's ``steal`` and ``pick_next`` :attr:`SandboxConfig.ipi_s` later (Linux
  kicks an idle CPU to pull work, ``kick_ilb`` / ``nohz_balancer_kick``; SchedTask's
  Algorithm 1 line 23 sends an IPI to an idle core it queues work on); and every idle core
  does so again at every tick of the simulated machine (:attr:`SandboxConfig.tick_hz`, HZ 250
  by default: Linux's periodic idle balance runs from the tick), not at the trace's interrupt
  rate. What a core takes is its policy's rule. Idle time is split into ``idle_no_work``
  (nothing queued anywhere: every thread blocked or waiting for a release) and
  ``idle_work_waiting`` (an item queued on some core while this one idled).
* **Interrupts first**: when an interrupt or bottom half is queued on a core that runs a thread
  item, the thread is interrupted at the end of the chunk (unless the policy sets
  ``preempt_for_interrupts = False``; a policy that queues bottom halves as work of their own
  sets ``preempt_for_bottom_halves = False``, so that only hardware interrupts preempt). The
  interrupted thread stays the core's (out of its queue, so not stolen) and resumes as soon as
  no such item waits, without a pick or a switch: Linux handles an interrupt (and the
  softirqs of its ``irq_exit``) on the interrupted thread's stack and returns to it unless
  ``TIF_NEED_RESCHED`` is set, and seed 000 section 3 resumes the paused SuperFunction after
  the handler. It goes back to the queue instead, to be picked like any other, when by then
  its time slice is over or the policy's ``wakeup_preempt`` says a queued thread preempts it
  (the need-resched cases, below). Before 2026-11-26 every interrupted thread went to the back
  of the queue, so that first come first served policies ran the queued work first.
* **A hardware interrupt preempts a bottom half, not another interrupt**: when a hardware
  interrupt is queued on a core that runs a bottom half, the bottom half is paused at the end
  of its chunk and put back at the head of the core's queue, so that it resumes once the
  interrupts are handled (Linux runs softirqs with interrupts enabled, ``__do_softirq``, and
  ``irq_exit`` returns to the interrupted softirq; seed 000, section 3: a core that receives a
  hardware interrupt pauses the running SuperFunction, which resumes after the handler). A
  running interrupt handler is never preempted (Linux runs handlers with interrupts disabled).
  Policies with ``preempt_for_interrupts = False`` keep bottom halves running too. Latency is
  counted once per item, at its first start. Approximation: late by up to one chunk, as every
  event; the policy's ``pick_next`` decides that the interrupt runs before the paused bottom
  half (every policy that preempts takes hardware interrupts first).
* **Scheduling points**: a thread item gives its core up only at the end of a chunk where an
  interrupt waits (until the handlers are done, above), its time slice (the policy's
  ``time_slice``) is over, or the policy's ``wakeup_preempt`` says so (CFS's wake-up preemption,
  checked at chunk ends, so late by at most one chunk), and when it blocks (its thread's next
  item is not ready). A SuperFunction boundary (a system call's entry or return, an exception,
  the resumption of a traced preemption) that the policy places on the thread's own core is
  none: the thread continues there, as Linux reschedules on the way back from a system call or
  an exception only when ``TIF_NEED_RESCHED`` is set (``exit_to_user_mode_loop``), that is after
  the tick or a wake-up found the current thread should be preempted. A policy that schedules
  every SuperFunction as a unit of its own sets ``pick_at_boundaries = True`` (the ``as-traced``
  oracle, which replays the traced order, and SchedTask, whose Algorithm 1 queues every starting
  SuperFunction).
* **Load**: ``copies = K`` runs K copies of the whole workload (threads, interrupts and bottom
  halves; see :mod:`.workload`). Copies execute the same code frames (one kernel, one program
  binary). Their data (loads and stores) is split by :attr:`Footprint.private`
  (:mod:`.kernel_data`): each copy's user data and the kernel data the trace shows belonging
  to one thread lie in frames of the copy's own (moved by ``copy * DATA_COPY_STRIDE``); the
  kernel data several threads or only interrupts touched (kernel globals, per-CPU areas) is
  one, shared by every copy (``kernel_data = "shared"``, the default; ``"per-copy"`` moves
  all of a copy's data).
* **Copy phase**: copy ``k >= 1`` starts :attr:`Engine.phase` ``[k]`` seconds late, drawn
  uniformly from one epoch with a generator seeded by :attr:`SandboxConfig.phase_seed`
  (``copy_phase = "offset"``): independent instances of a benchmark do not start, or take
  their interrupts, at the same instants. Every release time of the copy (its interrupts'
  arrivals, its first items) moves with it. Copy 0 starts at 0, so one copy replays the
  trace's own timing. ``"in-phase"``: every copy at 0.
* **Hardware ticks and moves of running threads** (for policies below the OS, as seed 001's
  hardware round-robin): a policy with a ``tick_s`` gets its ``tick`` hook every ``tick_s``
  simulated seconds (or after the delay the hook returns); it may ask the engine to move the
  thread item running on a core to another core with :meth:`SimView.migrate_running`. The move
  takes effect at the end of the running chunk (late by at most one chunk, as every event);
  on the destination the item runs next, ahead of the queue, and a thread item running there
  is put back at the head of that core's queue. Such a move is a hardware thread swap, not an
  OS context switch: the thread pays the destination's ``migration_cycles`` (seed 001's 1,000
  cycles, section 4.2) and the cold caches, not ``switch_cycles``.
* **DVFS at run time**: :meth:`SimView.set_level` changes a core's operating point; the chunk
  running then keeps its frequency, the next one uses the new level (time, dynamic energy and
  static power follow the level in force).
* **Devices in a closed loop** (:mod:`.device_loop`, :attr:`SandboxConfig.device_timing`
  ``"closed"``, the default): a device interrupt that answers a traced request (a virtio
  queue kick) arrives the request's traced latency after the item making the request has
  executed the kick in the simulation, and a closed-loop peer's packet the traced think time
  after the guest's latest transmit before it; so a schedule that runs the requester sooner
  gets its answers sooner. Latencies are in the trace's machine time, as every release;
  interrupts without a linked request keep their traced arrival. ``"traced"``: every
  interrupt at its traced arrival (an open loop).
* **Deadlock**: a wake-up that cannot happen in the simulation (a cycle of waits that the
  trace's order broke) is released at its traced time when nothing else can run, and counted.
"""
from __future__ import annotations

from heapq import heappop as _heappop, heappush as _heappush
import math
from functools import cached_property

import numpy as np

from pysched._lastone import LastOne
from pysched.heatmaps.hashing import bloom_bit
from pysched.models.caches.hierarchy import Hierarchy
from pysched.models.codes import NLEVELS
from pysched.models.cores.timing import stall_table
from pysched.policies.base import Policy
from pysched.superfunctions.functype import Category

from .chunk_kernel import CORE_ROWS, stall_sum
from .config import SandboxConfig
from .footprint import Footprint
from .item_streams import gather_streams, run_offsets
from .metrics import SandboxStats
from .runqueue import RunQueue
from .simview import SimView, Work, idle_cores
from .workload import ASYNC_ITEM, FIRST, RETURN, START, THREAD_ITEM, Workload


#: Physical-address offset between the data of consecutive copies: 2**40 bytes, beyond any
#: guest RAM, and a multiple of every set count, so a copy's data map to the same sets as the
#: original's (as distinct frames with the same page offset and colour would).
DATA_COPY_STRIDE = np.uint64(1 << 40)

_EV_CORE, _EV_RELEASE, _EV_EPOCH, _EV_TICK, _EV_POKE, _EV_IDLE_TICK = 0, 1, 2, 3, 4, 5
_INTERRUPT = int(Category.INTERRUPT)
_CELLS = 3 * NLEVELS   # a stall table's (kind, level) cells


def _floats(xs: list) -> np.ndarray:
    return np.array(xs, dtype=np.float64)


def _ints(xs: list) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


#: The last switch path's stream (:func:`_switch_stream`).
_LAST_SWITCH = LastOne()


def _switch_stream(path, fp: Footprint, vcpus: tuple):
    """The accesses of ``path``'s runs on ``vcpus`` laid end to end as one stream
    (:func:`.item_streams.gather_streams`) and its instructions, kept for the next replay of
    the same trace (every policy of a study replays one trace after the other; gathering
    took about 20 ms a replay on netserver-10b)."""
    return _LAST_SWITCH.get((path, fp), vcpus, lambda: _gather_switch(path, fp, vcpus))


def _gather_switch(path, fp: Footprint, vcpus: tuple):
    runs = np.asarray(path.runs, dtype=np.int64)
    runs = runs[np.isin(runs[:, 0], list(vcpus)) & (runs[:, 2] > runs[:, 1])]
    if not len(runs):
        raise ValueError("the trace's switch path lies on no replayed vCPU")
    lens = runs[:, 2] - runs[:, 1]
    before = np.concatenate(([0], np.cumsum(lens)[:-1]))
    return (gather_streams(fp, np.zeros(len(runs), dtype=np.int64), 1, runs[:, 0], runs[:, 1],
                           runs[:, 2], before), int(lens.sum()))


class Engine:
    """One run of a policy on a workload (use :func:`.replay.simulate`)."""

    def __init__(self, workload: Workload, footprint: Footprint, policy, config: SandboxConfig,
                 app_event_items: np.ndarray | None = None, switch_path=None) -> None:
        self.w, self.fp, self.policy, self.cfg = workload, footprint, policy, config
        w = workload
        self.n = len(w)
        self.K = config.copies
        self.ncores = config.ncores
        # Per-core floats as rows of one array (:data:`CORE_ROWS`; the attributes are views),
        # so that the compiled engine passes them in one argument.
        self.core_f = np.zeros((len(CORE_ROWS), self.ncores))
        for k, name in enumerate(CORE_ROWS):
            setattr(self, name, self.core_f[k])
        #: Cache class of the context-switch path (after the superFuncTypes' ids): OS code.
        self.sched_class = len(w.types)
        self.hier = Hierarchy(config.machine.hierarchy, classes=len(w.types) + 1)
        self._init_switch_path(switch_path)
        #: Start offset of each copy in seconds (see the module, Copy phase).
        self.phase = np.zeros(self.K)
        if config.copy_phase == "offset" and self.K > 1:
            rng = np.random.default_rng(config.phase_seed)
            self.phase[1:] = rng.uniform(0.0, config.epoch_s, self.K - 1)
        # Idle accounting (core-seconds): nothing queued anywhere, or work queued somewhere.
        self.acc_t = 0.0
        self.s_idle_none = 0.0
        self.s_idle_wait = 0.0
        self.core_poked = [False] * self.ncores
        #: When each core last ran its policy's pick (and steal): dispatch.
        self.core_looked = [0.0] * self.ncores
        #: The invariant check (tests): when True, :attr:`max_unlooked` is the longest an
        #: idle core went without looking while work was queued (at most a tick and an IPI
        #: with ``idle_retry``).
        self.check_idle = False
        self.max_unlooked = 0.0
        self.wait_since: float | None = None
        # cycles a policy charged to a core (SimView.charge), paid by its next chunk
        cores = config.machine.cores
        self.level = np.array([c.level % len(c.dvfs) for c in cores], dtype=np.int64)
        self.static_w = np.zeros(len(cores))
        for c in range(len(cores)):
            self._operating_point(c)
        # Static energy of the levels left behind (set_level), so that a snapshot's static
        # energy is the sum over the stretches at each level.
        self.static_j = np.zeros(len(cores))
        self.level_since = np.zeros(len(cores))
        self.cpi[:] = [c.base_cpi for c in cores]
        full = config.ifetch_penalty == "full"
        self.stall = [stall_table(config.machine.hierarchy, c, ifetch_full=full) for c in cores]
        self.stall_flat = [np.ascontiguousarray(t.reshape(-1)) for t in self.stall]
        self._stall3 = np.stack(self.stall)  # (cores, kinds, levels), for snapshot's split
        self.mig_cycles = np.array([c.migration_cycles for c in cores], dtype=np.float64)
        # an OS move's charge (dispatch); hardware moves (_run_moved) keep mig_cycles
        self.os_mig_cycles = self.mig_cycles if config.os_migration_cycles is None else \
            np.full(len(cores), float(config.os_migration_cycles))
        self.vidx = {v: k for k, v in enumerate(w.vcpus)}
        nv = max(1, len(w.vcpus))
        # Copy k of vCPU v is first mapped to core (k * vCPUs + v) mod cores.
        self.home = lambda copy, vcpu: (copy * nv + self.vidx.get(vcpu, 0)) % self.ncores
        # Instructions of an item before each of its runs.
        self.run_before = run_offsets(w)
        # Who waits for whom: per waker item, (offset, dependent, delay) sorted by offset:
        # wake-ups (no delay) and, in a closed device loop, the requests that release
        # interrupts (their traced latency).
        #: Items an executed request releases (closed loop), instead of their release time.
        self.by_request = (w.req_item >= 0) if config.device_timing == "closed" \
            else np.zeros(self.n, dtype=bool)
        deps = np.flatnonzero(w.dep_item >= 0)
        reqs = np.flatnonzero(self.by_request)
        waker = np.concatenate([w.dep_item[deps], w.req_item[reqs]])
        off = np.concatenate([w.dep_offset[deps], w.req_offset[reqs]])
        dependent = np.concatenate([deps, reqs])
        delay = np.concatenate([np.zeros(len(deps)), w.req_delay[reqs]])
        order = np.lexsort((off, waker))
        self.wait_ptr = np.zeros(self.n + 1, dtype=np.int64)
        np.add.at(self.wait_ptr, waker + 1, 1)
        np.cumsum(self.wait_ptr, out=self.wait_ptr)
        self.wait_off = off[order]
        self.wait_dep = dependent[order]
        self.wait_delay = delay[order]
        self.events_w = (np.zeros(self.n, dtype=np.int64) if app_event_items is None
                         else np.asarray(app_event_items, dtype=np.int64))
        # The per-item tables the event loop reads one element at a time, as Python lists
        # (an element of a list is several times faster to read than one of an array).
        self._insns = w.insns.tolist()
        self._type = w.type_id.tolist()
        self._taskof = w.task.tolist()
        self._wptr = self.wait_ptr.tolist()
        self._woff = self.wait_off.tolist()
        self._wdep = self.wait_dep.tolist()
        self._wdelay = self.wait_delay.tolist()
        self._events = self.events_w.tolist()
        r0 = w.run_ptr[:-1]
        has = r0 < len(w.run_vcpu)
        tvcpu = np.where(has, w.run_vcpu[np.minimum(r0, max(len(w.run_vcpu) - 1, 0))]
                         if len(w.run_vcpu) else -1, -1).tolist()
        tstart = np.where(has, w.run_start[np.minimum(r0, max(len(w.run_start) - 1, 0))]
                          if len(w.run_start) else -1, -1).tolist()
        # what a Work item holds of its item, one tuple a item (work)
        self._static = list(zip(self._type, w.types[w.type_id].tolist() if self.n else [],
                                w.category.tolist(), w.number.tolist(), w.begins.tolist(),
                                (w.kind == ASYNC_ITEM).tolist(), tvcpu, tstart))
        # Dynamic state over all copies.
        total = self.n * self.K
        ntask = w.ntasks
        self.prog = [0] * total                          # instructions done
        self.trig = [0] * total                          # next waiter index (relative)
        self.pending = [0] * total                       # unmet conditions (setup)
        self.ready_t = [0.0] * total                     # when it (last) joined a queue
        self.ready0 = [0.0] * total                      # when it first became ready
        self.begun = [False] * total                     # has started (latency counted once)
        self.log: list[tuple] | None = None  # (gid, core, t0, t1, lo, hi) per chunk if a list
        self.item_cycles = np.zeros(total, dtype=np.float64)
        # Python floats of the arrays the loop reads an element of at every item (a
        # memoryview's element is a float; a numpy array's a numpy scalar, slower to make and
        # to compare); the compiled chunk writes the arrays
        self._item_cycles = memoryview(self.item_cycles)
        self._until = memoryview(self.core_until)
        self._charge = memoryview(self.core_charge)
        self._cpi = memoryview(self.cpi)
        self._max_chunk = config.max_chunk
        self._item_done = self._hook_item_done()
        self.task_pos = [0] * (ntask * self.K)
        self.ntask = ntask
        self._task_ptr = w.task_ptr.tolist()
        self._task_items = w.task_items.tolist()
        self.task_core = [-1] * (ntask * self.K)          # where each thread ran last
        # per-thread floats and integers, rows of two arrays (views, as core_f)
        self.task_f = np.zeros((2, ntask * self.K))
        self.task_time = self.task_f[0]
        self._task_time = memoryview(self.task_time)  # floats, as _until
        self.task_i = np.zeros((2, ntask * self.K), dtype=np.int64)
        self.s_task_insns = self.task_i[0]
        # per-thread hardware counters: busy cycles, and accesses served by memory (misses
        # of the shared last-level cache)
        self.task_cycles = self.task_f[1]
        self.task_llc_misses = self.task_i[1]
        self.dep_done = np.zeros(total, dtype=bool)      # its wake-up has happened
        # each queue's threads (items not async), one slot per core (SimView.queued_threads)
        self.threads_queued = [0] * self.ncores
        self.queues: list[RunQueue] = [RunQueue(tally=self.threads_queued, slot=c)
                                       for c in range(self.ncores)]
        self.core_item = [-1] * self.ncores
        # the thread item an interrupt took the core from (resumes next, see the module)
        self.core_paused = [-1] * self.ncores
        self.core_end = [0] * self.ncores                # offset the running chunk reaches
        self.core_task = [-1] * self.ncores              # thread that ran last
        self.core_slice = [0.0] * self.ncores            # when the running thread item began
        self.core_kicked = [False] * self.ncores
        self.core_moveto = [-1] * self.ncores            # migrate_running: where to at chunk end
        self.incoming: list[list[int]] = [[] for _ in range(self.ncores)]  # moved, run next
        self.task_end = np.full(ntask * self.K, np.nan)  # when each thread's last item ended
        self.periodic = 0                                # epoch and tick events in the heap
        self.tick_s = float(policy.tick_s or 0.0)
        self.heap: list = []
        #: Kicks not yet handled, ``(seq, core)`` in order: events at the current time (see
        #: :meth:`kick`), kept apart from the heap.
        self._kicks: list[tuple[int, int]] = []
        self.seq = 0
        self.now = 0.0
        self.done_items = 0
        self.forced = 0
        #: False once a run stops at SandboxConfig.max_epochs with work left.
        self.complete = True
        self._works: dict[int, Work] = {}
        # Page-heatmaps of the running epoch (section 3.2), when the policy asks for them:
        # each superFuncType's bits set by the code frames its instructions were fetched from.
        self.heat_bits = int(policy.heatmap_bits or 0)
        self.heat = np.zeros((len(w.types), max(self.heat_bits, 1)), dtype=bool)
        self._init_stats()

    @cached_property
    def run_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Each run's accesses: positions ``[alo, ahi)`` in its vCPU's footprint (the plain
        engine's :meth:`accesses`; built on first use)."""
        w = self.w
        alo = np.zeros(len(w.run_start), dtype=np.int64)
        ahi = np.zeros(len(w.run_start), dtype=np.int64)
        for v in w.vcpus:
            m = w.run_vcpu == v
            alo[m] = self.fp.index(v, w.run_start[m])
            ahi[m] = self.fp.index(v, w.run_stop[m])
        return alo, ahi

    def _init_switch_path(self, path) -> None:
        """The traced switch path (:class:`.switch_cost.TracedSwitch`), for ``switch_cycles =
        None``: its ranges' accesses laid end to end as one cyclic stream
        (:func:`.item_streams.gather_streams`), of which each switch replays the next
        ``per_switch`` instructions' (see the module)."""
        if self.cfg.switch_cycles is not None:
            return
        if path is None or not len(path.runs):
            raise ValueError("the traced switch cost needs the trace's switch path "
                             "(simulate(switch_path=...)); give switch_cycles instead")
        #: The switch path as one stream (offsets: instructions of the path end to end), and
        #: the instructions in one pass of it.
        self.sw, self.sw_total = _switch_stream(path, self.fp, tuple(self.w.vcpus))
        self.sw_per = float(path.per_switch)
        self.sw_count = 0       # switches replayed
        self.sw_insns = 0       # their instructions

    def _switch_take(self, c: int) -> tuple[int, int]:
        """Core ``c`` switches on the traced path: ``(start, n)``, its next ``n`` instructions
        of the cyclic stream from ``start`` (n = 0: none this time), which the chunk that
        follows runs through the caches first (:meth:`_switch_cycles`)."""
        n = int(round((self.sw_count + 1) * self.sw_per)) - self.sw_insns
        self.sw_count += 1
        if n <= 0:
            return 0, 0
        start = self.sw_insns % self.sw_total
        self.sw_insns += n
        self.s_switch_insns[c] += n
        return start, n

    def _switch_cycles(self, c: int, start: int, n: int) -> float:
        """Instructions ``[start, start + n)`` of the switch path on core ``c``: their cycles
        (base CPI plus the stall of each piece between wraps, summed piece by piece)."""
        if n <= 0:
            return 0.0
        stall, left = 0.0, n
        while left > 0:
            take = min(left, self.sw_total - start)
            stall += self._switch_piece(c, start, start + take)
            left -= take
            start = 0
        return n * self.cpi[c] + stall

    def _switch_piece(self, c: int, lo: int, hi: int) -> float:
        """Stall cycles of instructions ``[lo, hi)`` of the switch path on core ``c``."""
        sw = self.sw
        a, b = np.searchsorted(sw.off, (lo, hi)).tolist()
        if b <= a:
            return 0.0
        kind = sw.kind[a:b]
        addr = sw.line[a:b].astype(np.uint64) << np.uint64(sw.shift)
        cls = np.full(b - a, self.sched_class, dtype=np.uint16)
        served = self.hier.run(c, addr, kind, cls)
        return stall_sum(np.bincount(kind * NLEVELS + served, minlength=_CELLS),
                         self.stall_flat[c])

    def charge(self, c: int, insns: float) -> None:
        """``insns`` instructions of the policy's own routine on core ``c`` (:meth:`SimView.
        charge`), at the core's base CPI, paid by its next chunk."""
        self._check_core(c, "charge")
        if not (insns >= 0 and math.isfinite(insns)):
            raise ValueError(f"policy {self.policy.name!r} charged {insns!r} instructions; "
                             "give a non-negative number")
        self._charge[c] += insns * self._cpi[c]

    # --- idle cores ---------------------------------------------------------------------------
    def _advance(self, t: float) -> None:
        """Count the idle core time up to ``t`` by what was queued meanwhile (module)."""
        dt = t - self.acc_t
        if dt <= 0:
            return
        t0, self.acc_t = self.acc_t, t
        idle = self.core_item.count(-1)
        if not (idle or self.check_idle):
            return  # every core busy: no idle time to class
        queued = any(self.queues) or any(self.incoming)
        if self.check_idle:
            self._check_looked(t0, t, queued)
        if idle:
            if queued:
                self.s_idle_wait += idle * dt
            else:
                self.s_idle_none += idle * dt

    def _check_looked(self, t0: float, t: float, queued: bool) -> None:
        """The invariant check: how long idle cores went without looking at queued work."""
        if not queued:
            self.wait_since = None
            return
        if self.wait_since is None:
            self.wait_since = t0
        for c in range(self.ncores):
            if self.core_item[c] < 0:
                since = max(self.core_looked[c], self.wait_since)
                self.max_unlooked = max(self.max_unlooked, t - since)

    def _poke_idle(self) -> None:
        """Work waits on a busy core: every idle core looks for work an IPI later (module)."""
        items, queues = self.core_item, self.queues
        # only an idle core with an empty queue is poked: two C-level searches rule out most
        # calls (an idle core waiting for its own queued work, as-traced's, needs none)
        if not self.cfg.idle_retry or -1 not in items or [] not in queues:
            return
        t = self.now + self.cfg.ipi_s
        poked, kicked = self.core_poked, self.core_kicked
        for c in idle_cores(items, 0, self.ncores):
            if not poked[c] and not kicked[c] and not queues[c]:
                poked[c] = True
                self.push(t, _EV_POKE, c)

    def _poked(self, c: int) -> None:
        self.core_poked[c] = False
        if self.core_item[c] < 0 and not self.core_kicked[c]:
            self.dispatch(c)

    def _idle_tick(self) -> None:
        """The machine's tick: every idle core looks for work when any is queued (module)."""
        if not (any(self.queues) or any(self.incoming)):
            return
        for c in range(self.ncores):
            if self.core_item[c] < 0 and not self.core_kicked[c]:
                self.dispatch(c)

    # --- statistics ---------------------------------------------------------------------------
    def _init_stats(self) -> None:
        c, t = self.ncores, len(self.w.types)
        z = lambda dt=np.float64: np.zeros(c, dtype=dt)  # noqa: E731
        self.s_insns = z(np.int64)
        # the per-core sums only the loop adds to (the compiled chunk keeps the others): lists,
        # whose elements Python adds to faster than to a numpy array's (snapshot makes arrays)
        self.s_switch = [0.0] * c
        self.s_mig = [0.0] * c
        self.s_switches = [0] * c
        self.s_migs = [0] * c
        self.s_steals = [0] * c
        self.s_switch_insns = [0] * c
        self.s_type_insns = np.zeros(t, dtype=np.int64)
        self.s_type_cycles = np.zeros(t)
        self.s_type_items = [0] * t  # counted in Python only (finish): a list
        self.s_task_want = [0.0] * (self.w.ntasks * self.K)
        self.s_wait = 0.0
        self.s_waits = 0
        self.s_lat = 0.0
        self.s_bh_lat = 0.0
        self.s_bhs = 0
        self.s_irqs = 0
        self.s_events = 0

    def snapshot(self, at: float) -> SandboxStats:
        """Cumulative statistics up to time ``at`` (busy time of running chunks cut there)."""
        self._advance(at)
        over = np.maximum(self.core_until - at, 0.0)
        busy = self.s_busy - over
        dyn = self.s_dyn - over * self.core_freq * self.core_chunk_cv2
        static = self.static_j + self.static_w * (at - self.level_since)
        cache = self.hier.stats
        return SandboxStats(
            at, self.s_insns.copy(), busy, self.s_base.copy(), self.s_stall.copy(),
            _floats(self.s_switch), _floats(self.s_mig), dyn + static,
            _ints(self.s_switches), _ints(self.s_migs), _ints(self.s_steals),
            self.s_type_insns.copy(), self.s_type_cycles.copy(),
            _ints(self.s_type_items),
            # per copy of the workload (row) and traced thread (column), see copy_fairness
            self.s_task_insns.reshape(self.K, -1).copy(),
            np.array(self.s_task_want).reshape(self.K, -1), self.s_wait, self.s_waits, self.s_lat,
            self.s_irqs, self.s_bh_lat, self.s_bhs, self.s_events, cache,
            _ints(self.s_switch_insns), self.s_charged.copy(), self.s_idle_none,
            self.s_idle_wait, self._stall_split(cache))

    def _stall_split(self, cache) -> np.ndarray:
        """Stall cycles so far per core, access kind and serving level: what each level
        served of the workload's classes (every class but the switch path's) times the stall
        table."""
        served = cache.served[:, :self.sched_class].sum(axis=1)
        return served * self._stall3

    # --- items --------------------------------------------------------------------------------
    def _hook_item_done(self):
        """The policy's ``item_done``; None when it is the base class's, which does nothing
        (not called then)."""
        done = self.policy.item_done
        return None if getattr(done, "__func__", None) is Policy.item_done else done

    def work(self, g: int) -> Work:
        wk = self._works.get(g)
        if wk is None:
            i = g % self.n
            wk = Work()
            wk.gid, wk.copy, wk.item = g, g // self.n, i
            t = self._taskof[i]
            wk.task = -1 if t < 0 else wk.copy * self.ntask + t
            (wk.type_id, wk.functype, wk.category, wk.number, wk.begins, wk.is_async,
             wk.trace_vcpu, wk.trace_start) = self._static[i]
            self._works[g] = wk
        return wk

    def push(self, t: float, kind: int, a: int) -> None:
        self.seq += 1
        _heappush(self.heap, (t, self.seq, kind, a))

    def satisfy(self, g: int, via_dep: bool = False) -> None:
        """A wake-up or a release time of item ``g`` came; place it when nothing is left."""
        self.pending[g] -= 1
        if via_dep:
            self.dep_done[g] = True
        if self.pending[g] == 0:
            self.ready(g, -1)

    def ready(self, g: int, core: int) -> None:
        """Item ``g`` can run; ``core`` is where its thread's previous item just ended."""
        wk = self.work(g)
        pol = self.policy
        if wk.is_async:
            target = pol.route_interrupt(wk, self.home(wk.copy, wk.trace_vcpu))
        else:
            last = self.task_core[wk.task]
            if last < 0:
                last = self.home(wk.copy, wk.trace_vcpu)
            if core < 0 or wk.begins == FIRST:
                target = pol.thread_ready(wk, last)
            elif wk.begins == START:
                target = pol.sf_start(wk, core)
            elif wk.begins == RETURN:
                target = pol.sf_end(wk, core)
            else:
                target = pol.resume(wk, core)
        self._check_core(target, "placement")
        self.ready_t[g] = self.ready0[g] = self.now
        q = self.queues[target]
        q.append(wk)
        if self.core_item[target] < 0:
            self.kick(target)
        if self.core_item[target] >= 0 or len(q) > 1:
            self._poke_idle()  # it waits behind other work: idle cores may take it

    def _check_core(self, c, hook: str) -> None:
        if type(c) is int and 0 <= c < self.ncores:
            return
        if not isinstance(c, (int, np.integer)) or not 0 <= c < self.ncores:
            raise ValueError(f"policy {self.policy.name!r} returned core {c!r} from its "
                             f"{hook} hook; cores are 0..{self.ncores - 1}")

    def kick(self, core: int) -> None:
        """Idle core ``core`` looks for work at the current time, after the events queued
        before (an event ``(now, seq)``, kept in :attr:`_kicks`; see :meth:`_unkick`)."""
        if not self.core_kicked[core]:
            self.core_kicked[core] = True
            self.seq += 1
            self._kicks.append((self.seq, core))

    def _unkick(self, c: int) -> None:
        """Core ``c``, kicked, has just started a chunk before its kick came. When the chunk
        lasts beyond the current time, the kick would find the core busy and do nothing but
        clear its flag (:meth:`core_event`), so it is dropped now. Nothing reads the flag of a
        busy core (every kick, poke and idle tick asks for an idle one first), so the run is
        the same as with the kick handled. A chunk of no time keeps its kick, which then
        handles the chunk's end."""
        if self._until[c] <= self.now:
            return
        self.core_kicked[c] = False
        kicks = self._kicks
        for k in range(len(kicks)):
            if kicks[k][1] == c:
                del kicks[k]
                return

    def _operating_point(self, c: int) -> None:
        core = self.cfg.machine.cores[c]
        op = core.operating_point(int(self.level[c]))
        self.freq[c] = op.freq_ghz * 1e9
        self.cap_v2[c] = core.capacitance_nf * 1e-9 * op.voltage ** 2
        self.static_w[c] = core.static_power_w * op.voltage

    def set_level(self, c: int, level: int) -> None:
        """Core ``c`` runs at DVFS level ``level`` from its next chunk on."""
        self._check_core(c, "set_level")
        n = len(self.cfg.machine.cores[c].dvfs)
        if not isinstance(level, (int, np.integer)) or not -n <= level < n:
            raise ValueError(f"policy {self.policy.name!r} asked for DVFS level {level!r} of "
                             f"core {c}; it has levels 0..{n - 1}")
        level = int(level) % n
        if level == self.level[c]:
            return
        self.static_j[c] += self.static_w[c] * (self.now - self.level_since[c])
        self.level_since[c] = self.now
        self.level[c] = level
        self._operating_point(c)

    def migrate_running(self, c: int, dst: int) -> bool:
        """Move the thread item running on ``c`` to ``dst`` at its chunk's end (module)."""
        self._check_core(c, "migrate_running")
        self._check_core(dst, "migrate_running")
        g = self.core_item[c]
        if g < 0 or self.work(g).is_async or dst == c:
            return False
        self.core_moveto[c] = dst
        return True

    def move(self, wk: Work, dst: int) -> None:
        self._check_core(dst, "move")
        for c, q in enumerate(self.queues):
            # a C-level search by identity (Work defines no equality); not list.index, whose
            # ValueError formats the item's repr at every queue that does not hold it
            if wk not in q:
                continue
            del q[q.position(wk)]
            self.queues[dst].append(wk)
            if c != dst:
                self.s_steals[dst] += 1
            if self.core_item[dst] < 0:
                self.kick(dst)
            return
        raise ValueError(f"{wk!r} is not queued")

    # --- running ------------------------------------------------------------------------------
    def fire(self, g: int) -> None:
        """Release the items waiting for ``g`` to reach its current progress."""
        i, copy = g % self.n, g // self.n
        lo, hi = self._wptr[i], self._wptr[i + 1]
        k = lo + self.trig[g]
        p = self.prog[g]
        woff = self._woff
        while k < hi and woff[k] <= p:
            d = self._wdelay[k]
            if d > 0.0:  # a device answers its request a traced latency later
                self.push(self.now + d, _EV_RELEASE, copy * self.n + self._wdep[k])
            else:
                self.satisfy(copy * self.n + self._wdep[k], via_dep=True)
            k += 1
        self.trig[g] = k - lo

    def accesses(self, g: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Accesses of item ``g``'s instructions ``[lo, hi)``."""
        if hi <= lo:  # a chunk of no instructions (a wake-up at offset 0)
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint8)
        w, i = self.w, g % self.n
        r0, r1 = int(w.run_ptr[i]), int(w.run_ptr[i + 1])
        before = self.run_before
        j = r0 if r1 - r0 == 1 else r0 + int(np.searchsorted(before[r0:r1], lo, "right")) - 1
        addrs, kinds, privs = [], [], []
        fp = self.fp
        alo, ahi = self.run_bounds
        copy = g // self.n
        # which data accesses move with the copy (module, Load)
        split = copy and fp.data and self.cfg.kernel_data == "shared" and fp.private
        while j < r1 and before[j] < hi:
            v, s, b0 = int(w.run_vcpu[j]), int(w.run_start[j]), int(before[j])
            n = int(w.run_stop[j]) - s
            a = int(alo[j]) if lo <= b0 else int(fp.index(v, [s + lo - b0])[0])
            b = int(ahi[j]) if hi >= b0 + n else int(fp.index(v, [s + hi - b0])[0])
            ad, kd = fp.take(v, a, b)
            addrs.append(ad)
            kinds.append(kd)
            if split:
                privs.append(fp.private[v][a:b])
            j += 1
        if len(addrs) == 1:
            addr, kind = addrs[0], kinds[0]
        else:
            addr, kind = np.concatenate(addrs), np.concatenate(kinds)
        if copy and fp.data and len(addr):
            moves = kind != 0
            if split:
                moves &= privs[0] if len(privs) == 1 else np.concatenate(privs)
            addr = addr + np.where(moves, DATA_COPY_STRIDE * np.uint64(copy), np.uint64(0))
        return addr, kind

    def _chunk_cost(self, c: int, g: int, lo: int, hi: int) -> tuple[float, int]:
        """Run item ``g``'s instructions ``[lo, hi)`` through core ``c``'s caches (and set the
        heatmap bits of its fetched frames): stall cycles and memory accesses."""
        addr, kind = self.accesses(g, lo, hi)
        if not len(addr):
            return 0.0, 0
        t = self.w.type_id[g % self.n]
        cls = np.full(len(addr), t, dtype=np.uint16)
        served = self.hier.run(c, addr, kind, cls)
        stall = stall_sum(np.bincount(kind * NLEVELS + served, minlength=_CELLS),
                          self.stall_flat[c])
        if self.heat_bits:
            pf = addr[kind == 0] >> np.uint64(12)
            if len(pf):
                pf = pf[np.r_[True, pf[1:] != pf[:-1]]]
                self.heat[t, bloom_bit(pf, self.heat_bits)] = True
        return stall, int(np.count_nonzero(served == NLEVELS - 1))

    def _chunk_span(self, g: int, i: int) -> tuple[int, int]:
        """Instructions ``[o, end)`` of item ``g`` (``i`` in the workload) its next chunk
        runs."""
        o = self.prog[g]
        end = min(self._insns[i], o + self._max_chunk)
        k = self._wptr[i] + self.trig[g]
        # End the chunk at the next wake-up offset. ``<=``, not ``<``: waiters at offsets up to
        # ``o`` were released when the chunk ending at ``o`` ended (fire), except those at
        # offset 0 of an item's first chunk, which no chunk has ended at yet. They get a chunk
        # of no instructions, only the switch or migration cost ``extra_cycles``: releasing them
        # when the core picks the waker (as dispatch once did) let a woken item start on an
        # idle core while the waker was still being switched in, before it reached the wake-up.
        if k < self._wptr[i + 1] and o <= self._woff[k] < end:
            end = self._woff[k]
        return o, end

    def start_chunk(self, c: int, g: int, extra_cycles: float = 0.0,
                    switch: tuple[int, int] | None = None) -> None:
        """Run item ``g``'s next chunk on core ``c``, paying ``extra_cycles`` first and, when
        ``switch`` is given, a context switch on the traced path before them
        (:meth:`_switch_take`'s range)."""
        if switch is not None:
            sw = self._switch_cycles(c, *switch)
            self.s_switch[c] += sw
            extra_cycles = sw + extra_cycles
        i = g % self.n
        o, end = self._chunk_span(g, i)
        n = end - o
        stall, llc_misses = self._chunk_cost(c, g, o, end)
        base = n * self.cpi[c]
        cycles = base + stall + extra_cycles
        # the policy's own routine runs first; Algorithm 1 stops the statistics around
        # TMigrate, so its cycles are no item's, no type's and no thread's
        charged = float(self.core_charge[c])
        if charged:
            self.s_charged[c] += charged
            self.core_charge[c] = 0.0
        dur = (cycles + charged) / self.freq[c]
        self.s_insns[c] += n
        self.s_base[c] += base
        self.s_stall[c] += stall
        self.s_busy[c] += dur
        self.s_dyn[c] += (cycles + charged) * self.cap_v2[c]
        ty = self._type[i]
        self.s_type_insns[ty] += n
        self.s_type_cycles[ty] += cycles
        t = self._taskof[i]
        if t >= 0:
            tg = (g // self.n) * self.ntask + t
            self.s_task_insns[tg] += n
            self.task_time[tg] += cycles / self.freq[c]
            self.task_cycles[tg] += cycles
            self.task_llc_misses[tg] += llc_misses
        self.item_cycles[g] += cycles
        self.core_freq[c] = self.freq[c]
        self.core_chunk_cv2[c] = self.cap_v2[c]
        self.core_item[c] = g
        self.core_end[c] = end
        self.core_until[c] = self.now + dur
        self.push(self.now + dur, _EV_CORE, c)
        if self.core_kicked[c]:
            self._unkick(c)
        if self.log is not None:
            self.log.append((g, c, self.now, self.now + dur, o, end))

    def dispatch(self, c: int) -> None:
        """Core ``c`` is free: start its next item, or go idle."""
        pol = self.policy
        self.core_looked[c] = self.now
        if self.incoming[c]:
            self._run_moved(c, self.incoming[c].pop(0))
            return
        q = self.queues[c]
        g = self.core_paused[c]
        if g >= 0 and not self._async_preempts(c):
            # the interrupts are handled: back to the interrupted thread (module)
            self.core_paused[c] = -1
            wk = self.work(g)
            if not (q and self._resched(wk, c)):
                self.start_chunk(c, g)
                return
            self.ready_t[g] = self.now
            q.append(wk)
            self._poke_idle()
        if not q:
            pol.steal(c)
        idx = pol.pick_next(c) if q else None
        if idx is None:
            self.core_item[c] = -1
            return
        wk = q.pop(idx)
        g = wk.gid
        if not wk.is_async and self.core_paused[c] >= 0:
            # the policy picked a thread before the interrupts: the interrupted one queues
            p, self.core_paused[c] = self.core_paused[c], -1
            self.ready_t[p] = self.now
            q.append(self.work(p))
            self._poke_idle()
        extra = 0.0
        switch = None
        if wk.is_async:
            # from its arrival to its first start; a bottom half resumed after an interrupt
            # preempted it (core_event) is not counted again
            if not self.begun[g] and wk.category == _INTERRUPT:
                self.s_irqs += 1
                self.s_lat += self.now - self.ready_t[g]
            elif not self.begun[g]:
                self.s_bhs += 1
                self.s_bh_lat += self.now - self.ready_t[g]
            self.begun[g] = True
        else:
            self.s_waits += 1
            self.s_wait += self.now - self.ready_t[g]
            if self.core_task[c] != wk.task:
                self.s_switches[c] += 1
                if self.cfg.switch_cycles is None:
                    switch = self._switch_take(c)  # paid with the chunk (start_chunk)
                else:
                    self.s_switch[c] += self.cfg.switch_cycles
                    extra += self.cfg.switch_cycles
                self.core_task[c] = wk.task
            last = self.task_core[wk.task]
            if last >= 0 and last != c:
                self.s_migs[c] += 1
                self.s_mig[c] += self.os_mig_cycles[c]
                extra += self.os_mig_cycles[c]
            self.task_core[wk.task] = c
            self.core_slice[c] = self.now
        self.start_chunk(c, g, extra, switch)  # wake-ups at offset 0 at its end (start_chunk)

    def _run_moved(self, c: int, g: int) -> None:
        """Run thread item ``g``, moved here by :meth:`migrate_running`: a hardware swap that
        costs the migration cycles only (no OS context switch, see the module)."""
        wk = self.work(g)
        self.core_task[c] = wk.task
        self.task_core[wk.task] = c
        self.core_slice[c] = self.now
        self.s_migs[c] += 1
        self.s_mig[c] += self.mig_cycles[c]
        self.start_chunk(c, g, float(self.mig_cycles[c]))

    def core_event(self, c: int) -> None:
        self.core_kicked[c] = False
        g = self.core_item[c]
        if g >= 0 and self._until[c] > self.now:
            return  # a kick while busy: the chunk's own event will come
        if g >= 0:
            i = g % self.n
            p = self.prog[g] = self.core_end[c]
            k = self._wptr[i] + self.trig[g]
            if k < self._wptr[i + 1] and self._woff[k] <= p:  # someone waits for this point
                self.fire(g)
            if p >= self._insns[i]:
                self.core_item[c] = -1
                self.core_moveto[c] = -1  # the item ended: nothing left to move
                self.finish(g, c)
                if self.core_item[c] >= 0:
                    return
            elif self.core_moveto[c] >= 0:
                # a hardware move (migrate_running): the thread continues on the other core
                dst, self.core_moveto[c] = self.core_moveto[c], -1
                self.core_item[c] = -1
                self.incoming[dst].append(g)
                if self.core_item[dst] < 0:
                    self.kick(dst)
            elif self.incoming[c] and not self.work(g).is_async:
                # a thread moved here by hardware runs next; this one waits at the queue head
                self.core_item[c] = -1
                self.ready_t[g] = self.now
                self.queues[c].insert(0, self.work(g))
            else:
                wk = self.work(g)
                q = self.queues[c]
                if not wk.is_async and q and self._resched(wk, c):
                    self.core_item[c] = -1
                    self.ready_t[g] = self.now
                    q.append(wk)
                    self._poke_idle()
                elif not wk.is_async and self.core_paused[c] < 0 and self._async_preempts(c):
                    # interrupted, not preempted: it resumes after the handlers (dispatch)
                    self.core_item[c] = -1
                    self.core_paused[c] = g
                elif (wk.is_async and wk.category != _INTERRUPT
                      and self._async_preempts(c, bottom_halves=False)):
                    # a hardware interrupt pauses the bottom half, which resumes next (module)
                    self.core_item[c] = -1
                    q.insert(0, wk)
                else:
                    self.start_chunk(c, g)
                    return
        self.dispatch(c)

    def finish(self, g: int, c: int) -> None:
        """Item ``g`` ended on core ``c``."""
        w, i = self.w, g % self.n
        wk = self.work(g)
        self.done_items += 1
        self.s_type_items[self._type[i]] += 1
        self.s_events += self._events[i]
        if self._item_done is not None:
            self._item_done(wk, c, self._item_cycles[g], self._insns[i])
        self._works.pop(g, None)
        if wk.is_async:
            return
        tg = wk.task
        self.s_task_want[tg] += self.now - self.ready0[g]
        copy, t = g // self.n, self._taskof[i]
        pos = self.task_pos[tg] + 1
        self.task_pos[tg] = pos
        lo, hi = self._task_ptr[t], self._task_ptr[t + 1]
        if lo + pos >= hi:
            self.task_end[tg] = self.now
            return
        ng = copy * self.n + self._task_items[lo + pos]
        self.pending[ng] -= 1
        if self.pending[ng] == 0:
            self.ready(ng, c)
            # Continue the thread here at once when the policy kept it on this core (a system
            # call runs where its thread runs, no switch): when nothing else waits, or, at a
            # boundary that is no scheduling point (see the module), unless it must yield.
            q = self.queues[c]
            if not q or q[-1].gid != ng or self.incoming[c]:
                return
            if len(q) == 1:
                keep = self.policy.pick_next(c) == 0
            elif self.policy.pick_at_boundaries:
                keep = False
            else:
                wk = q.pop()
                keep = not self._yields(wk, c)
                q.append(wk)
            if keep:
                q.pop()
                self.s_waits += 1
                self.start_chunk(c, ng)

    def _yields(self, wk: Work, c: int) -> bool:
        """Whether thread item ``wk``, running on ``c`` (or continuing there at a boundary),
        gives the core up now: an interrupt or bottom half waits (unless the policy sets
        ``preempt_for_interrupts = False``), or :meth:`_resched`."""
        return self._async_preempts(c) or self._resched(wk, c)

    def _async_preempts(self, c: int, bottom_halves: bool | None = None) -> bool:
        """Whether a hardware interrupt (or a bottom half, unless ``bottom_halves`` is False;
        None: the policy's ``preempt_for_bottom_halves``) waits on ``c`` to interrupt what runs
        there, and the policy lets interrupts preempt (a running bottom half pauses only for a
        hardware interrupt, see the module)."""
        pol = self.policy
        if not pol.preempt_for_interrupts:
            return False
        bh = (pol.preempt_for_bottom_halves if bottom_halves is None
              else bottom_halves)
        q = self.queues[c]
        return q.irqs > 0 or (bh and q.bhs > 0)

    def _resched(self, wk: Work, c: int) -> bool:
        """Linux's need-resched cases for thread item ``wk`` on ``c``: its time slice is over,
        or the policy's ``wakeup_preempt`` says a queued thread preempts it."""
        pol = self.policy
        if self.now - self.core_slice[c] >= pol.time_slice(wk, c):
            return True
        return bool(pol.wakeup_preempt(wk, c))

    # --- the loop -----------------------------------------------------------------------------
    def setup(self) -> None:
        w = self.w
        # Conditions per item: its wake-up, its release time or (closed device loop) its
        # request, its thread's previous item.
        timed = (w.release > 0) & ~self.by_request
        p = ((w.dep_item >= 0).astype(np.int64) + timed + self.by_request
             + ((w.kind == THREAD_ITEM) & (w.begins != FIRST)))
        pending = np.tile(p, self.K)
        rel = np.flatnonzero(timed)
        first = np.flatnonzero(p == 0)
        times, items = [], []
        for copy in range(self.K):
            late = float(self.phase[copy])
            times.append(w.release[rel].astype(np.float64) + late)
            items.append(copy * self.n + rel)
            if late > 0:
                # a copy that starts late: its first items are released at its offset
                pending[copy * self.n + first] += 1
                times.append(np.full(len(first), late))
                items.append(copy * self.n + first)
        # The release times known now stay out of the event heap (which they made long: every
        # copy's timed interrupts), sorted by time in the order they were listed; at the same
        # time one of them comes before any event pushed later, as a lower sequence number
        # would put it (run).
        times = np.concatenate(times) if times else np.zeros(0)
        items = np.concatenate(items) if items else np.zeros(0, np.int64)
        order = np.argsort(times, kind="stable")
        self._rel_t = times[order].tolist()
        self._rel_g = items[order].tolist()
        self.pending = pending.tolist()
        self.policy.attach(SimView(self))
        self._item_done = self._hook_item_done()  # as the policy is once attached
        for g in np.flatnonzero(pending == 0).tolist():
            self.ready(g, -1)

    def run(self, on_epoch=None, progress=None) -> list[SandboxStats]:
        """Run to the end, or for :attr:`SandboxConfig.max_epochs` epochs; returns the
        per-epoch deltas (the last epoch of a run to the end may be shorter)."""
        self.setup()
        total = self.n * self.K
        epochs: list[SandboxStats] = []
        prev = self.snapshot(0.0)
        epoch = 0
        self.push(self.cfg.epoch_s, _EV_EPOCH, 1)
        self.periodic = 1
        if self.tick_s > 0:
            self.push(self.tick_s, _EV_TICK, 0)
            self.periodic += 1
        if self.cfg.idle_retry:
            self.push(1.0 / self.cfg.tick_hz, _EV_IDLE_TICK, 1)
            self.periodic += 1
        heap, core_event, kicks = self.heap, self.core_event, self._kicks
        rel_t, rel_g, nrel, ri = self._rel_t, self._rel_g, len(self._rel_t), 0
        while self.done_items < total:
            # only the periodic events left and no core running: nothing can happen
            left = len(heap) + len(kicks) + nrel - ri
            if left <= self.periodic and (not left or (
                    left == self.periodic and not any(x >= 0 for x in self.core_item))):
                if not self._break_deadlock():
                    raise RuntimeError(f"sandbox stalled with {total - self.done_items} items "
                                       "left and nothing ready")
                continue
            # the next event: a kick (at the current time: first unless a release is due now
            # or the heap holds an event of now pushed before it), a release known at setup
            # (pushed first of all: first at a tie) or the heap's
            if kicks and (not heap or heap[0][0] > self.now or heap[0][1] > kicks[0][0]) \
                    and not (ri < nrel and rel_t[ri] <= self.now):
                core_event(kicks.pop(0)[1])
                continue
            if ri < nrel and (not heap or rel_t[ri] <= heap[0][0]):
                t, kind, a = rel_t[ri], _EV_RELEASE, rel_g[ri]
                ri += 1
            else:
                t, _, kind, a = _heappop(heap)
            if t > self.now:
                if self.check_idle or -1 in self.core_item:
                    self._advance(t)
                else:
                    self.acc_t = t  # every core busy: no idle time to class (_advance)
                self.now = t
            if kind == _EV_CORE:
                core_event(a)
            elif kind == _EV_RELEASE:
                self.satisfy(a)
            elif kind == _EV_POKE:
                self._poked(a)
            elif kind == _EV_IDLE_TICK:
                self._idle_tick()
                self.push((a + 1) / self.cfg.tick_hz, _EV_IDLE_TICK, a + 1)
            elif kind == _EV_TICK:
                nxt = self.policy.tick()
                nxt = self.tick_s if nxt is None else float(nxt)
                if not (nxt > 0 and math.isfinite(nxt)):
                    raise ValueError(f"policy {self.policy.name!r}: tick returned {nxt!r}; "
                                     "the next tick must be a positive number of seconds")
                self.push(self.now + nxt, _EV_TICK, 0)
            else:
                snap = self.snapshot(self.now)
                delta = snap - prev
                prev = snap
                epochs.append(delta)
                self.policy.epoch_end(epoch, delta)
                self.heat[:] = False
                if on_epoch is not None:
                    on_epoch(epoch, delta)
                if progress is not None:
                    progress(self.done_items, total)
                epoch += 1
                if self.cfg.max_epochs is not None and epoch >= self.cfg.max_epochs:
                    # The window is over: work in flight is left unfinished (counted where
                    # its chunks ended, like any epoch's).
                    self.complete = False
                    return epochs
                self.push(self.cfg.epoch_s * (a + 1), _EV_EPOCH, a + 1)
        end = max(self.now, float(self.core_until.max()))
        snap = self.snapshot(end)
        last = snap - prev
        if last.elapsed_s > 0 or not epochs:
            epochs.append(last)
            self.policy.epoch_end(epoch, last)
            if on_epoch is not None:
                on_epoch(epoch, last)
        self.now = end
        return epochs

    def _break_deadlock(self) -> bool:
        """Release the blocked item that was released earliest in the trace (see module)."""
        w = self.w
        cand = np.flatnonzero((np.array(self.pending) == 1) & ~self.dep_done)
        waiting = cand[(w.dep_item[cand % self.n] >= 0) | self.by_request[cand % self.n]]
        if not len(waiting):
            return False
        g = int(waiting[0])
        self.forced += 1
        self.satisfy(g, via_dep=True)
        return True
