"""``pysched devices TRACE``: each device vector's ``/proc/interrupts`` line, and per device how
many of its interrupts answer a kick of the trace (:mod:`pysched.trace.completions`)."""
from __future__ import annotations

import argparse
import math
import sys
from typing import TextIO

from pysched._argtypes import path_text

from .completions import MAPPED, Completions, link_completions
from .checker.preflight import preflight
from .errors import TraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``pysched devices``."""
    parser.add_argument("trace", metavar="DIR", type=path_text,
                        help="trace directory with device_requests and the manifest's "
                             "/proc/interrupts snapshots")


def _vector_line(r: object) -> str:
    head = f"  vCPU {r.vcpu} vector {r.vector}: {r.entries:,} entries"
    if r.status == MAPPED:
        return (f"{head} -> {r.name} (IRQ {r.irq}, {r.counted:,} counted on CPU {r.vcpu} "
                f"between the snapshots), {r.driver} {r.slot}")
    return f"{head} -> refused, {r.status}" + (f": {r.candidates}" if r.candidates else "")


def _us(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:,.0f} us"


def format_report(name: str, found: Completions) -> str:
    """The text ``pysched devices`` prints for ``found``, a trace called ``name``."""
    vec = found.vectors
    out = [f"{name}: {len(vec)} device vector(s), {int((vec['status'] == MAPPED).sum())} "
           "mapped to a /proc/interrupts line"]
    out += [_vector_line(r) for r in vec.itertuples(index=False)]
    for r in found.report().itertuples(index=False):
        if r.slot == "?":
            out.append(f"device unknown: {r.interrupts:,} interrupts of refused vectors, "
                       f"{r.kicks:,} kicks of no known device")
            continue
        out.append(
            f"{r.slot} {r.driver}: {r.interrupts:,} interrupts: {r.completions:,} completions "
            f"({r.linked:,} linked to a kick, {r.before_first_kick:,} before the queue's first "
            f"kick, {r.no_kick_pending:,} with no kick pending), {r.arrivals:,} arrivals, "
            f"{r.config:,} config")
        out.append(
            f"  {r.kicks:,} kicks: {r.kicks_linked:,} linked, {r.kicks_after_last:,} after "
            f"their queue's last interrupt, {r.kicks_no_vector:,} without a mapped interrupt, "
            f"{r.rx_refills:,} receive refills; kicks per linked completion "
            f"{'-' if math.isnan(r.kicks_per_completion) else f'{r.kicks_per_completion:.2f}'}"
            f"; latency (host time) median {_us(r.latency_median_us)}, "
            f"p90 {_us(r.latency_p90_us)}")
    if vec.empty and found.kicks.empty:
        out.append("no device interrupt and no kick in the trace")
    return "\n".join(out)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print the vector map and the per-device summary; 0, or 1 when the trace cannot be read
    or the checker refuses it."""
    out = out or sys.stdout
    try:
        trace, _ = preflight(args.trace)
        found = link_completions(trace)
    except TraceError as exc:
        print(f"pysched devices: error: {exc}", file=sys.stderr)
        return 1
    if not ((trace.manifest or {}).get("interrupts") or {}).get("after"):
        print(f"{args.trace}: manifest.json has no /proc/interrupts snapshots: no vector can "
              "be mapped to a device", file=out)
    print(format_report(str(args.trace), found), file=out)
    return 0
