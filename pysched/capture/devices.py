"""The guest's devices as the harness read them before the region, for the manifest.

``guest/workloads/lib.sh`` (``device_snapshot``) reads ``/proc/iomem`` and ``/proc/ioports``
(every range the kernel knows: RAM, and each PCI device's BARs under its slot, with the driver's
name for the part it claimed) and one line per PCI device from ``/sys/bus/pci/devices``::

    0000:00:03.0 0x1af4 0x1001 0x010000 virtio-pci virtio_blk

(slot, vendor, device, class, the driver bound to it, and for a virtio device the virtio driver
of its function; ``-`` where there is none). The manifest keeps them parsed under ``devices``;
:func:`pysched.trace.devices.device_requests` uses them to name the device a ``device_requests``
row wrote to.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# "  fe000000-fe003fff : 0000:00:02.0": the indentation is the nesting (two spaces a level).
_RANGE_RE = re.compile(r"^( *)([0-9a-fA-F]+)-([0-9a-fA-F]+) : (.*)$")


def parse_ranges(text: str) -> list[dict[str, Any]]:
    """Parse ``/proc/iomem`` or ``/proc/ioports``.

    Parameters
    ----------
    text : str
        The file's contents (read as root: real addresses).

    Returns
    -------
    list of dict
        One ``{"start", "end", "name", "depth"}`` per line, in the file's order; ``end`` is
        inclusive and ``depth`` the nesting level (0 at the top).
    """
    ranges = []
    for line in text.splitlines():
        m = _RANGE_RE.match(line.rstrip())
        if m:
            ranges.append({"start": int(m.group(2), 16), "end": int(m.group(3), 16),
                           "name": m.group(4).strip(), "depth": len(m.group(1)) // 2})
    return ranges


def parse_pci(text: str) -> list[dict[str, str | None]]:
    """Parse the harness's PCI device lines (module docstring).

    Returns
    -------
    list of dict
        ``{"slot", "vendor", "device", "class", "driver", "virtio_driver"}`` per device; a
        driver is None where the line has ``-``.
    """
    devices = []
    for line in text.splitlines():
        f = line.split()
        if len(f) != 6:
            continue
        slot, vendor, device, cls, drv, vdrv = f
        devices.append({"slot": slot, "vendor": vendor, "device": device, "class": cls,
                        "driver": None if drv == "-" else drv,
                        "virtio_driver": None if vdrv == "-" else vdrv})
    return devices


def manifest_devices(sections: Mapping[str, str | None]) -> dict[str, Any] | None:
    """The manifest's ``devices`` from :func:`pysched.capture.console.proc_sections`.

    Returns
    -------
    dict or None
        ``{"iomem": [...], "ioports": [...], "pci": [...]}``, or None when the guest printed no
        device snapshot (a guest with an older ``lib.sh``, or one that stopped before it).
    """
    if sections.get("iomem_before") is None:
        return None
    return {"iomem": parse_ranges(sections.get("iomem_before") or ""),
            "ioports": parse_ranges(sections.get("ioports_before") or ""),
            "pci": parse_pci(sections.get("pci_before") or "")}
