"""The kernel's symbol map as a trace directory holds it: ``System.map`` plain, gzip or xz.

``pysched trace`` writes ``System.map.gz`` (the guest's map moved by the traced boot's KASLR
slide); ``--compact`` re-writes it as ``System.map.xz`` (0.59 MB against 0.81 MB for Debian's
6.1 kernel), one of the larger files of a short trace. Every reader of the map opens it here,
so the three forms read alike.
"""
from __future__ import annotations

import gzip
import lzma
import os
from pathlib import Path
from typing import IO

#: The file names a trace directory may hold its kernel map under, in the order looked for.
SYSTEM_MAP_NAMES = ("System.map", "System.map.xz", "System.map.gz")
#: The kernel image's symbols are at or above this address (``__START_KERNEL_map``); KASLR
#: moves them all by one slide. Below it are the per-CPU offsets and absolute symbols, which
#: it does not move.
KERNEL_IMAGE = 0xFFFFFFFF80000000


def open_text(path: str | Path, errors: str = "strict") -> IO[str]:
    """``path`` opened for reading text, decompressed by its suffix (``.gz``, ``.xz``)."""
    p = Path(path)
    if p.suffix == ".gz":
        return gzip.open(p, "rt", errors=errors)
    if p.suffix == ".xz":
        return lzma.open(p, "rt", errors=errors)
    return open(p, errors=errors)


def system_map_in(directory: str | Path) -> Path | None:
    """The kernel map file in ``directory`` (first of :data:`SYSTEM_MAP_NAMES`), or None."""
    for name in SYSTEM_MAP_NAMES:
        p = Path(directory) / name
        if p.is_file():
            return p
    return None


def traced_slide(info: dict | None) -> int | None:
    """The kernel's virtual KASLR slide in the traced boot, from ``plugin.json``'s ``kaslr``
    record (``info``: the file's contents): 0 without the record (a trace booted with
    ``nokaslr`` by a plugin that does not look for the slide), None when the plugin looked for
    the slide and did not find it (:func:`slide_unknown_reason` says why). Every reader of the
    slide's value goes through here, so a missing record means the same to all; what an
    unknown slide means is the caller's (a capture keeps the guest's map as it is and
    ``pysched check`` fails the trace; moving a map for an existing trace is refused)."""
    k = (info or {}).get("kaslr")
    if k is None:
        return 0
    if not isinstance(k, dict) or not k.get("found"):
        return None
    return int(k.get("virtual_slide") or 0)


def slide_unknown_reason(info: dict | None) -> str:
    """Why the plugin did not find the slide (``plugin.json``'s ``kaslr.reason``)."""
    k = (info or {}).get("kaslr")
    return (k.get("reason") if isinstance(k, dict) else None) or "no reason given"


def moved_system_map(text: str, slide: int) -> str:
    """``text`` (System.map lines ``ADDRESS TYPE NAME``) with the kernel image's symbols moved
    by ``slide``: the running kernel's addresses, as its ``/proc/kallsyms`` gives them."""
    lines = []
    for line in text.splitlines():
        f = line.split(maxsplit=1)
        try:
            a = int(f[0], 16)
        except (ValueError, IndexError):
            lines.append(line)
            continue
        if a >= KERNEL_IMAGE:
            a = (a + slide) % 2**64
        lines.append(f"{a:016x} {f[1] if len(f) > 1 else ''}".rstrip())
    return "\n".join(lines) + "\n"


def recompress_system_map(directory: str | Path) -> dict[str, int | str] | None:
    """Re-write ``directory/System.map.gz`` as ``System.map.xz`` (xz preset 9e).

    The new file is written beside the old one, decompressed and compared with it, renamed
    into place, and only then is the gzip file removed, so an interrupted run leaves one
    complete map.

    Returns
    -------
    dict or None
        ``{"system_map": "System.map.xz", "bytes_before": b, "bytes_after": a}``, or None when
        the directory holds no ``System.map.gz``.

    Raises
    ------
    ValueError
        When the xz file does not decompress to the gzip file's text.
    """
    src = Path(directory) / "System.map.gz"
    if not src.is_file():
        return None
    text = gzip.decompress(src.read_bytes())
    dest = src.with_name("System.map.xz")
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(lzma.compress(text, preset=9 | lzma.PRESET_EXTREME))
    if lzma.decompress(tmp.read_bytes()) != text:
        tmp.unlink()
        raise ValueError(f"{src}: its xz re-encoding does not decompress to the same map")
    os.replace(tmp, dest)
    before = src.stat().st_size
    src.unlink()
    return {"system_map": dest.name, "bytes_before": before, "bytes_after": dest.stat().st_size}


__all__ = ["KERNEL_IMAGE", "SYSTEM_MAP_NAMES", "moved_system_map", "open_text",
           "recompress_system_map", "slide_unknown_reason", "system_map_in", "traced_slide"]
