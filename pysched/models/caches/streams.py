"""From a trace to the access stream the cache models run: instruction fetches per fetch line,
data loads and stores per line, merged in program order, each with a requester class.

Instruction fetch is modelled per fetch line: a run of consecutive instructions whose first
bytes lie in one line makes one access (a loop inside one line stays one access, as a fetch
buffer would hold it). An instruction whose bytes straddle two lines counts in the line of its
first byte only. Data accesses whose bytes straddle two lines make one access per line.
Unknown physical addresses (``2**64-1``: I/O or not mapped) make no access; their number is
reported in :class:`AccessStream`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...constants import KERNEL_SPACE as _KERNEL_SPACE
from ...trace import expand
from ...trace.reader import Trace
from ...trace.schema import UNKNOWN_PADDR
from ..codes import APP, IFETCH, LOAD, OS, STORE

#: Virtual addresses at or above this are the kernel's (x86-64 canonical upper half).
KERNEL_SPACE = np.uint64(_KERNEL_SPACE)


def _shift(line: int) -> int:
    if not isinstance(line, (int, np.integer)) or line <= 0 or line & (line - 1):
        raise ValueError(f"line must be a positive power of two, got {line!r}")
    return int(line).bit_length() - 1


def fetch_lines(paddr: np.ndarray, line: int = 64) -> np.ndarray:
    """Indices of the instructions that start a fetch-line access.

    Parameters
    ----------
    paddr : array of uint64
        Physical address of each instruction, in retirement order (e.g. ``expand(...).paddr``).
    line : int
        Line size in bytes.

    Returns
    -------
    numpy.ndarray of int64
        Instruction ``i`` starts an access when its address is known and its line differs from
        instruction ``i - 1``'s (or ``i - 1`` is unknown, or ``i`` is the first). The access
        address is ``paddr[idx]``.
    """
    paddr = np.asarray(paddr)
    if paddr.ndim != 1:
        raise ValueError(f"paddr must be a 1-D array, got shape {paddr.shape}")
    paddr = paddr.astype(np.uint64, copy=False)
    sh = np.uint64(_shift(line))
    if len(paddr) == 0:
        return np.zeros(0, dtype=np.int64)
    known = paddr != np.uint64(UNKNOWN_PADDR)
    ln = paddr >> sh
    new = np.empty(len(paddr), dtype=bool)
    new[0] = True
    np.not_equal(ln[1:], ln[:-1], out=new[1:])
    new[1:] |= ~known[:-1]
    return np.flatnonzero(new & known)


def data_accesses(icount: np.ndarray, paddr: np.ndarray, size: np.ndarray, store: np.ndarray,
                  line: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Line accesses of the ``mem`` table's rows.

    Parameters
    ----------
    icount, paddr, size, store : arrays
        Columns of the ``mem`` table (program order).
    line : int
        Line size in bytes.

    Returns
    -------
    icount, addr, kind : numpy.ndarray
        int64, uint64 and uint8 (1 load, 2 store) arrays, one element per line touched: rows
        with an unknown address are dropped, rows whose bytes straddle a line boundary give two
        accesses (first line, then the next).
    """
    icount = np.asarray(icount).astype(np.int64, copy=False)
    paddr = np.asarray(paddr).astype(np.uint64, copy=False)
    size = np.asarray(size).astype(np.int64, copy=False)
    store = np.asarray(store)
    if not (icount.shape == paddr.shape == size.shape == store.shape) or icount.ndim != 1:
        raise ValueError("icount, paddr, size and store must be 1-D arrays of one length")
    sh = np.uint64(_shift(line))
    keep = paddr != np.uint64(UNKNOWN_PADDR)
    icount, paddr, size, store = icount[keep], paddr[keep], size[keep], store[keep]
    kind = np.where(store != 0, np.uint8(STORE), np.uint8(LOAD))
    last = paddr + np.maximum(size, 1).astype(np.uint64) - np.uint64(1)
    cross = (last >> sh) != (paddr >> sh)
    if not cross.any():
        return icount, paddr, kind
    # Insert the second line right after each straddling access.
    rep = 1 + cross.astype(np.int64)
    pos = np.cumsum(rep) - rep
    out_i = np.repeat(icount, rep)
    out_k = np.repeat(kind, rep)
    out_a = np.repeat(paddr, rep)
    second = pos[cross] + 1
    out_a[second] = (last[cross] >> sh) << sh
    return out_i, out_a, out_k


def merge_accesses(fetch_icount: np.ndarray, fetch_addr: np.ndarray, data_icount: np.ndarray,
                   data_addr: np.ndarray, data_kind: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge instruction fetches and data accesses into program order.

    Both inputs are sorted by instruction counter. The fetch of the line holding instruction
    ``i`` comes before the data accesses of ``i``.

    Returns
    -------
    icount, addr, kind : numpy.ndarray
        int64, uint64, uint8.
    """
    fi = np.asarray(fetch_icount, dtype=np.int64)
    di = np.asarray(data_icount, dtype=np.int64)
    if len(fi) != len(fetch_addr) or len(di) != len(data_addr) or len(di) != len(data_kind):
        raise ValueError("fetch and data arrays must each have one length")
    if (len(fi) > 1 and (np.diff(fi) < 0).any()) or (len(di) > 1 and (np.diff(di) < 0).any()):
        raise ValueError("fetch_icount and data_icount must be sorted")
    n = len(fi) + len(di)
    # fetch j goes after the data of earlier instructions; data j after fetches at or before it
    fpos = np.arange(len(fi)) + np.searchsorted(di, fi, side="left")
    dpos = np.arange(len(di)) + np.searchsorted(fi, di, side="right")
    icount = np.empty(n, dtype=np.int64)
    addr = np.empty(n, dtype=np.uint64)
    kind = np.empty(n, dtype=np.uint8)
    icount[fpos], icount[dpos] = fi, di
    addr[fpos], addr[dpos] = fetch_addr, data_addr
    kind[fpos], kind[dpos] = IFETCH, data_kind
    return icount, addr, kind


@dataclass(frozen=True)
class AccessStream:
    """One vCPU's accesses in program order, ready for :meth:`Hierarchy.run`.

    Attributes
    ----------
    addr : numpy.ndarray of uint64
        Physical byte address (of the line's first touched byte).
    kind : numpy.ndarray of uint8
        0 instruction fetch, 1 load, 2 store.
    cls : numpy.ndarray of uint16
        Requester class (of the instruction that made the access).
    icount : numpy.ndarray of int64
        Instruction counter of that instruction.
    instructions : int
        Instructions in the window.
    first_icount : int
        Instruction counter of the window's first instruction.
    unknown_fetch, unknown_data : int
        Instructions and data accesses dropped for an unknown physical address.
    """

    addr: np.ndarray
    kind: np.ndarray
    cls: np.ndarray
    icount: np.ndarray
    instructions: int
    first_icount: int
    unknown_fetch: int
    unknown_data: int

    def __len__(self) -> int:
        return len(self.addr)


def os_classes(pc: np.ndarray) -> np.ndarray:
    """Class per instruction: :data:`~pysched.models.codes.OS` (1) for kernel addresses, else
    :data:`~pysched.models.codes.APP` (0)."""
    return np.where(np.asarray(pc, dtype=np.uint64) >= KERNEL_SPACE, np.uint16(OS),
                    np.uint16(APP))


def access_stream(trace: Trace, vcpu: int, start: int = 0, stop: int | None = None,
                  line: int = 64, classes: np.ndarray | None = None,
                  data: bool = True) -> AccessStream:
    """The access stream of ``vcpu``'s exec rows ``[start, stop)``.

    Parameters
    ----------
    trace : Trace
        An open trace; data accesses need one recorded with ``--data-accesses``.
    vcpu : int
    start, stop : int, optional
        Window of exec rows (see :func:`pysched.trace.expand`).
    line : int
        Line size in bytes.
    classes : array of int, optional
        Requester class id of every instruction of the window (e.g. superFuncType ids);
        default :func:`os_classes` of the PCs (0 application, 1 OS).
    data : bool
        Include the ``mem`` table's loads and stores (default True).

    Raises
    ------
    ValueError
        When ``data`` is True but the trace has no ``mem`` table, or ``classes`` does not have
        one element per instruction.
    """
    ins = expand(trace, vcpu, start, stop)
    n = len(ins)
    first = int(ins.row_start[0]) if len(ins.row_start) else 0
    if classes is None:
        cls_insn = os_classes(ins.pc)
    else:
        cls_insn = np.asarray(classes)
        if cls_insn.shape != (n,):
            raise ValueError(f"classes has shape {cls_insn.shape}; the window has {n} "
                             f"instructions")
        cls_insn = cls_insn.astype(np.uint16, copy=False)
    fidx = fetch_lines(ins.paddr, line)
    unknown_fetch = int((ins.paddr == np.uint64(UNKNOWN_PADDR)).sum())
    f_ic = fidx + first
    f_addr = ins.paddr[fidx]
    unknown_data = 0
    if data:
        if not trace.parts("mem", vcpu) and not trace.parts("mem"):
            raise ValueError(f"{trace.path}: no 'mem' table; record with --data-accesses or "
                             f"pass data=False")
        t = trace.window("mem", vcpu, first, first + n)
        paddr = t.column("paddr").to_numpy()
        unknown_data = int((paddr == np.uint64(UNKNOWN_PADDR)).sum())
        d_ic, d_addr, d_kind = data_accesses(t.column("icount").to_numpy(), paddr,
                                             t.column("size").to_numpy(),
                                             t.column("store").to_numpy(), line)
    else:
        d_ic = np.zeros(0, dtype=np.int64)
        d_addr = np.zeros(0, dtype=np.uint64)
        d_kind = np.zeros(0, dtype=np.uint8)
    icount, addr, kind = merge_accesses(f_ic, f_addr, d_ic, d_addr, d_kind)
    cls = cls_insn[icount - first] if n else np.zeros(0, dtype=np.uint16)
    return AccessStream(addr, kind, cls, icount, n, first, unknown_fetch, unknown_data)
