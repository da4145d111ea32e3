"""The guest kernel's symbols: finding ``System.map`` for a trace and reading function ranges.

Segmentation needs three groups of kernel functions, found by name in ``System.map``:

* the softirq actions (the handlers ``open_softirq`` registers in ``softirq_vec``): entering
  one starts a bottom-half SuperFunction;
* the softirq dispatchers that call them (``handle_softirqs``, or ``__do_softirq`` on kernels
  without it): coming back into one ends the bottom half;
* the scheduler and its context-switch path, whose instructions are labelled so that analyses
  can leave them out, as the paper does (section 4.3);
* ``do_task_dead``, where an exiting task switches away for good.

A name matches a symbol when it equals the symbol's name up to the first ``.`` (compiler
clones such as ``finish_task_switch.isra.0`` or ``__schedule.cold`` belong to their function).
"""
from __future__ import annotations

import gzip
import json
import lzma
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from pysched.trace import Trace, TraceError
from pysched.trace.symbol_files import (SYSTEM_MAP_NAMES, moved_system_map, open_text,
                                       slide_unknown_reason, traced_slide)

#: Default location of the test guest's map (``make guest``).
GUEST_SYSTEM_MAP = Path(__file__).resolve().parents[2] / "build" / "guest" / "System.map"
GUEST_PACKAGE_VERSION = GUEST_SYSTEM_MAP.parent / "kernel-package-version"

#: Handlers registered with ``open_softirq`` in Linux 5.x/6.x, in softirq-number order
#: (HI, TIMER, NET_TX, NET_RX, BLOCK, IRQ_POLL, TASKLET, SCHED, HRTIMER, RCU). Newer kernels
#: renamed the SCHED one ``sched_balance_softirq``; older ones called the RCU one
#: ``rcu_process_callbacks``. Tasklets run inside ``tasklet_action``/``tasklet_hi_action``.
SOFTIRQ_ACTIONS: tuple[str, ...] = (
    "tasklet_hi_action", "run_timer_softirq", "net_tx_action", "net_rx_action",
    "blk_done_softirq", "irq_poll_softirq", "tasklet_action", "run_rebalance_domains",
    "sched_balance_softirq", "hrtimer_run_softirq", "rcu_core_si", "rcu_process_callbacks",
)

#: Functions whose loop calls the softirq actions.
SOFTIRQ_DISPATCHERS: tuple[str, ...] = ("handle_softirqs", "__do_softirq")

#: The scheduler proper and the context-switch path: ``schedule()`` and its preemption entry
#: points, the class hooks that pick/put the next task, the stack and address-space switch,
#: and the tail that runs in the incoming task. Locks, accounting and wake-ups they call are
#: shared with other kernel paths and stay with the SuperFunction that runs them.
SCHEDULER_FUNCTIONS: tuple[str, ...] = (
    "schedule", "__schedule", "schedule_idle", "schedule_preempt_disabled",
    "preempt_schedule", "preempt_schedule_common", "preempt_schedule_irq",
    "preempt_schedule_notrace", "preempt_schedule_thunk", "preempt_schedule_notrace_thunk",
    "do_task_dead", "schedule_tail",
    "__switch_to_asm", "__switch_to", "finish_task_switch", "switch_mm_irqs_off",
    "pick_next_task", "pick_next_task_fair", "pick_next_task_idle", "pick_next_task_rt",
    "pick_next_task_dl", "pick_next_task_stop", "put_prev_task_fair", "put_prev_task_idle",
    "put_prev_task_rt", "put_prev_task_dl", "put_prev_task_stop", "set_next_task_fair",
    "set_next_task_idle", "set_next_task_rt", "set_next_task_dl", "set_next_task_stop",
    "balance_fair", "balance_rt", "balance_dl", "newidle_balance", "pick_next_entity",
    "set_next_entity", "put_prev_entity", "psi_task_switch",
)

#: Linux's scheduler as a whole, for measuring the share of a trace's instructions it takes
#: (the time "the baseline Linux system spends executing its scheduler", SchedTask section
#: 6.1 (1)): :data:`SCHEDULER_FUNCTIONS` (the context-switch path) and the functions of
#: ``kernel/sched/`` (``core.c``, ``fair.c``, ``pelt.c``, ``psi.c``, ``clock.c``,
#: ``idle.c``) that the traced 6.x kernels executed, found by name: run-queue bookkeeping
#: (enqueue/dequeue, load tracking, run-time accounting, the scheduler clock, pressure
#: stall accounting, preemption checks), the wake-up path (``try_to_wake_up`` and the CPU
#: selection it makes) and the tick's share (``scheduler_tick``, load balancing). Our choice:
#: wait-queue walking (``kernel/sched/wait.c``: ``__wake_up_common``...), the idle loop and
#: the rq spin lock's generic ``_raw_spin_*`` helpers are left out (they serve other
#: subsystems too); ``native_sched_clock`` (x86's TSC read behind ``sched_clock``) is in.
LINUX_SCHEDULER_FUNCTIONS: tuple[str, ...] = SCHEDULER_FUNCTIONS + (
    # run-queue bookkeeping
    "__pick_next_task_fair", "pick_task_rt", "sched_balance_newidle", "switch_mm",
    "switch_ldt", "enqueue_task_fair", "dequeue_task_fair", "enqueue_task_stop",
    "dequeue_task_stop", "enqueue_entity", "dequeue_entity", "update_curr", "update_curr_fair",
    "update_load_avg", "__update_load_avg_se", "__update_load_avg_cfs_rq",
    "__update_load_avg_blocked_se", "update_rt_rq_load_avg", "update_dl_rq_load_avg",
    "update_min_vruntime", "place_entity", "update_cfs_group", "reweight_entity",
    "attach_entity_load_avg", "detach_entity_load_avg", "remove_entity_load_avg",
    "check_cfs_rq_runtime", "hrtick_update", "activate_task", "deactivate_task",
    "update_rq_clock", "sched_clock_cpu", "sched_clock_local", "sched_clock",
    "native_sched_clock", "psi_group_change", "psi_flags_change",
    "psi_task_change", "check_preempt_wakeup", "check_preempt_curr", "resched_curr",
    "set_task_cpu", "migrate_task_rq_fair", "task_h_load", "sched_slice",
    "_raw_spin_rq_lock_irqsave", "raw_spin_rq_lock_nested", "raw_spin_rq_unlock",
    "task_rq_lock", "__task_rq_lock", "yield_task_fair", "__cond_resched",
    "__cond_resched_lock",
    # the wake-up path
    "try_to_wake_up", "ttwu_do_activate", "ttwu_do_wakeup", "ttwu_queue_wakelist",
    "sched_ttwu_pending", "select_task_rq_fair", "wake_up_process", "wake_up_state",
    "wake_up_q", "wake_q_add", "wake_q_add_safe", "default_wake_function", "wake_up_new_task",
    "available_idle_cpu", "idle_cpu", "find_idlest_group", "cpu_util_next",
    # the tick and load balancing
    "scheduler_tick", "task_tick_fair", "task_tick_idle", "task_tick_stop",
    "trigger_load_balance", "load_balance", "rebalance_domains", "run_rebalance_domains",
    "find_busiest_group", "update_group_capacity", "can_migrate_task", "detach_task",
    "need_active_balance", "nohz_balance_enter_idle", "nohz_balance_exit_idle",
    "nohz_run_idle_balance", "_nohz_idle_balance", "nohz_csd_func",
    "active_load_balance_cpu_stop", "move_queued_task", "migration_cpu_stop",
    "sched_clock_tick", "group_balance_cpu",
)

#: Where an exiting task switches away for the last time: after it, its key may be reused by
#: a new task, so the segmentation closes everything the old one had open.
TASK_DEAD_FUNCTIONS: tuple[str, ...] = ("do_task_dead",)

_TEXT_TYPES = frozenset("tTwW")


def base_name(symbol: str) -> str:
    """``finish_task_switch.isra.0`` -> ``finish_task_switch`` (clone suffixes dropped)."""
    return symbol.split(".", 1)[0]


@dataclass(frozen=True)
class KernelSymbols:
    """Text symbols of a kernel, sorted by address, each with the range up to the next one.

    Attributes
    ----------
    source : str
        Where the symbols were read from.
    addr : numpy.ndarray of uint64
        Start address of each text symbol, ascending.
    end : numpy.ndarray of uint64
        Start of the next text symbol at a higher address (the last one ends at ``_etext`` or
        one page after it starts).
    names : list of str
        Symbol names, in ``addr`` order.
    """

    source: str
    addr: np.ndarray
    end: np.ndarray
    names: list[str]

    @staticmethod
    def _entries(text: str, source: str) -> tuple[list[tuple[int, str]], int | None]:
        """Text symbols ``(address, name)`` of map text, and ``_etext`` if present."""
        entries: list[tuple[int, str]] = []
        etext = None
        for lineno, line in enumerate(text.splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 3:
                raise TraceError(f"{source}:{lineno}: expected 'ADDRESS TYPE NAME', got {line!r}")
            try:
                a = int(parts[0], 16)
            except ValueError:
                raise TraceError(f"{source}:{lineno}: bad address {parts[0]!r}") from None
            if parts[2] == "_etext":
                etext = a
            if parts[1] in _TEXT_TYPES:
                entries.append((a, parts[2]))
        return entries, etext

    @classmethod
    def parse(cls, text: str, source: str = "<text>", modules: str | None = None,
              modules_source: str = "<modules>") -> KernelSymbols:
        """Read ``System.map`` text (``ADDRESS TYPE NAME`` per line).

        Parameters
        ----------
        text : str
            The kernel's map.
        source : str
            Its name, for messages.
        modules : str, optional
            Symbols of loaded modules in ``/proc/kallsyms`` form (``ADDRESS TYPE NAME
            [module]``), e.g. the ``modules.map.gz`` that ``pysched trace`` saves.
        modules_source : str

        Raises
        ------
        TraceError
            When a line is malformed or the map has no text symbols; the message names
            ``source`` and the line.
        """
        entries, etext = cls._entries(text, source)
        if not entries:
            raise TraceError(f"{source}: no text symbols (types t, T, w, W)")
        if modules:
            entries += cls._entries(modules, modules_source)[0]
        entries.sort(key=lambda e: e[0])
        addr = np.array([a for a, _ in entries], dtype=np.uint64)
        # Each symbol ends where the next higher address starts (aliases share a range); the
        # kernel's last function ends at _etext, not at the first module's.
        bounds = np.unique(np.append(addr, [etext] if etext else []).astype(np.uint64))
        nxt = np.searchsorted(bounds, addr, side="right")
        ends = np.append(bounds, np.uint64(int(bounds[-1]) + 4096))[nxt]
        name = source if not modules else f"{source} + {modules_source}"
        return cls(name, addr, ends.astype(np.uint64), [n for _, n in entries])

    @classmethod
    def load(cls, path: str | Path, modules: str | Path | None = None) -> KernelSymbols:
        """Read a ``System.map``, ``System.map.gz`` or ``System.map.xz`` (and, optionally, a
        modules map such as ``modules.map.gz``)."""
        text = _read_text(Path(path))
        mods = _read_text(Path(modules)) if modules is not None else None
        return cls.parse(text, str(path), mods, str(modules))

    @cached_property
    def _bases(self) -> list[str]:
        return [base_name(n) for n in self.names]

    def ranges(self, names: tuple[str, ...] | list[str]) -> list[tuple[str, int, int]]:
        """``(symbol, start, end)`` of every text symbol whose base name is in ``names``."""
        want = set(names)
        return [(self.names[i], int(self.addr[i]), int(self.end[i]))
                for i, b in enumerate(self._bases) if b in want]

    def address(self, name: str) -> int | None:
        """Start address of the symbol called exactly ``name``, or None."""
        for n, a in zip(self.names, self.addr):
            if n == name:
                return int(a)
        return None

    def symbolize(self, pcs: np.ndarray) -> list[str]:
        """Name of the text symbol containing each address (``"?"`` outside every range)."""
        pcs = np.asarray(pcs, dtype=np.uint64)
        i = np.searchsorted(self.addr, pcs, side="right") - 1
        out = []
        for k, pc in zip(i.tolist(), pcs.tolist()):
            ok = k >= 0 and int(self.addr[k]) <= pc < int(self.end[k])
            out.append(self.names[k] if ok else "?")
        return out


def _read_text(p: Path) -> str:
    try:
        with open_text(p) as fh:
            return fh.read()
    except (OSError, EOFError, UnicodeDecodeError, lzma.LZMAError) as exc:
        raise TraceError(f"{p}: cannot read symbol map ({exc})") from exc


def _candidates(root: Path) -> list[Path]:
    """``System.map`` (plain, gzip or xz) in the trace directory, then next to it."""
    return [d / n for d in (root, root.parent) for n in SYSTEM_MAP_NAMES]


def _guest_matches(trace: Trace) -> tuple[bool, str]:
    """Whether the trace's manifest names the test guest's kernel (build/guest)."""
    man = trace.manifest or {}
    want = man.get("kernel_package_version")
    have = GUEST_PACKAGE_VERSION.read_text().strip() if GUEST_PACKAGE_VERSION.is_file() else None
    if want is None or have is None:
        return True, "no kernel package version to compare"
    return want == have, f"trace kernel package {want}, test guest {have}"


def _traced_slide(trace: Trace) -> int:
    """The KASLR slide of the traced boot (:func:`~pysched.trace.symbol_files.traced_slide`).

    Raises
    ------
    TraceError
        When the plugin looked for the slide and did not find it.
    """
    slide = traced_slide(trace.plugin_info)
    if slide is None:
        raise TraceError(f"{trace.path / 'plugin.json'}: the plugin did not find the kernel's "
                         f"slide ({slide_unknown_reason(trace.plugin_info)}), so the test "
                         f"guest's System.map cannot be moved to the traced boot's addresses; "
                         f"put that boot's System.map in the trace directory")
    return slide


def find_system_map(trace: Trace, copy: bool = True) -> Path:
    """Locate the ``System.map`` of the kernel a trace was recorded on.

    Looks for ``System.map``, ``System.map.xz`` or ``System.map.gz`` in the trace directory,
    then in its parent (shipped traces keep one there), then falls back to the test guest's
    ``build/guest/System.map`` when the manifest's kernel package version is the guest's. On
    that fallback, a gzip copy moved by the traced boot's KASLR slide (``plugin.json``) is
    written into the trace directory so the trace carries its symbols from then on; with
    ``copy`` False (or a read-only trace directory) the guest's map itself is returned only
    when the slide is 0.

    Parameters
    ----------
    trace : Trace
    copy : bool
        Write the fallback copy.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    TraceError
        When no map is found, the fallback belongs to another kernel than the manifest's, or
        it would need moving by a slide that is unknown or cannot be written beside the trace.
    """
    for p in _candidates(trace.path):
        if p.is_file():
            return p
    tried = ", ".join(str(p) for p in _candidates(trace.path))
    if not GUEST_SYSTEM_MAP.is_file():
        raise TraceError(f"{trace.path}: no kernel System.map found (tried {tried} and the "
                         f"test guest's {GUEST_SYSTEM_MAP}); put the guest kernel's System.map "
                         f"(or System.map.gz) in the trace directory")
    ok, why = _guest_matches(trace)
    if not ok:
        raise TraceError(f"{trace.path}: no System.map in the trace directory (tried {tried}) "
                         f"and the test guest's {GUEST_SYSTEM_MAP} is for another kernel "
                         f"({why})")
    slide = _traced_slide(trace)
    if copy:
        dest = trace.path / "System.map.gz"
        try:
            tmp = dest.with_suffix(".gz.tmp")
            text = moved_system_map(_read_text(GUEST_SYSTEM_MAP), slide)
            tmp.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
            tmp.replace(dest)
            (trace.path / "System.map.source.json").write_text(json.dumps(
                {"copied_from": str(GUEST_SYSTEM_MAP), "reason": why, "slide": slide},
                indent=1) + "\n")
            return dest
        except OSError:
            pass  # read-only trace: the guest's map in place, if it needs no moving
    if slide:
        raise TraceError(f"{trace.path}: no System.map in the trace directory (tried {tried}), "
                         f"and the test guest's {GUEST_SYSTEM_MAP} needs moving by the traced "
                         f"boot's slide ({slide:#x}), which cannot be written beside the trace; "
                         f"write it with pysched.capture.sysmap.write_running_map")
    return GUEST_SYSTEM_MAP


MODULES_MAP_NAMES = ("modules.map.gz", "modules.map")


def trace_symbols(trace: Trace, system_map: str | Path | None = None) -> KernelSymbols:
    """The kernel symbols of ``trace``: ``system_map`` if given, else :func:`find_system_map`;
    plus the loaded modules' symbols when ``modules.map.gz`` (or ``modules.map``) lies in the
    trace directory (``pysched trace`` saves it for guests with modules)."""
    path = Path(system_map) if system_map is not None else find_system_map(trace)
    if not path.is_file():
        raise TraceError(f"{path}: System.map not found")
    mods = next((trace.path / n for n in MODULES_MAP_NAMES if (trace.path / n).is_file()), None)
    return KernelSymbols.load(path, mods)
