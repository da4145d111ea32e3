"""How a ``pysched trace`` run went: why it failed (QEMU's end, the console, the instruction
bound), the manifest's ``outcome`` and ``roi_bound``, and what the user is told (the guest's and
the peer's last lines, notes, the error).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pysched.capture import console as con
from pysched.capture import peers as prs
from pysched.capture import qemu as qm
from pysched.capture.plan import RunPlan, existing_parent, free_mb
from pysched.capture.roiwatch import bound_shortfall, read_plugin_info
from pysched.trace.schema import CONSOLE_LOG

if TYPE_CHECKING:
    from pysched.capture.boot import Booted


# Exit statuses of `pysched trace`: 1 the run failed (QEMU, guest or command), 2 it could not
# start (bad arguments, missing guest or plugin).
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2


def err(msg: str) -> None:
    print(f"pysched trace: {msg}", file=sys.stderr)


def failure_hints(plan: RunPlan, tmp: Path) -> list[str]:
    """Notes for a failed run: a full disk is the usual hidden cause of odd failures."""
    hints = []
    for path, what in ((plan.out, "the trace"), (tmp, "the guest disk's overlay")):
        if free_mb(path) < 64:
            hints.append(f"the disk holding {what} ({existing_parent(path)}) is full: "
                         f"{free_mb(path)} MB free")
    return hints


def roi_bound_status(plan: RunPlan, args: argparse.Namespace
                     ) -> tuple[dict[str, Any], dict[str, int] | None, bool]:
    """The manifest's ``roi_bound``; with ``--roi-insns``, the vCPUs short of it and whether
    the region was still open."""
    shortfall = None
    region_open = False
    if plan.roi_insns is not None:
        info = read_plugin_info(plan.out)
        shortfall = bound_shortfall(info, plan.roi_insns)
        region_open = bool(info and info.get("recording"))
    roi_bound = {"seconds": plan.roi_seconds, "insns_per_vcpu": plan.roi_insns,
                 "warmup_seconds": args.warmup if plan.workload is not None else None,
                 "insns_bound_reached": (None if shortfall is None else not shortfall)}
    return roi_bound, shortfall, region_open


_WORKLOAD_MESSAGE_RE = re.compile(r"^workload: (.*)$", re.M)


def run_failure(plan: RunPlan, args: argparse.Namespace, booted: Booted, text: str,
                shortfall: dict[str, int] | None, region_open: bool) -> str | None:
    """Why the run failed, from QEMU's end and the console; None when it did not."""
    result = booted.result
    status = con.guest_exit_status(text)
    if result.boot_hung:
        return (f"the guest did not reach /init within {plan.boot_timeout:g} s, "
                f"{len(booted.failed_boots) + 1} times; QEMU was stopped")
    if result.timed_out:
        failure = f"timed out after {args.timeout:g} s; QEMU was stopped"
        if con.BEGIN_MARK not in text:
            failure += " (the guest never reached /init: it hung while booting)"
        elif shortfall:
            failure += "; " + _shortfall_text(plan.roi_insns or 0, shortfall, region_open)
        return failure
    if result.returncode != 0 and not result.shutdown_hung:
        return qm.qemu_failed_message(result)
    if status is None:
        stage1 = re.search(r"=== PYSCHED STAGE1 FAILED: (.*) ===", text)
        if stage1:
            return f"the guest's stage 1 failed: {stage1.group(1)}"
        return ("the guest did not reach its end (no '=== PYSCHED EXIT' line on the "
                "console): it crashed or powered off early")
    if status != 0:
        if plan.workload is None:
            return f"the command exited with status {status} in the guest"
        said = _WORKLOAD_MESSAGE_RE.findall(con.guest_messages(text))
        return (f"the workload exited with status {status} in the guest"
                + (f": {said[-1].strip()}" if said else ""))
    return None


def judge_outcome(plan: RunPlan, failure: str | None, summary: dict[str, Any],
                  text: str) -> dict[str, Any]:
    """The manifest's ``outcome``: the run's failure, or the workload's success criterion
    judged (the guest's part by its exit status, the host peer's by
    :func:`pysched.capture.peers.peer_failure`)."""
    criterion = met = None
    if plan.workload is not None:
        criterion = plan.workload.criterion
        peer = summary.get("peer") if summary else None
        log = ""
        if peer is not None and (plan.out / prs.PEER_LOG).is_file():
            log = (plan.out / prs.PEER_LOG).read_text(errors="replace")
        peer_failed = prs.peer_failure(peer, log, plan.params) if failure is None else None
        if peer_failed is not None:
            failure = f"{plan.workload.name}: {peer_failed} (success: {criterion})"
        met = failure is None if con.guest_exit_status(text) is not None else None
    return {"status": "ok" if failure is None else "failed", "failure": failure,
            "criterion": criterion, "criterion_met": met}


def report(plan: RunPlan, args: argparse.Namespace, booted: Booted, text: str,
           failure: str | None, shortfall: dict[str, int] | None, region_open: bool,
           hints: list[str]) -> int:
    """Tell the user how the run went; the exit status."""
    result = booted.result
    if shortfall and not result.timed_out:
        err("warning: " + _shortfall_text(plan.roi_insns or 0, shortfall, region_open))
    if result.shutdown_hung:
        err("warning: the guest did not power off after it was done; QEMU was stopped "
            "(the trace is complete: the region had ended)")
    if failure is not None:
        _report_failure(text, plan.out / CONSOLE_LOG, result, plan.out, booted.summary)
        for h in hints:
            err(f"note: {h}")
        err(f"error: {failure}")
        return EXIT_RUN_FAILED
    print(f"pysched trace: done in {result.wall_seconds:.1f} s; trace in {plan.out}",
          file=sys.stderr)
    return 0


def _shortfall_text(bound: int, shortfall: dict[str, int], open_region: bool) -> str:
    """Which vCPUs fell short of ``--roi-insns``, and what to do about it."""
    short = ", ".join(f"vCPU {v} {n:,}" for v, n in shortfall.items())
    if open_region:
        head = (f"the region was still open: --roi-insns waits for every vCPU to retire "
                f"{bound:,} instructions in it, and some had fewer ({short})")
    else:
        head = (f"the region ended before every vCPU retired --roi-insns {bound:,} "
                "instructions in it (the command, the workload, its host peer or the guest's "
                f"time limit ended it first): {short}")
    return head + ("; a vCPU that stays idle retires few: lower --roi-insns, use fewer "
                   "--vcpus, or give more --timeout")


def _report_failure(text: str, console_path: Path, result: qm.QemuResult, out: Path,
                    summary: dict[str, Any]) -> None:
    """Show what the guest (and the peer) printed, for a failed run."""
    # A workload prints before and after its region, so show the guest's messages without
    # the /proc snapshots rather than only the region's output.
    messages = con.guest_messages(text) if con.BEGIN_MARK in text else text
    if messages.strip():
        err(f"last lines the guest printed ({console_path}):\n{con.tail_lines(messages, 40)}")
    peer = summary.get("peer") if summary else None
    if peer is not None and (out / prs.PEER_LOG).is_file():
        log = (out / prs.PEER_LOG).read_text(errors="replace")
        if log.strip():
            err(f"the host peer's log ({out / prs.PEER_LOG}):\n{con.tail_lines(log, 15)}")
    if result.stderr.strip() and result.returncode == 0:
        err(f"QEMU stderr:\n{result.stderr.strip()}")


__all__ = ["EXIT_RUN_FAILED", "EXIT_USAGE", "err", "failure_hints", "judge_outcome", "report",
           "roi_bound_status", "run_failure"]
