"""Check ``health``: did the plugin observe what a trace of a Linux guest must hold?

A trace can be well formed (every other check passes) and still be degraded: recorded from a
kernel whose symbols were not where the map said (KASLR without a slide, a map of another
kernel), whose entry ran on a page table the plugin could not read through (page-table
isolation), or with RAM the frame calibration did not cover. Each finding below is a violation
with the probable cause in words:

* ``plugin.json`` counts kernel-text blocks that disagreed with the RAM calibration, or the
  calibration never happened although kernel code ran;
* a symbol map was given (``options.sysmap``) but the plugin never read the IDT
  (``idt_reads == 0``): no interrupt or exception can have been recognised;
* a symbol map was given, the plugin looked for the kernel's slide (``plugin.json``'s
  ``kaslr``) and did not find it, or the IDT did not confirm it, or the guest's own
  ``/proc/kallsyms`` (``manifest.json``'s ``kernel_symbols.slide_kallsyms``) gives another;
* more than :data:`MAX_UNKNOWN_FRAMES` of the executed instructions have an unknown frame
  (a truncated block is counted with all its unknown instructions up to the number it
  retired: an upper bound, exact for whole blocks);
* a vCPU's events name two or more threads but it has no context switch (with a map);
* system calls or interrupts whose thread is unknown (``thread == 0``) although a map was
  given (without a map no thread can be known, which is noted, not a violation);
* under round-robin TCG (``plugin.json``'s ``round_robin``), recording callbacks whose vCPU the
  plugin could not tell (``vcpu_unresolved``): their rows may be on another vCPU's stream.

Everything here reads ``plugin.json``, the small event tables and, for the frames, the block
index and the exec stream's block ids, which the cheap checks of :mod:`.preflight` read anyway:
``analyse`` and ``evaluate`` run this check before their work too.
"""
from __future__ import annotations

import numpy as np

from ..blockindex import BlockIndex, block_index
from ..reader import Trace
from ..schema import UNKNOWN_PADDR
from ..symbol_files import traced_slide
from .findings import Location, Report

HEALTH = "health"

#: The largest fraction of executed instructions with an unknown frame a healthy trace has.
MAX_UNKNOWN_FRAMES = 0.01


def unknown_per_block(idx: BlockIndex) -> np.ndarray:
    """Instructions with an unknown frame in each block of ``idx`` (int64, by position)."""
    unk = (idx.insn_paddr == np.uint64(UNKNOWN_PADDR)).astype(np.int64)
    cum = np.concatenate([[0], np.cumsum(unk)])
    return cum[idx.start + idx.count] - cum[idx.start]


def chunk_unknown(unk: np.ndarray, pos: np.ndarray, usable: np.ndarray,
                  sizes: np.ndarray) -> int:
    """Executed instructions with an unknown frame in one exec chunk (see the module doc)."""
    p = pos[usable]
    return int(np.minimum(unk[p], sizes[usable]).sum()) if len(p) else 0


def _sysmap_given(info: dict) -> bool:
    return bool((info.get("options") or {}).get("sysmap"))


def _threads(trace: Trace, v: int) -> set[int]:
    """Distinct known thread keys the vCPU's events name."""
    seen: set[int] = set()
    for name, col in (("syscalls", "thread"), ("interrupts", "thread"),
                      ("markers", "thread"), ("wakeups", "waker")):
        if trace.num_rows(name, v):
            seen.update(int(x) for x in np.unique(trace.table(name, v).column(col).to_numpy()))
    seen.discard(0)
    return seen


def check_health(trace: Trace, totals: dict[int, int | None], unknown: dict[int, int],
                 report: Report) -> None:
    """Run check ``health`` (module docstring).

    Parameters
    ----------
    trace : Trace
    totals : dict of int to int or None
        Instructions each vCPU retired (None when its stream has unusable blocks).
    unknown : dict of int to int
        Executed instructions with an unknown frame per vCPU (:func:`chunk_unknown`).
    report : Report
    """
    report.start(HEALTH)
    info = trace.plugin_info
    if info is None:
        report.note(HEALTH, "no plugin.json: what the plugin observed is not checked")
        return
    pj = Location("plugin.json")
    sysmap = _sysmap_given(info)

    mism = int(info.get("ram_base_mismatches") or 0)
    if mism:
        report.add(HEALTH, pj, f"{mism} kernel-text blocks disagreed with the RAM calibration: "
                               "their frames are wrong; probable cause: the kernel is not "
                               "where the calibration assumed (KASLR on with a plugin that "
                               "does not find the slide, or guest RAM in more than one block)")
    if info.get("ram_base_calibrated") is False and any(totals.values()):
        report.add(HEALTH, pj, "the RAM calibration never happened: every frame is unknown; "
                               "probable cause: no kernel code ran in the region, or the "
                               "kernel's physical load address was not found")

    kaslr = info.get("kaslr")
    if sysmap and isinstance(kaslr, dict) and not kaslr.get("found"):
        report.add(HEALTH, pj, "the kernel's slide was not found: symbols of the map were "
                               "not matched to the running kernel, so no interrupt, context "
                               "switch or wake-up was recognised; probable cause: the symbol "
                               f"map is not the running kernel's ({kaslr.get('reason', '?')})")

    if sysmap and isinstance(kaslr, dict) and kaslr.get("found"):
        if not kaslr.get("verified_by_idt"):
            report.add(HEALTH, pj, "the kernel's slide was not confirmed by the IDT ("
                                   f"{kaslr.get('idt_handlers_outside_text', '?')} handlers "
                                   "outside the kernel text moved by it); probable cause: the "
                                   "symbol map is not the running kernel's")
        ks = (trace.manifest or {}).get("kernel_symbols") or {}
        slide = traced_slide(info)
        if ks.get("slide_kallsyms") is not None and ks["slide_kallsyms"] != slide:
            report.add(HEALTH, Location("manifest.json"),
                       f"the guest's /proc/kallsyms gives the slide {ks['slide_kallsyms']:#x}, "
                       f"the plugin found {slide:#x}; probable cause: the symbol map is not "
                       "the running kernel's")

    unresolved = int(info.get("vcpu_unresolved") or 0)
    if unresolved:
        report.add(HEALTH, pj, f"{unresolved:,} recording callbacks could not tell which vCPU ran "
                               "them (round-robin TCG: QEMU names the vCPU that translated a "
                               "block); their rows may be on another vCPU's stream; probable "
                               "cause: the symbol map has no __per_cpu_offset, or the kernel's "
                               "GS base is not its per-CPU offset")

    if sysmap and "idt_reads" in info and not info["idt_reads"]:
        report.add(HEALTH, pj, "the plugin never read the IDT although a symbol map was "
                               "given: no interrupt or exception is recorded; probable cause: "
                               "idt_table is not at the map's address (KASLR on without a "
                               "slide, or the map of another kernel)")

    total = sum(t or 0 for t in totals.values())
    unk = sum(unknown.values())
    if total and unk > MAX_UNKNOWN_FRAMES * total:
        per = ", ".join(f"v{v} {unknown.get(v, 0):,}/{t or 0:,}" for v, t in totals.items())
        report.add(HEALTH, Location("insns"),
                   f"{unk / total:.1%} of the executed instructions have an unknown frame "
                   f"(more than {MAX_UNKNOWN_FRAMES:.0%}; {per}); probable cause: the RAM "
                   "calibration is wrong or does not cover the guest's RAM (KASLR, RAM above "
                   "the plugin's ram=, or RAM in more than one block)")

    if not sysmap:
        report.note(HEALTH, "no symbol map was given to the plugin: threads, interrupts and "
                            "context switches are not recorded")
        return
    for v in trace.all_vcpus():
        threads = _threads(trace, v)
        if len(threads) >= 2 and not trace.num_rows("switches", v):
            report.add(HEALTH, Location("switches", v),
                       f"no context switch although {len(threads)} threads ran on this vCPU; "
                       "probable cause: __switch_to is not at the map's address (KASLR on "
                       "without a slide, or the map of another kernel)")
        for name in ("syscalls", "interrupts"):
            if not trace.num_rows(name, v):
                continue
            thread = trace.table(name, v).column("thread").to_numpy()
            zero = np.flatnonzero(thread == 0)
            if len(zero):
                t = trace.table(name, v)
                i = int(zero[0])
                report.add(HEALTH, Location(name, v, row=i,
                                            icount=int(t.column("icount")[i].as_py())),
                           f"{len(zero)} of {len(thread)} rows have an unknown thread (the "
                           "first shown); probable cause: current_task could not be read "
                           "through the kernel's GS base (page-table isolation: the entry "
                           "runs on the user page table; or a wrong current_task in the map)")


def exec_counts(trace: Trace) -> tuple[dict[int, int | None], dict[int, int]]:
    """Per vCPU: instructions retired (None when a block is unusable) and executed
    instructions with an unknown frame, in one walk of each exec stream."""
    from ..execstream import exec_chunks

    unk = unknown_per_block(block_index(trace))
    any_unknown = bool(unk.any())  # most traces have none: no per-row lookup then
    totals: dict[int, int | None] = {}
    unknown: dict[int, int] = {}
    for v in trace.all_vcpus():
        n, u, usable = 0, 0, True
        for c in exec_chunks(trace, v, strict=False):
            n += int(c.sizes.sum())
            if any_unknown:
                u += chunk_unknown(unk, c.pos, c.usable, c.sizes)
            usable &= bool(c.usable.all())
        totals[v] = n if usable else None
        unknown[v] = u
    return totals, unknown


__all__ = ["HEALTH", "MAX_UNKNOWN_FRAMES", "check_health", "exec_counts", "chunk_unknown",
           "unknown_per_block"]
