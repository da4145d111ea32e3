"""Checks of the static tables: block structure (check a) and instruction frames (check d)."""
from __future__ import annotations

import numpy as np

from ..blockindex import BlockIndex
from .findings import Location, Report
from ..schema import KERNEL_TEXT_BASE, KERNEL_TEXT_END, PAGE_MASK, PAGE_SHIFT, UNKNOWN_PADDR

BLOCKS = "blocks"
FRAMES = "frames"

_U = np.uint64


def _ins(idx: BlockIndex, i: int) -> Location:
    return Location("insns", row=int(idx.insn_row[i]), block=int(idx.insn_block[i]))


def _blk(idx: BlockIndex, i: int) -> Location:
    return Location("blocks", row=int(idx.blocks_row[i]), block=int(idx.ids[i]))


def check_blocks(idx: BlockIndex, report: Report) -> None:
    """Check a, static part: ids, ``idx`` 0..ninsn-1, ``nbytes`` and consecutive addresses.

    Parameters
    ----------
    idx : BlockIndex
    report : Report
        Receives violations under ``"blocks"``.
    """
    report.start(BLOCKS)
    later_dup = np.zeros(len(idx.ids), dtype=bool)
    later_dup[1:] = idx.ids[1:] == idx.ids[:-1]
    report.add_mask(BLOCKS, later_dup, lambda i: (_blk(idx, i), "duplicate block id"))

    orphan = idx.lookup(idx.insn_block) < 0
    report.add_mask(BLOCKS, orphan,
                    lambda i: (_ins(idx, i), "instruction of a block not in the blocks table"))

    report.add_mask(BLOCKS, idx.count != idx.ninsn, lambda i: (
        _blk(idx, i), f"ninsn {idx.ninsn[i]} but {idx.count[i]} insns rows"))

    # idx must equal the row's position among its block's rows (catches gaps and repeats).
    n = len(idx.insn_block)
    group_start = np.searchsorted(idx.insn_block, idx.insn_block, side="left")
    expected = np.arange(n, dtype=np.int64) - group_start
    report.add_mask(BLOCKS, idx.insn_idx.astype(np.int64) != expected, lambda i: (
        _ins(idx, i), f"idx {idx.insn_idx[i]} where {expected[i]} is expected "
                      "(a block's instructions must be idx 0..ninsn-1)"))

    cum = np.concatenate([[0], np.cumsum(idx.insn_size, dtype=np.int64)])
    total = cum[idx.start + idx.count] - cum[idx.start]
    report.add_mask(BLOCKS, total != idx.nbytes, lambda i: (
        _blk(idx, i), f"nbytes {idx.nbytes[i]} but its instructions' sizes sum to {total[i]}"))

    has = idx.count > 0
    first = np.zeros(len(idx.ids), dtype=_U)
    first[has] = idx.insn_vaddr[idx.start[has]]
    report.add_mask(BLOCKS, has & (first != idx.vaddr), lambda i: (
        _blk(idx, i), f"vaddr {idx.vaddr[i]:#x} but its idx 0 instruction is at {first[i]:#x}"))

    if n > 1:
        same = idx.insn_block[1:] == idx.insn_block[:-1]
        follows = idx.insn_vaddr[:-1] + idx.insn_size[:-1].astype(_U)
        gap = np.concatenate([[False], same & (idx.insn_vaddr[1:] != follows)])
        report.add_mask(BLOCKS, gap, lambda i: (
            _ins(idx, i), f"vaddr {idx.insn_vaddr[i]:#x} does not follow the previous "
                          f"instruction (expected {follows[i - 1]:#x})"))


def kernel_phys_base(info: dict | None) -> int:
    """The kernel image's ``phys_base`` from ``plugin.json`` (0 for a trace of a kernel booted
    with ``nokaslr``, or written before the plugin recorded it)."""
    info = info or {}
    return int(info.get("phys_base") or 0) if info.get("phys_base_found", True) else 0


def check_frames(idx: BlockIndex, report: Report, plugin_info: dict | None = None) -> None:
    """Check d on ``insns``: page offsets, kernel text at ``vaddr - KERNEL_TEXT_BASE +
    phys_base`` (``plugin.json``'s; 0 with ``nokaslr``), and one frame per virtual page
    within a block.

    Frames are taken at translation, so checking each ``insns`` row covers every execution.
    Unknown frames (``paddr == 2**64 - 1``) are counted as info, not checked.
    """
    report.start(FRAMES)
    va, pa = idx.insn_vaddr, idx.insn_paddr
    known = pa != _U(UNKNOWN_PADDR)
    unknown = int(len(pa) - known.sum())
    if unknown:
        report.note(FRAMES, f"{unknown} of {len(pa)} instructions have an unknown paddr")

    report.add_mask(FRAMES, known & ((va ^ pa) & _U(PAGE_MASK) != 0), lambda i: (
        _ins(idx, i), f"paddr {pa[i]:#x} and vaddr {va[i]:#x} differ in the page offset"))

    base = kernel_phys_base(plugin_info)
    # pa = va - KERNEL_TEXT_BASE + phys_base, modulo 2**64 (phys_base may be "negative").
    delta = _U((KERNEL_TEXT_BASE - base) % 2**64)
    ktext = known & (va >= _U(KERNEL_TEXT_BASE)) & (va < _U(KERNEL_TEXT_END))
    with np.errstate(over="ignore"):
        want = va - delta
    how = "nokaslr" if base == 0 else f"phys_base {base:#x} from plugin.json"
    report.add_mask(FRAMES, ktext & (pa != want), lambda i: (
        _ins(idx, i), f"kernel text at {va[i]:#x} has paddr {pa[i]:#x}, expected "
                      f"{int(want[i]):#x} ({how})"))

    if len(va) > 1:
        # Consecutive rows of one block on one virtual page must share the va->pa delta.
        same = ((idx.insn_block[1:] == idx.insn_block[:-1])
                & ((va[1:] >> _U(PAGE_SHIFT)) == (va[:-1] >> _U(PAGE_SHIFT)))
                & known[1:] & known[:-1])
        delta = pa - va  # wraps; equality is what matters
        split = np.concatenate([[False], same & (delta[1:] != delta[:-1])])
        report.add_mask(FRAMES, split, lambda i: (
            _ins(idx, i), f"instructions at {va[i - 1]:#x} and {va[i]:#x} share a virtual "
                          f"page but have frames {pa[i - 1] >> _U(PAGE_SHIFT):#x} and "
                          f"{pa[i] >> _U(PAGE_SHIFT):#x}"))
