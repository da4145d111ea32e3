"""Check ``devices``: ``device_requests`` rows belong to known vCPUs and hold possible values.

Their order and place in each vCPU's stream (sorted ``icount``, ``exec_row`` and ``time_ns``,
the write instruction at ``icount - 1`` at ``pc``) are check ``icount``'s, as for every event
table (:mod:`.vcpu`). Here: every vCPU with rows has an exec stream and is one of the
``plugin.json``'s ``vcpus``; ``space`` is memory-mapped or port I/O; ``size`` is 1, 2, 4 or 8
bytes; a memory-mapped write names a region of ``plugin.json``'s ``device_regions`` and a port
write none (qemu-plugin/README.md, ``device_requests``). A trace without the table (recorded
before the plugin wrote it) passes.
"""
from __future__ import annotations

import numpy as np

from ..reader import Trace
from ..schema import REGION_NONE, SPACE_MMIO, SPACE_PORT
from .findings import Location, Report

DEVICES = "devices"
TABLE = "device_requests"


def check_devices(trace: Trace, report: Report) -> None:
    """Run check ``devices`` (module docstring)."""
    report.start(DEVICES)
    info = trace.plugin_info or {}
    nvcpus = info.get("vcpus")
    regions = info.get("device_regions")
    nregions = len(regions) if isinstance(regions, list) else None
    for v in trace.all_vcpus():
        if not trace.num_rows(TABLE, v):
            continue
        unknown = ([] if trace.parts("exec", v) else ["has no exec stream"]) + (
            [f"is not one of the {nvcpus} vCPUs of plugin.json"]
            if isinstance(nvcpus, int) and v >= nvcpus else [])
        if unknown:
            report.add(DEVICES, Location(TABLE, v), f"rows of vCPU {v}, which "
                                                    f"{' and '.join(unknown)}")
        t = trace.table(TABLE, v)
        space, size = t.column("space").to_numpy(), t.column("size").to_numpy()
        region = t.column("region").to_numpy()

        def loc(i: int, t=t, v=v) -> Location:
            return Location(TABLE, v, row=i, icount=int(t.column("icount")[i].as_py()))

        report.add_mask(DEVICES, (space != SPACE_MMIO) & (space != SPACE_PORT), lambda i: (
            loc(i), f"space {space[i]} is neither 0 (memory-mapped) nor 1 (port)"))
        report.add_mask(DEVICES, ~np.isin(size, [1, 2, 4, 8]), lambda i: (
            loc(i), f"size {size[i]} is not 1, 2, 4 or 8 bytes"))
        report.add_mask(DEVICES, (space == SPACE_PORT) & (region != REGION_NONE), lambda i: (
            loc(i), f"a port write names region {region[i]}"))
        if nregions is not None:
            report.add_mask(DEVICES, (space == SPACE_MMIO) & (region >= nregions), lambda i: (
                loc(i), f"region {region[i]} but plugin.json names {nregions} device regions"))
