"""The guest kernel's symbols in a trace: ``System.map.gz`` (the guest's ``System.map`` moved by
the KASLR slide the plugin found, so that it holds the traced boot's addresses) and
``modules.map.gz`` (the loaded modules' ``/proc/kallsyms`` lines the Debian guest sends).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from pysched.capture import guest as gst
from pysched.trace.symbol_files import moved_system_map, slide_unknown_reason, traced_slide

SYSTEM_MAP_GZ = "System.map.gz"
MODULES_MAP_GZ = "modules.map.gz"


def _plugin_info(out: Path) -> dict | None:
    """``plugin.json`` of the trace being written (None: missing or unreadable)."""
    try:
        return json.loads((out / "plugin.json").read_text())
    except (OSError, ValueError):
        return None


def write_running_map(sysmap: str | Path, trace_dir: str | Path) -> Path:
    """Write ``TRACE_DIR/System.map.gz``: ``sysmap`` (a ``System.map`` or a saved
    ``/proc/kallsyms``; module lines are left out) moved by the slide the plugin found
    (``plugin.json``; 0 when it has no ``kaslr`` record, see
    :func:`~pysched.trace.symbol_files.traced_slide`), for a trace recorded by running QEMU
    with the plugin directly.

    Raises
    ------
    ValueError
        When ``plugin.json`` says the slide was not found (the message names the file).
    """
    sysmap, trace_dir = Path(sysmap), Path(trace_dir)
    info = json.loads((trace_dir / "plugin.json").read_text())
    slide = traced_slide(info)
    if slide is None:
        raise ValueError(f"{trace_dir / 'plugin.json'}: the plugin did not find the kernel's "
                         f"slide ({slide_unknown_reason(info)})")
    kept = [ln for ln in sysmap.read_text().splitlines() if not ln.rstrip().endswith("]")]
    data = moved_system_map("\n".join(kept), slide).encode()
    out = trace_dir / SYSTEM_MAP_GZ
    out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return out


def _map_address(src: Path, name: str) -> int | None:
    for line in src.read_text().splitlines():
        f = line.split()
        if len(f) >= 3 and f[2] == name:
            return int(f[0], 16)
    return None


def save_symbols(guest: gst.GuestImage, symbols: Path, out: Path) -> dict[str, Any]:
    """Write the kernel's and the modules' symbols into the trace (gzip); their file names.

    ``System.map.gz`` holds the running kernel's addresses: the guest's ``System.map`` moved
    by the slide the plugin found (KASLR; 0 with ``nokaslr``). The Debian guest sends its
    ``/proc/kallsyms`` lines of the modules and of ``_stext``; the latter checks the slide
    (``slide_kallsyms``: the slide that ``_stext`` gives, to compare with ``slide``).
    """
    kernel_symbols: dict[str, Any] = {"system_map": None, "modules": None, "slide": None,
                                      "slide_kallsyms": None}
    # an unknown slide keeps the map as it is: `pysched check` (health) fails such a trace;
    # without plugin.json (the plugin did not run) the slide is not known either
    info = _plugin_info(out)
    slide = None if info is None else traced_slide(info)
    if guest.system_map.is_file():
        data = (moved_system_map(guest.system_map.read_text(), slide).encode() if slide
                else guest.system_map.read_bytes())
        (out / SYSTEM_MAP_GZ).write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
        kernel_symbols["system_map"] = SYSTEM_MAP_GZ
        kernel_symbols["slide"] = slide
    if symbols.is_file() and symbols.stat().st_size > 0:
        modules, kernel = [], []
        for line in symbols.read_text(errors="replace").splitlines():
            (modules if line.rstrip().endswith("]") else kernel).append(line)
        stext = _map_address(guest.system_map, "_stext") if guest.system_map.is_file() else None
        for line in kernel:
            f = line.split()
            if len(f) == 3 and f[2] == "_stext" and stext is not None:
                kernel_symbols["slide_kallsyms"] = (int(f[0], 16) - stext) % 2**64
        if modules:
            tmp = out / ".modules.txt"
            tmp.write_text("\n".join(modules) + "\n")
            _gzip_file(tmp, out / MODULES_MAP_GZ)
            tmp.unlink()
            kernel_symbols["modules"] = MODULES_MAP_GZ
    return kernel_symbols


def _gzip_file(src: Path, dest: Path) -> None:
    """gzip ``src`` into ``dest`` reproducibly (no name, mtime 0)."""
    with open(src, "rb") as f:
        data = f.read()
    dest.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


__all__ = ["MODULES_MAP_GZ", "SYSTEM_MAP_GZ", "save_symbols", "write_running_map"]
