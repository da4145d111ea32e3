"""What every command that reads a trace checks first: the cheap checks (is it complete, are
its parts all there, do its instruction totals add up, is it degraded, do its timer interrupts
fit its guest clock: checks ``complete``, ``parts``, ``health`` and ``timer``), then every
other check of ``pysched check``, once per trace content (:mod:`.verdicts`).

The cheap checks read footers, JSON files, the static tables, the small event tables and one
column of the exec stream (seconds on the shipped traces) and say first what is most often
wrong; the full check reads every table, and a trace that passed it before is found by its
digest instead. Every command that reads a trace (``analyse``, ``evaluate``, ``devices``,
``sweep``, ``ablate``, ``study``, ``seeds``, ``cache --prepare``) runs :func:`preflight`
(:func:`preflight_all` for several traces) before any long work and refuses a trace that
fails with the checker's message. An incomplete trace accepted with ``allow_incomplete`` (its
complete prefix) gets the cheap checks only: ``pysched check`` rejects it by definition.

Completeness
    A trace written by ``pysched trace`` is complete when its ``manifest.json`` (written
    last, atomically) says so. A directory with the files that ``pysched trace`` writes from
    its start (the console log, QEMU's stderr, its lock) but no manifest is one whose run did
    not finish (killed, stopped, or still running). A trace recorded by running QEMU with the
    plugin directly has none of these: it is complete when its ``plugin.json`` is the
    plugin's final one (the plugin closed every table at QEMU's exit).
Parts
    Each table's parts (per vCPU for per-vCPU tables) are numbered 0, 1, 2 ... without a
    gap (the plugin numbers them so); a final ``plugin.json`` counts them all (``parts``);
    the event tables' parts follow each other in ``icount`` (from the row-group statistics).
    A part copied under a new number, a missing middle part or two swapped event parts are
    found here; two swapped exec parts only by the full check (``icount``).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import pyarrow.parquet as pq

from ..errors import TraceError
from ..execstream import exec_chunks
from ..reader import Trace
from ..schema import CAPTURE_FILES, EVENT_TABLES, TABLES
from .findings import Location, Report
from .health import check_health, exec_counts
from .timer import check_timer
from .vcpu import ICOUNT
from .verdicts import full_check

COMPLETE = "complete"
PARTS = "parts"


class TraceRejected(TraceError):
    """A trace failed the checks a command runs before its work (the message is the
    checker's, naming the trace and what failed)."""


def incomplete_reason(trace: Trace) -> str | None:
    """Why ``trace`` is incomplete, or None when it is complete (see the module docstring)."""
    man, info = trace.manifest, trace.plugin_info
    if man is not None:
        if man.get("complete", True) is False:
            return ("manifest.json says the trace is incomplete: "
                    f"{man.get('incomplete_reason') or 'no reason given'}")
        if "complete" not in man and not (info or {}).get("final"):
            return "plugin.json is not final: the plugin did not close its tables"
        if info is None:
            return ("no plugin.json although manifest.json shows a `pysched trace` run, which "
                    "writes both: the plugin's record of the run (its slide, counters and "
                    "parts) is lost")
        return None
    captured = [n for n in CAPTURE_FILES if (trace.path / n).exists()]
    if captured:
        return (f"no manifest.json although {captured[0]} shows a `pysched trace` run wrote "
                "it: that run did not finish (killed or stopped) or is still running")
    if info is None:
        return "no manifest.json and no plugin.json: the plugin did not finish"
    if not info.get("final"):
        return "plugin.json is not final: QEMU did not exit cleanly (killed?)"
    return None


def check_complete(trace: Trace, report: Report) -> None:
    """Record an incomplete trace as a violation of check ``complete``."""
    report.start(COMPLETE)
    reason = incomplete_reason(trace)
    if reason is not None:
        report.add(COMPLETE, Location("manifest.json"), f"incomplete trace: {reason}")
    outcome = (trace.manifest or {}).get("outcome") or {}
    if outcome.get("status") not in (None, "ok"):
        report.note(COMPLETE, f"the workload failed: {outcome.get('failure')}")


def _event_order(trace: Trace, name: str, vcpu: int, report: Report) -> None:
    """Consecutive parts of an event table must not go back in ``icount``."""
    last_max, last_part = -1, None
    for part in trace.parts(name, vcpu):
        md = pq.ParquetFile(part.path).metadata
        col = md.schema.to_arrow_schema().get_field_index("icount")
        stats = [md.row_group(g).column(col).statistics for g in range(md.num_row_groups)]
        if not stats or not all(st is not None and st.has_min_max for st in stats):
            return  # no statistics: left to the full check
        lo, hi = min(st.min for st in stats), max(st.max for st in stats)
        if lo < last_max:
            report.add(PARTS, Location(name, vcpu),
                       f"{part.path.name} starts at icount {lo}, before the end of "
                       f"{last_part} (icount {last_max}): parts out of order")
        last_max, last_part = max(last_max, hi), part.path.name


def check_parts(trace: Trace, report: Report) -> None:
    """Check ``parts``: numbering without gaps, the final count, event-part order."""
    report.start(PARTS)
    total = 0
    for name, spec in TABLES.items():
        groups = trace.all_vcpus() if spec.per_vcpu else [None]
        for v in groups:
            seqs = [p.seq for p in trace.parts(name, v)]
            total += len(seqs)
            missing = sorted(set(range(max(seqs, default=-1) + 1)) - set(seqs))
            if missing:
                shown = ", ".join(f"{m:06d}" for m in missing[:5])
                more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
                report.add(PARTS, Location(name, v),
                           f"part{'s' if len(missing) > 1 else ''} {shown}{more} missing "
                           f"(the table has parts up to {max(seqs):06d})")
            if name in EVENT_TABLES and v is not None:
                _event_order(trace, name, v, report)
    info = trace.plugin_info or {}
    want = info.get("parts")
    if info.get("final") and isinstance(want, int) and want != total:
        report.add(PARTS, Location("plugin.json"),
                   f"the plugin wrote {want} part files but the trace has {total}")


def exec_totals(trace: Trace) -> dict[int, int | None]:
    """Instructions each vCPU's exec stream retires (None where a block is unusable)."""
    totals: dict[int, int | None] = {}
    for v in trace.all_vcpus():
        n, usable = 0, True
        for c in exec_chunks(trace, v, strict=False):
            n += int(c.sizes.sum())
            usable &= bool(c.usable.all())
        totals[v] = n if usable else None
    return totals


def check_totals(trace: Trace, totals: dict[int, int | None], report: Report) -> None:
    """Check ``icount`` at trace level: a final ``plugin.json``'s per-vCPU instruction totals
    equal the exec streams' (a duplicated or missing exec part changes them)."""
    info = trace.plugin_info or {}
    if not info.get("final") or not isinstance(info.get("icount"), list):
        return
    for v, want in enumerate(info["icount"]):
        have = totals.get(v, 0)
        if have is not None and have != want:
            report.add(ICOUNT, Location("plugin.json", v),
                       f"icount {want} but the exec stream retires {have} instructions")


def complete_prefix(trace: Trace) -> tuple[Trace, str]:
    """The part of an incomplete trace that is certainly whole, and a sentence saying what
    was kept.

    The plugin writes parts in the order it hands them to its writer thread: a vCPU's exec
    part, then that vCPU's event parts of the same stretch. When its ``plugin.json`` is final
    every part on disk is complete and all is kept; otherwise each vCPU's last exec part is
    dropped (the event parts of its stretch may not have been written) and events after the
    kept exec rows are left out.
    """
    if (trace.plugin_info or {}).get("final"):
        return trace, "every part of it (the plugin closed its tables)"
    keep = {v: max(len(trace.parts("exec", v)) - 1, 0) for v in trace.all_vcpus()}
    insns: dict[int, int] = {}
    for v, n in keep.items():
        insns[v] = 0
        for i, c in enumerate(exec_chunks(trace, v, strict=False)):
            if i >= n:
                break
            insns[v] += int(c.sizes.sum())
    view = trace.prefix_view(keep, insns)
    kept = ", ".join(f"v{v} {insns[v]:,}" for v in sorted(insns))
    return view, f"its complete prefix: instructions {kept} (the last exec part of each vCPU left out)"


def _cheap(path: str | Path, allow_incomplete: bool) -> tuple[Trace, str | None]:
    """:func:`preflight`'s cheap checks (the trace, and the note of an accepted incomplete
    one)."""
    trace = Trace.open(path)
    report = Report(limit=5)
    check_complete(trace, report)
    check_parts(trace, report)
    if report.checks[PARTS].count == 0:
        totals, unknown = exec_counts(trace)
        check_totals(trace, totals, report)
        check_health(trace, totals, unknown, report)
        check_timer(trace, totals, report)
    failed = {name for name, res in report.checks.items() if res.count}
    if not failed or (failed == {COMPLETE} and allow_incomplete):
        if COMPLETE not in failed:
            return trace, None
        reason = incomplete_reason(trace)
        view, kept = complete_prefix(trace)
        return view, f"incomplete trace ({reason}); used {kept}"
    lines = [f"  {name} {loc}: {msg}" for name, loc, msg in report.shown()]
    hint = (" (--allow-incomplete, where a command has it, uses its complete prefix)"
            if failed == {COMPLETE} else
            "; `pysched check` lists every violation")
    raise TraceRejected(f"{trace.path}: refused, the trace fails the checker{hint}:\n"
                        + "\n".join(lines))


def preflight(path: str | Path, allow_incomplete: bool = False, cache: bool = True
              ) -> tuple[Trace, str | None]:
    """Open a trace for a command and check it: the cheap checks, then the full check unless
    this trace's content passed it before (:mod:`.verdicts`).

    Parameters
    ----------
    path : str or pathlib.Path
        Trace directory.
    allow_incomplete : bool
        Accept an incomplete trace (check ``complete`` failed, nothing else) and return the
        view of its complete prefix.
    cache : bool
        Keep and find the full check's passing verdict in the cache directory (a command's
        ``--no-cache`` gives False: the full check runs, nothing is read or written there).

    Returns
    -------
    trace : Trace
        The trace, or the view of its complete prefix.
    note : str or None
        For an accepted incomplete trace, what was used and why (for the summary).

    Raises
    ------
    TraceError
        When the trace cannot be opened or a part cannot be read.
    TraceRejected
        When a check fails; the message lists the violations as ``pysched check`` does.
    """
    trace, note = _cheap(path, allow_incomplete)
    if note is None:
        full_check(trace, cache)
    return trace, note


def preflight_all(paths: Sequence[str | Path], allow_incomplete: bool = False,
                  cache: bool = True) -> list[tuple[Trace, str | None]]:
    """:func:`preflight` of each of ``paths``: the cheap checks in threads (one per core at
    most: the exec column's reads and sums release the GIL, 5.9 s -> 3.7 s on the eight study
    traces on 2 cores), then the full checks one at a time (each holds up to a GB while it
    reads a trace's tables); the results in the order of ``paths``, and the first failure in
    that order is raised. ``cache`` as :func:`preflight`'s."""
    paths = list(paths)
    if len(paths) <= 1:
        cheap = [_cheap(p, allow_incomplete) for p in paths]
    else:
        with ThreadPoolExecutor(max_workers=min(len(paths), os.cpu_count() or 1)) as ex:
            cheap = list(ex.map(lambda p: _cheap(p, allow_incomplete), paths))
    for trace, note in cheap:
        if note is None:
            full_check(trace, cache)
    return cheap

