"""From a vCPU's block-execution stream to its per-instruction stream.

The instruction counter (``icount``) of the contract is the index into the expanded stream:
the running sum of retired block sizes. A block retires all its instructions except the one
before an interrupt entry's ``exec_row``, which retired ``block_retired`` of them when that is
fewer (a synchronous exception cut it short).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .blockindex import block_index
from .execstream import exec_chunks
from .reader import Trace
from .schema import PAGE_SHIFT


@dataclass(frozen=True)
class InstructionStream:
    """The instructions one vCPU retired, in order; the index is the instruction counter.

    Attributes
    ----------
    vcpu : int
        vCPU index.
    pc : numpy.ndarray of uint64
        Virtual address of each instruction.
    paddr : numpy.ndarray of uint64
        Guest-physical address of each instruction (``2**64 - 1`` when unknown).
    block_row : numpy.ndarray of int64
        Row of the ``exec`` stream each instruction came from.
    row_start : numpy.ndarray of int64
        Instruction counter at the start of each expanded exec row, with one extra last element
        (length ``rows + 1``), as :func:`block_start_icount`.
    """

    vcpu: int
    pc: np.ndarray
    paddr: np.ndarray
    block_row: np.ndarray
    row_start: np.ndarray

    def __len__(self) -> int:
        return len(self.pc)

    @property
    def icount(self) -> np.ndarray:
        """Instruction counter of each instruction (``arange(len(self))`` for a whole stream)."""
        first = int(self.row_start[0]) if len(self.row_start) else 0
        return np.arange(first, first + len(self.pc), dtype=np.uint64)

    @property
    def frame(self) -> np.ndarray:
        """Guest-physical frame number of each instruction (``paddr >> 12``)."""
        return self.paddr >> np.uint64(PAGE_SHIFT)


def _gather(trace: Trace, vcpu: int, start: int = 0,
            stop: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Block-index positions and retired sizes of exec rows ``[start, stop)``, and the
    instruction counter at ``start``; raises on an unusable block."""
    pos, sizes = [], []
    first_icount, end_icount = None, 0
    for c in exec_chunks(trace, vcpu):
        end_icount = c.start_icount + int(c.sizes.sum())
        if c.stop_row <= start:
            continue
        lo = max(start - c.start_row, 0)
        if first_icount is None:
            first_icount = c.start_icount + int(c.sizes[:lo].sum())
        if stop is not None and c.start_row >= stop:
            break
        hi = len(c.sizes) if stop is None else min(stop - c.start_row, len(c.sizes))
        pos.append(c.pos[lo:hi])
        sizes.append(c.sizes[lo:hi])
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))
    # start at or past the end: the counter there is the vCPU's total
    return cat(pos), cat(sizes), end_icount if first_icount is None else first_icount


def block_sizes(trace: Trace, vcpu: int) -> np.ndarray:
    """Instructions each exec row of ``vcpu`` retired.

    Parameters
    ----------
    trace : Trace
    vcpu : int

    Returns
    -------
    numpy.ndarray of int64
        One element per ``exec`` row: the block's ``ninsn``, or the ``block_retired`` of the
        interrupt entry that follows it when smaller.

    Raises
    ------
    TraceError
        When an executed block is missing from ``blocks``/``insns`` or its instructions are
        malformed; the message names the vCPU, exec row and block id.
    """
    return _gather(trace, vcpu)[1]


def _cumulative(sizes: np.ndarray, first: int = 0) -> np.ndarray:
    out = np.full(len(sizes) + 1, first, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    out[1:] += first
    return out


def block_start_icount(trace: Trace, vcpu: int) -> np.ndarray:
    """Instruction counter at the start of each exec row of ``vcpu``.

    Returns
    -------
    numpy.ndarray of int64
        Length ``rows + 1``: element ``r`` is the sum of retired sizes of rows before ``r``
        (``S[r]`` in the checker), the last element the vCPU's instruction total. The extra
        element lets an event's ``exec_row`` equal the stream length.
    """
    return _cumulative(block_sizes(trace, vcpu))


@numba.njit(cache=True, nogil=True)
def _expand(row_start: np.ndarray, row_size: np.ndarray, insn_vaddr: np.ndarray,
            insn_paddr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate, for each exec row ``r``, ``row_size[r]`` instructions from ``row_start[r]``.

    No bounds checks: :func:`expand_rows` validates the arguments.
    """
    total = 0
    for r in range(row_size.shape[0]):
        total += row_size[r]
    pc = np.empty(total, dtype=np.uint64)
    paddr = np.empty(total, dtype=np.uint64)
    block_row = np.empty(total, dtype=np.int64)
    k = 0
    for r in range(row_size.shape[0]):
        s = row_start[r]
        for j in range(row_size[r]):
            pc[k] = insn_vaddr[s + j]
            paddr[k] = insn_paddr[s + j]
            block_row[k] = r
            k += 1
    return pc, paddr, block_row


def expand_rows(row_start: np.ndarray, row_size: np.ndarray, insn_vaddr: np.ndarray,
                insn_paddr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated front of the :func:`_expand` kernel.

    Parameters
    ----------
    row_start : array of int
        For each exec row, offset of its block's first instruction in ``insn_vaddr``.
    row_size : array of int
        Instructions the row retired.
    insn_vaddr, insn_paddr : array of uint64
        Instruction addresses, each block's instructions contiguous and in order.

    Returns
    -------
    pc, paddr, block_row : numpy.ndarray
        uint64, uint64 and int64 arrays of length ``row_size.sum()``.
    """
    row_start = np.ascontiguousarray(row_start, dtype=np.int64)
    row_size = np.ascontiguousarray(row_size, dtype=np.int64)
    insn_vaddr = np.ascontiguousarray(insn_vaddr, dtype=np.uint64)
    insn_paddr = np.ascontiguousarray(insn_paddr, dtype=np.uint64)
    if row_start.ndim != 1 or row_start.shape != row_size.shape:
        raise ValueError("row_start and row_size must be 1-D arrays of one length")
    if insn_vaddr.shape != insn_paddr.shape or insn_vaddr.ndim != 1:
        raise ValueError("insn_vaddr and insn_paddr must be 1-D arrays of one length")
    if len(row_size) and (row_size.min() < 0 or row_start.min() < 0
                          or (row_start + row_size).max() > len(insn_vaddr)):
        raise ValueError("a row's instructions lie outside the instruction arrays")
    return _expand(row_start, row_size, insn_vaddr, insn_paddr)


def expand(trace: Trace, vcpu: int, start: int = 0, stop: int | None = None
           ) -> InstructionStream:
    """Expand ``vcpu``'s block-execution stream into its instruction stream.

    Parameters
    ----------
    trace : Trace
    vcpu : int
        A vCPU of the trace (see :attr:`Trace.vcpus`); a vCPU without exec parts expands to an
        empty stream.
    start, stop : int, optional
        Expand only exec rows ``[start, stop)`` (default: all). A whole long recording does
        not fit in memory (24 bytes per instruction); windows of rows do.

    Returns
    -------
    InstructionStream
        ``block_row`` holds exec rows of the whole stream and ``row_start`` instruction counters
        of the whole stream, so a window's :attr:`InstructionStream.icount` starts at
        ``row_start[0]``.

    Raises
    ------
    TraceError
        When an executed block is missing from ``blocks``/``insns`` (or malformed); the message
        names the vCPU, exec row and block id.
    """
    if start < 0 or (stop is not None and stop < start):
        raise ValueError(f"bad exec row range [{start}, {stop})")
    pos, sizes, first_icount = _gather(trace, vcpu, start, stop)
    idx = block_index(trace)
    # Sizes never exceed the block's rows: usable blocks have count == ninsn and truncation
    # only lowers a size.
    starts = idx.start[pos] if len(pos) else np.zeros(0, dtype=np.int64)
    pc, paddr, row = expand_rows(starts, sizes, idx.insn_vaddr, idx.insn_paddr)
    if start:
        row += start
    return InstructionStream(vcpu=vcpu, pc=pc, paddr=paddr, block_row=row,
                             row_start=_cumulative(sizes, first_icount))
