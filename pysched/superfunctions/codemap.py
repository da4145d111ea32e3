"""What segmentation needs to know about every instruction of a trace's static tables.

Per instruction (in :class:`pysched.trace.BlockIndex` order): user or kernel mode, whether it
lies in the scheduler or a softirq dispatcher, whether it is the first instruction of a softirq
action, and its code frame as a dense page id. Per block the same facts, when all its
instructions share them, so the segmentation kernel can take a whole block in one step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysched.constants import KERNEL_SPACE

from pysched.trace import BlockIndex, Trace, block_index
from pysched.trace.schema import PAGE_SHIFT, UNKNOWN_PADDR

from .symbols import (
    SCHEDULER_FUNCTIONS,
    SOFTIRQ_ACTIONS,
    SOFTIRQ_DISPATCHERS,
    TASK_DEAD_FUNCTIONS,
    KernelSymbols,
)

# Instruction/block flag bits (uint8).
F_USER = 1
F_SCHED = 2
F_DISPATCH = 4
#: In ``do_task_dead``: the thread is gone at its next switch (its key may be reused).
F_DEAD = 8
#: Block flag: its instructions differ in the bits above or in their action/page, or an
#: instruction other than the first starts a softirq action.
F_MIXED = 16

_USER_TOP = np.uint64(KERNEL_SPACE)  # below it: user space
#: Linux x86_64 maps programs below this (non-PIE at 0x400000, PIE near 0x555555554000 plus up
#: to 1 TiB of randomisation) and shared libraries, the loader and the vDSO above it (the mmap
#: area starts under 0x7fffffffffff, at most 1 TiB lower).
EXECUTABLE_TOP = np.uint64(0x7000_0000_0000)

#: Columns of :attr:`CodeMap.table`.
B_N, B_START, B_FLAGS, B_ACTION, B_PAGE = range(5)


@dataclass(frozen=True)
class CodeMap:
    """Per-instruction and per-block classification of a trace's code.

    Attributes
    ----------
    ins_flags : numpy.ndarray of uint8
        ``F_USER | F_SCHED | F_DISPATCH | F_DEAD`` bits of each instruction of the block
        index.
    ins_action : numpy.ndarray of int16
        Index into ``actions`` when the instruction is a softirq action's first, else -1.
    ins_page : numpy.ndarray of int32
        Index into ``pfns`` of the instruction's frame; -1 when the frame is unknown.
    blk_start, blk_n : numpy.ndarray of int64
        Per block-index position: first instruction offset and ``ninsn``.
    blk_flags : numpy.ndarray of uint8
        The common flags of the block's instructions, or ``F_MIXED``.
    blk_action : numpy.ndarray of int16
        Action started by the block's first instruction, else -1.
    blk_page : numpy.ndarray of int32
        The block's page id when all its instructions share one, else -1 (look per
        instruction).
    pfns : numpy.ndarray of uint64
        Frame number of each page id, ascending.
    pfn_executable : numpy.ndarray of bool
        The frame holds user code mapped where programs are (below :data:`EXECUTABLE_TOP`):
        a program's own text, not a shared library's.
    actions : list of (str, int)
        Softirq actions found: symbol name and start address.
    sched_ranges, dispatch_ranges : list of (str, int, int)
        Scheduler and dispatcher symbols used: name, start, end.
    table : numpy.ndarray of int64, shape ``(n, 5)``
        What the kernel reads per executed block, in one row (one cache line): ``B_N``,
        ``B_START``, ``B_FLAGS``, ``B_ACTION``, ``B_PAGE`` (the per-block arrays above). Indexed
        by block id; ``B_N`` is -1 for an id that is not in ``blocks`` or whose ``insns`` rows
        are malformed. When ids are too sparse for that (not the plugin's numbering), it is
        indexed by position and :meth:`kernel_ids` maps exec block ids to positions.
    sparse : bool
        Whether ``table`` is indexed by position rather than by id.
    """

    ins_flags: np.ndarray
    ins_action: np.ndarray
    ins_page: np.ndarray
    blk_start: np.ndarray
    blk_n: np.ndarray
    blk_flags: np.ndarray
    blk_action: np.ndarray
    blk_page: np.ndarray
    pfns: np.ndarray
    pfn_executable: np.ndarray
    actions: list[tuple[str, int]]
    sched_ranges: list[tuple[str, int, int]]
    dispatch_ranges: list[tuple[str, int, int]]
    table: np.ndarray
    sparse: bool
    idx: BlockIndex

    def kernel_ids(self, blocks: np.ndarray) -> np.ndarray:
        """What the kernel indexes ``table`` with for exec ``blocks``: the ids themselves, or
        their positions for sparse ids (an absent block: past the table's end)."""
        if not self.sparse:
            return blocks
        pos = self.idx.lookup(blocks)
        pos[pos < 0] = len(self.table)
        return pos


def _inside(v: np.ndarray, ranges: list[tuple[str, int, int]]) -> np.ndarray:
    """Which of ``v`` fall in one of ``ranges`` (``[start, end)``)."""
    if not ranges:
        return np.zeros(len(v), dtype=bool)
    r = sorted((s, e) for _, s, e in ranges)
    starts = np.array([s for s, _ in r], dtype=np.uint64)
    # Ranges come from consecutive symbols, so they do not overlap except for aliases, whose
    # ranges are equal; keeping the largest end per start is exact.
    ends = np.array([e for _, e in r], dtype=np.uint64)
    ends = np.maximum.accumulate(ends)
    i = np.searchsorted(starts, v, side="right") - 1
    ok = i >= 0
    out = np.zeros(len(v), dtype=bool)
    out[ok] = v[ok] < ends[i[ok]]
    return out


def _per_block(values: np.ndarray, start: np.ndarray, n: np.ndarray) -> tuple[np.ndarray,
                                                                            np.ndarray]:
    """First value of each block and whether all its values equal it."""
    nb = len(start)
    first = values[np.minimum(start, max(len(values) - 1, 0))] if len(values) else \
        np.zeros(nb, dtype=values.dtype)
    same = np.ones(nb, dtype=bool)
    if len(values) > 1:
        # diff[k] marks value k+1 != value k; a block is uniform when no mark falls inside it.
        diff = np.concatenate([[0], np.cumsum(values[1:] != values[:-1], dtype=np.int64)])
        last = np.maximum(start + n - 1, start)
        same = diff[np.minimum(last, len(values) - 1)] == diff[np.minimum(start,
                                                                           len(values) - 1)]
    return first, same | (n <= 1)


def build_codemap(idx: BlockIndex, symbols: KernelSymbols,
                  scheduler: tuple[str, ...] = SCHEDULER_FUNCTIONS,
                  actions: tuple[str, ...] = SOFTIRQ_ACTIONS,
                  dispatchers: tuple[str, ...] = SOFTIRQ_DISPATCHERS,
                  dead: tuple[str, ...] = TASK_DEAD_FUNCTIONS) -> CodeMap:
    """Classify every instruction of ``idx`` with ``symbols``.

    Parameters
    ----------
    idx : BlockIndex
    symbols : KernelSymbols
    scheduler, actions, dispatchers, dead : tuple of str
        Function names (see :mod:`pysched.superfunctions.symbols`).

    Returns
    -------
    CodeMap
    """
    v = idx.insn_vaddr.astype(np.uint64)
    flags = np.where(v < _USER_TOP, F_USER, 0).astype(np.uint8)
    sched_ranges = symbols.ranges(scheduler)
    dispatch_ranges = symbols.ranges(dispatchers)
    flags |= np.where(_inside(v, sched_ranges), F_SCHED, 0).astype(np.uint8)
    flags |= np.where(_inside(v, dispatch_ranges), F_DISPATCH, 0).astype(np.uint8)
    flags |= np.where(_inside(v, symbols.ranges(dead)), F_DEAD, 0).astype(np.uint8)

    found = [(n, s) for n, s, _ in symbols.ranges(actions) if "." not in n]
    found.sort(key=lambda x: x[1])
    act_addr = np.array([s for _, s in found], dtype=np.uint64)
    ins_action = np.full(len(v), -1, dtype=np.int16)
    if len(act_addr):
        k = np.searchsorted(act_addr, v)
        hit = k < len(act_addr)
        hit[hit] = act_addr[k[hit]] == v[hit]
        ins_action[hit] = k[hit]

    p = idx.insn_paddr.astype(np.uint64)
    known = p != np.uint64(UNKNOWN_PADDR)
    frame = p >> np.uint64(PAGE_SHIFT)
    pfns = np.unique(frame[known])
    ins_page = np.full(len(v), -1, dtype=np.int32)
    ins_page[known] = np.searchsorted(pfns, frame[known]).astype(np.int32)
    pfn_executable = np.zeros(len(pfns), dtype=bool)
    pfn_executable[ins_page[known & (v < EXECUTABLE_TOP)]] = True

    start = idx.start.astype(np.int64)
    n = idx.ninsn.astype(np.int64)
    fflag, fsame = _per_block(flags, start, n)
    fpage, psame = _per_block(ins_page, start, n)
    # An action entry anywhere but a block's first instruction needs the per-instruction path.
    later = np.zeros(len(start), dtype=bool)
    if len(v):
        is_act = np.concatenate([[0], np.cumsum(ins_action >= 0, dtype=np.int64)])
        s1 = np.minimum(start + 1, len(v))
        e = np.minimum(start + n, len(v))
        later = is_act[np.maximum(e, s1)] - is_act[s1] > 0
    blk_flags = np.where(fsame & ~later, fflag, F_MIXED).astype(np.uint8)
    first_action = ins_action[np.minimum(start, max(len(v) - 1, 0))] if len(v) else \
        np.zeros(len(start), dtype=np.int16)
    blk_action = np.where(n > 0, first_action, -1).astype(np.int16)
    blk_page = np.where(psame & (n > 0), fpage, -1).astype(np.int32)
    packed = np.stack([np.where(idx.well_formed, n, -1), start, blk_flags, blk_action,
                       blk_page], axis=1).astype(np.int64)
    top = int(idx.ids[-1]) + 1 if len(idx.ids) else 0
    sparse = top > 4 * len(idx.ids) + 4096
    if sparse:
        table = packed
    else:
        table = np.full((top, 5), -1, dtype=np.int64)
        # A duplicated id is malformed (well_formed is False for all its copies).
        table[idx.ids[::-1]] = packed[::-1]
    return CodeMap(flags, ins_action, ins_page, start, n, blk_flags, blk_action, blk_page,
                   pfns, pfn_executable, found, sched_ranges, dispatch_ranges, np.ascontiguousarray(table),
                   sparse, idx)


def trace_codemap(trace: Trace, symbols: KernelSymbols, **names: tuple[str, ...]) -> CodeMap:
    """:func:`build_codemap` of the trace's block index (cached on the trace per symbols)."""
    key = ("superfunctions.codemap", symbols.source, tuple(sorted(names.items())))
    cm = trace._cache.get(key)
    if cm is None:
        cm = trace._cache[key] = build_codemap(block_index(trace), symbols, **names)
    return cm
