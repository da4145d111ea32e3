"""The compact encoding of ``mem`` parts: each access predicted from the last one the same
instruction operand made.

The plugin writes ``mem`` as ``(icount, paddr, size, store)``. Data addresses are hard for a
general compressor (0.8-1.3 bytes an access after zstd), but most repeat or stride from what
the same instruction touched the time before (a stack slot, the next element of an array), an
instruction always makes accesses of the same size and direction, and straight-line code puts
the same number of instructions between two accesses every time. ``pysched trace --compact``
re-writes every ``mem`` part as residuals against those predictions, per *site* (the
instruction's virtual address, from the exec stream, and the access's rank among that
instruction's accesses, capped at 7):

- ``gap`` (uint32): the instructions since the previous row minus the count that followed the
  previous row's site the last time, zigzag-coded (the first row's ``icount`` is in the
  part's metadata, ``pysched.mem_first_icount``);
- ``kind`` (uint8): ``size | store << 7``, XOR the site's last kind;
- ``pdelta`` (uint64): ``paddr`` minus the site's last ``paddr`` (the previous row's for a
  site not seen yet), zigzag-coded;

with key ``pysched.encoding`` = :data:`MEM_SITE_DELTA` and the part's first and last
``icount`` in the metadata (so that :meth:`pysched.trace.reader.Trace.window` still skips
parts). Every part decodes on its own (the site table starts empty in each), and the reader
decodes it back to the plugin's four columns, bit for bit; decoding needs the vCPU's ``exec``
stream and blocks for the instructions' addresses (an icount past the stream's end has
address 0 on both sides).

The site table is a fixed open-addressing table of :data:`SITE_SLOTS` slots that stops taking
new sites when half full; encoder and decoder follow the same rule, so a part with more
distinct sites than that only predicts less well.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba
import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from .reader import Trace

#: Value of the part metadata key ``pysched.encoding`` for site-predicted ``mem`` parts.
MEM_SITE_DELTA = "mem-site-delta/1"
META_ENCODING = "pysched.encoding"
META_FIRST_ICOUNT = "pysched.mem_first_icount"
META_LAST_ICOUNT = "pysched.mem_last_icount"

#: Columns of an encoded part.
ENCODED_SCHEMA = pa.schema([("gap", pa.uint32()), ("kind", pa.uint8()),
                            ("pdelta", pa.uint64())])

#: Slots of the per-part site table (26 bytes each); new sites stop being added at half.
SITE_SLOTS = 1 << 20
#: Largest gap between two accesses the encoding holds (its residual must fit 32 bits).
MAX_GAP = (1 << 31) - 1


@dataclass(frozen=True)
class ExecRows:
    """Where each instruction of a vCPU's stream is: what the codec needs from the trace.

    Attributes
    ----------
    row_start : numpy.ndarray of int64
        icount at the start of each exec row, with the stream's length as an extra last element.
    row_insn0 : numpy.ndarray of int64
        Index in ``insn_vaddr`` of each row's first instruction.
    insn_vaddr : numpy.ndarray of uint64
        Virtual address of every instruction of every block.
    """

    row_start: np.ndarray
    row_insn0: np.ndarray
    insn_vaddr: np.ndarray

    @classmethod
    def of(cls, trace: Trace, vcpu: int) -> ExecRows:
        """The rows of ``vcpu``'s exec stream, built once per open :class:`Trace`."""
        from .blockindex import block_index
        from .expand import _cumulative, _gather
        cache = trace._cache.setdefault("mem_codec_rows", {})
        if vcpu not in cache:
            pos, sizes, first = _gather(trace, vcpu)
            idx = block_index(trace)
            insn0 = idx.start[pos] if len(pos) else np.zeros(0, dtype=np.int64)
            cache[vcpu] = cls(_cumulative(sizes, first), insn0.astype(np.int64),
                              idx.insn_vaddr.astype(np.uint64))
        return cache[vcpu]

    @classmethod
    def flat(cls, pcs: np.ndarray) -> ExecRows:
        """A stream of one-instruction rows: instruction ``i`` at ``pcs[i]`` (for tests)."""
        n = len(pcs)
        return cls(np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64),
                   np.asarray(pcs, dtype=np.uint64))


@numba.njit(cache=True, nogil=True)
def _zz(d: np.uint64) -> np.uint64:
    return (d << np.uint64(1)) ^ (np.uint64(0) - (d >> np.uint64(63)))


@numba.njit(cache=True, nogil=True)
def _unzz(z: np.uint64) -> np.uint64:
    return (z >> np.uint64(1)) ^ (np.uint64(0) - (z & np.uint64(1)))


@numba.njit(cache=True, nogil=True)
def _codec(first: int, gaps: np.ndarray, kinds: np.ndarray, addrs: np.ndarray,
           row_start: np.ndarray, row_insn0: np.ndarray, insn_vaddr: np.ndarray,
           decode: bool, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Encode ``(icount, kind, paddr)`` rows into residuals, or (``decode``) back.

    Encoding takes ``gaps`` = icounts, ``kinds`` and ``addrs`` = addresses; decoding takes the
    ``gap``, ``kind`` and ``pdelta`` residuals. Both return ``(icount, gap, kind, addr)``:
    the icounts, the gap residuals, and the kinds and addresses in the other form (residuals
    when encoding, values when decoding). ``first`` is the first row's icount. Each row's
    instruction address comes from the exec rows (``row_start``: icount at each row's start,
    one extra last element; ``row_insn0``: the row's first instruction in ``insn_vaddr``),
    found with a pointer that only moves forward because icounts do not decrease.
    """
    n = len(gaps)
    out_ic = np.empty(n, dtype=np.uint64)
    out_g = np.zeros(n, dtype=np.uint32)
    out_k = np.empty(n, dtype=np.uint8)
    out_a = np.empty(n, dtype=np.uint64)
    slots = 1 << bits
    keys = np.zeros(slots, dtype=np.uint64)
    last = np.zeros(slots, dtype=np.uint64)
    last_kind = np.zeros(slots, dtype=np.uint8)
    next_gap = np.zeros(slots, dtype=np.uint64)
    used = np.zeros(slots, dtype=np.bool_)
    mask = np.uint64(slots - 1)
    shift = np.uint64(64 - bits)
    filled = 0
    prev_addr = np.uint64(0)
    prev_ic = np.uint64(first)
    prev_slot = -1
    rank = 0
    rows = len(row_start) - 1
    r = 0
    if rows > 0:
        r = max(np.searchsorted(row_start, np.int64(first), side="right") - 1, 0)
    for i in range(n):
        # the icount: the previous one plus a gap predicted from the previous access's site
        pg = next_gap[prev_slot] if prev_slot >= 0 else np.uint64(0)
        if i == 0:
            ic = np.uint64(first)
        elif decode:
            ic = prev_ic + pg + _unzz(np.uint64(gaps[i]))
        else:
            ic = np.uint64(gaps[i])
        g = ic - prev_ic
        if not decode and i > 0:
            out_g[i] = np.uint32(_zz(g - pg))
        out_ic[i] = ic
        rank = rank + 1 if i > 0 and g == 0 else 0
        # the instruction's address
        while r < rows and row_start[r + 1] <= np.int64(ic):
            r += 1
        pc = np.uint64(0)
        if r < rows and np.int64(ic) >= row_start[r]:
            pc = insn_vaddr[row_insn0[r] + np.int64(ic) - row_start[r]]
        key = pc * np.uint64(8) + np.uint64(min(rank, 7))
        slot = (key * np.uint64(0x9E3779B97F4A7C15)) >> shift
        while used[slot] and keys[slot] != key:
            slot = (slot + np.uint64(1)) & mask
        found = used[slot]
        pred = last[slot] if found else prev_addr
        pk = last_kind[slot] if found else np.uint8(0)
        if decode:
            kind = kinds[i] ^ pk
            addr = pred + _unzz(addrs[i])
            out_k[i] = kind
            out_a[i] = addr
        else:
            kind = kinds[i]
            addr = addrs[i]
            out_k[i] = kind ^ pk
            out_a[i] = _zz(addr - pred)
        if prev_slot >= 0:
            next_gap[prev_slot] = g
        if not found and 2 * filled < slots:
            used[slot] = True
            keys[slot] = key
            filled += 1
            found = True
        if found:
            last[slot] = addr
            last_kind[slot] = kind
        prev_slot = np.int64(slot) if found else -1
        prev_addr = addr
        prev_ic = ic
    return out_ic, out_g, out_k, out_a


def _bits(slots: int) -> int:
    bits = int(slots).bit_length() - 1
    if slots < 2 or 1 << bits != slots:
        raise ValueError(f"slots must be a power of two >= 2 (got {slots})")
    return bits


def _run(first: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, rows: ExecRows, decode: bool,
         slots: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return _codec(int(first), a, b, c, rows.row_start, rows.row_insn0, rows.insn_vaddr, decode,
                  _bits(slots))


def encode_mem(table: pa.Table, rows: ExecRows, slots: int = SITE_SLOTS) -> pa.Table:
    """Encode a ``mem`` part's rows (the plugin's schema).

    Parameters
    ----------
    table : pyarrow.Table
        Columns ``icount``, ``paddr``, ``size``, ``store``, rows in ``icount`` order.
    rows : ExecRows
        The vCPU's exec stream (:meth:`ExecRows.of`).
    slots : int
        Site table size, a power of two (the decoder must use the same).

    Returns
    -------
    pyarrow.Table
        ``gap``, ``kind``, ``pdelta`` with the encoding's metadata (the first and last icount).

    Raises
    ------
    ValueError
        When rows are out of ``icount`` order, a gap exceeds :data:`MAX_GAP`, or a size is
        128 bytes or more.
    """
    icount = table.column("icount").to_numpy().astype(np.uint64)
    paddr = table.column("paddr").to_numpy().astype(np.uint64)
    size = table.column("size").to_numpy().astype(np.uint8)
    store = table.column("store").to_numpy().astype(np.uint8)
    if len(icount) > 1:
        gaps = np.diff(icount.astype(np.int64))
        if gaps.min() < 0:
            raise ValueError("mem rows are not in icount order")
        if gaps.max() > MAX_GAP:
            raise ValueError(f"a gap of {int(gaps.max())} instructions between data accesses "
                             f"is more than the encoding holds ({MAX_GAP})")
    if len(size) and size.max() >= 128:
        raise ValueError(f"an access of {int(size.max())} bytes does not fit the encoding")
    kind = size | ((store != 0).astype(np.uint8) << np.uint8(7))
    first = int(icount[0]) if len(icount) else 0
    _, gap, kres, delta = _run(first, icount, kind, paddr, rows, False, slots)
    out = pa.table({"gap": gap, "kind": kres, "pdelta": delta}, schema=ENCODED_SCHEMA)
    meta = dict(table.schema.metadata or {})
    meta.update({META_ENCODING.encode(): MEM_SITE_DELTA.encode(),
                 META_FIRST_ICOUNT.encode(): str(first).encode(),
                 META_LAST_ICOUNT.encode(): str(int(icount[-1]) if len(icount) else -1).encode()})
    return out.replace_schema_metadata(meta)


def decode_mem(encoded: pa.Table, first_icount: int, rows: ExecRows,
               slots: int = SITE_SLOTS) -> pa.Table:
    """The plugin's ``mem`` columns of an encoded part (the inverse of :func:`encode_mem`)."""
    icount, _, kind, paddr = _run(
        first_icount, encoded.column("gap").to_numpy().astype(np.uint32),
        encoded.column("kind").to_numpy().astype(np.uint8),
        encoded.column("pdelta").to_numpy().astype(np.uint64), rows, True, slots)
    return pa.table({"icount": icount, "paddr": paddr,
                     "size": kind & np.uint8(0x7F), "store": kind >> np.uint8(7)})


__all__ = ["ENCODED_SCHEMA", "MAX_GAP", "MEM_SITE_DELTA", "SITE_SLOTS", "ExecRows",
           "decode_mem", "encode_mem"]
