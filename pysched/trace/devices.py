"""Which device each ``device_requests`` row wrote to, and which rows are virtio queue kicks.

The plugin records, per write, the guest-physical address (or port) and the name of QEMU's
memory region it reached (``plugin.json``'s ``device_regions``: ``virtio-pci-notify-virtio-blk``
for the notify area of a virtio block device); the manifest's ``devices`` (the guest's
``/proc/iomem``, ``/proc/ioports`` and PCI devices read before the region,
:mod:`pysched.capture.devices`) gives the PCI slot whose BAR holds the address and the driver
bound to it. See qemu-plugin/README.md, ``device_requests``.
"""
from __future__ import annotations

import re
from typing import Any

import pandas as pd

from .reader import Trace
from .schema import SPACE_MMIO, SPACE_PORT

#: The start of QEMU's name for a virtio-pci notify area (modern: ``virtio-pci-notify-<dev>``,
#: its port form ``virtio-pci-notify-pio-<dev>``).
NOTIFY_REGION = "virtio-pci-notify"
#: The legacy virtio-pci register a kick writes the queue index to: offset 16 of the I/O BAR.
LEGACY_NOTIFY_OFFSET = 16
_SLOT_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def _containing(ranges: list[dict[str, Any]], addr: int) -> list[dict[str, Any]]:
    """The ranges holding ``addr``, outermost first."""
    return sorted((r for r in ranges if r["start"] <= addr <= r["end"]), key=lambda r: r["depth"])


def locate(devices: dict[str, Any] | None, space: int, addr: int) -> dict[str, Any]:
    """Where a write to ``addr`` (a guest-physical address, or a port when ``space`` is
    :data:`~pysched.trace.schema.SPACE_PORT`) went, from a manifest's ``devices``.

    Returns
    -------
    dict
        ``slot`` (the PCI slot whose BAR holds it), ``driver`` (the virtio driver of that
        device, else its PCI driver), ``resource`` (the innermost range's name, e.g.
        ``virtio-pci-modern``) and ``offset`` (from that range's start); None where unknown.
    """
    found: dict[str, Any] = {"slot": None, "driver": None, "resource": None, "offset": None}
    if not devices:
        return found
    within = _containing(devices.get("iomem" if space == SPACE_MMIO else "ioports") or [], addr)
    if within:
        found["resource"], found["offset"] = within[-1]["name"], addr - within[-1]["start"]
    slots = [r["name"] for r in within if _SLOT_RE.match(r["name"])]
    if slots:
        found["slot"] = slots[-1]
        for dev in devices.get("pci") or []:
            if dev.get("slot") == found["slot"]:
                found["driver"] = dev.get("virtio_driver") or dev.get("driver")
    return found


def device_requests(trace: Trace) -> pd.DataFrame:
    """The trace's ``device_requests`` rows with what they wrote to.

    Returns
    -------
    pandas.DataFrame
        The table's columns, then ``region_name`` (``plugin.json``'s name of ``region``; None
        for a port write), the columns of :func:`locate` (None without the manifest's
        ``devices``), and ``kick``: True for a virtio queue notification (a write to a
        ``virtio-pci-notify`` region, or to offset 16 of a legacy virtio-pci port range), whose
        ``value`` is the queue's index.
    """
    df = trace.df("device_requests")
    names = list((trace.plugin_info or {}).get("device_regions") or [])
    keys = list(zip(df["space"].tolist(), df["paddr"].tolist()))
    region_name = [names[r] if r < len(names) else None for r in df["region"].tolist()]
    devices = (trace.manifest or {}).get("devices")
    where = {k: locate(devices, *k) for k in set(keys)}
    df["region_name"] = pd.Series(region_name, index=df.index, dtype=object)
    for col in ("slot", "driver", "resource", "offset"):
        df[col] = pd.Series([where[k][col] for k in keys], index=df.index, dtype=object)
    df["kick"] = pd.Series([_is_kick(n, s, where[(s, a)]) for n, (s, a) in
                            zip(region_name, keys)], index=df.index, dtype=bool)
    return df


def _is_kick(region_name: str | None, space: int, where: dict[str, Any]) -> bool:
    """A write to a virtio-pci notify area: modern (QEMU's region name) or legacy (port)."""
    if region_name is not None and region_name.startswith(NOTIFY_REGION):
        return True
    return (space == SPACE_PORT and where["offset"] == LEGACY_NOTIFY_OFFSET
            and (where["resource"] or "").startswith("virtio-pci"))
