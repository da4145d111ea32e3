"""Re-encoding a trace's ``exec`` parts at a higher zstd level, and its ``mem`` parts compactly.

The plugin writes ``exec.block`` with Parquet's ``BYTE_STREAM_SPLIT`` encoding (the four bytes
of every id in four streams) at its ``zstd=`` level, 1 by default, so that its writer thread
keeps up with the guest. Re-written at a higher level the column shrinks further: a ``find``
trace's 21.8 MB of ``exec`` parts became 17.3 MB at level 9 and 15.7 MB at level 19 (which took
minutes). Traces written by plugins older than the split encoding used dictionary encoding,
whose bit-packed indices leave zstd nothing to match (about 0.6-0.8 byte per block execution on
OS-intensive code, against 0.3): for them the re-encoding makes ``exec`` about three times
smaller. The rows, the column type, the one row group per file and the ``pysched.*`` key/value
metadata stay as they were, so every reader and ``pysched check`` see the same trace.

The ``mem`` parts (data accesses) are re-written in the site-delta encoding of
:mod:`pysched.trace.mem_codec` (2.5-3.5 times smaller), checked to decode to the same rows
before they replace the plugin's. The kernel's ``System.map.gz`` becomes ``System.map.xz``
(:mod:`pysched.trace.symbol_files`).

``pysched trace --compact`` does it after the run; the shipped traces in ``data/`` are
compacted.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pysched.trace import mem_codec
from pysched.trace.symbol_files import recompress_system_map
from pysched.trace.reader import Part, Trace

#: zstd level of re-encoded parts (9: about 0.2 s per 4 million rows on one core).
DEFAULT_LEVEL = 9


def compact_part(path: Path, level: int = DEFAULT_LEVEL) -> tuple[int, int]:
    """Re-encode one ``exec`` part in place (written beside it, then renamed over it).

    Parameters
    ----------
    path : Path
        An ``exec/vVVV-NNNNNN.parquet`` file.
    level : int
        zstd level (1-22).

    Returns
    -------
    tuple of int
        Bytes before and after.

    Raises
    ------
    ValueError
        When the part is not an ``exec`` part (a single ``block`` column, one row group).
    """
    pf = pq.ParquetFile(path)
    if pf.schema_arrow.names != ["block"] or pf.metadata.num_row_groups > 1:
        raise ValueError(f"{path}: not an exec part (one 'block' column in one row group)")
    table = pf.read()  # the file's key/value metadata comes along as schema metadata
    before = path.stat().st_size
    return before, _replace_part(path, table, level, {"block": "BYTE_STREAM_SPLIT"})


def _replace_part(path: Path, table: pa.Table, level: int,
                  column_encoding: dict[str, str] | None = None) -> int:
    """Write ``table`` as one row group beside ``path``, rename it over ``path``; its size."""
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd", compression_level=level,
                   use_dictionary=False, column_encoding=column_encoding,
                   row_group_size=max(1, table.num_rows), write_statistics=False,
                   write_page_checksum=True)
    os.replace(tmp, path)
    return path.stat().st_size


def compact_mem_part(trace: Trace, part: Part, level: int = DEFAULT_LEVEL) -> tuple[int, int]:
    """Re-write one ``mem`` part in the site-delta encoding (beside it, then renamed over it).

    ``part`` is one of ``trace.parts("mem")`` (the trace's exec stream gives the instructions'
    addresses) and ``level`` the zstd level; returns the bytes before and after. The encoded
    rows are decoded and compared with the plugin's first: when they differ, ValueError is
    raised and nothing is replaced. A part already encoded is left as it is.
    """
    before = part.path.stat().st_size
    if part.encoding is not None:
        return before, before
    plain = pq.ParquetFile(part.path).read()  # its key/value metadata comes along
    assert part.vcpu is not None
    icount = plain.column("icount").to_numpy()
    rows = mem_codec.ExecRows.of(trace, part.vcpu)
    encoded = mem_codec.encode_mem(plain, rows)
    back = mem_codec.decode_mem(encoded, int(icount[0]) if len(icount) else 0, rows)
    if not all(np.array_equal(back.column(c).to_numpy(), plain.column(c).to_numpy())
               for c in ("icount", "paddr", "size", "store")):
        raise ValueError(f"{part.path}: the compact encoding does not decode to the same rows; "
                         "the part is left as the plugin wrote it")
    return before, _replace_part(part.path, encoded, level)


def compact_trace(trace_dir: Path, level: int = DEFAULT_LEVEL) -> dict[str, Any]:
    """Re-encode every ``exec`` and ``mem`` part of a trace directory, and its kernel map.

    Parameters
    ----------
    trace_dir : Path
        The trace directory.
    level : int
        zstd level (1-22).

    Returns
    -------
    dict
        ``{"table": "exec", "encoding": "BYTE_STREAM_SPLIT", "zstd_level": level,
        "parts": n, "bytes_before": b, "bytes_after": a}`` for the manifest, with
        ``"mem": {"encoding": ..., "parts": n, "bytes_before": b, "bytes_after": a}`` when
        the trace has data accesses, and ``"symbols": {"system_map": "System.map.xz",
        "bytes_before": b, "bytes_after": a}`` when its ``System.map.gz`` was re-written.

    Raises
    ------
    ValueError
        For a level outside 1-22 or a file that is not an exec part.
    FileNotFoundError
        When the directory has no ``exec`` table.
    """
    if not 1 <= level <= 22:
        raise ValueError(f"zstd level must be 1-22 (got {level})")
    exec_dir = Path(trace_dir) / "exec"
    if not exec_dir.is_dir():
        raise FileNotFoundError(f"{exec_dir} is missing: not a trace directory")
    total_before = total_after = n = 0
    for part in sorted(exec_dir.glob("v*-*.parquet")):
        b, a = compact_part(part, level)
        total_before += b
        total_after += a
        n += 1
    summary: dict[str, Any] = {
        "table": "exec", "encoding": "BYTE_STREAM_SPLIT", "zstd_level": level, "parts": n,
        "bytes_before": total_before, "bytes_after": total_after}
    trace = Trace.open(trace_dir)
    mem_parts = trace.parts("mem")
    if mem_parts:
        sizes = [compact_mem_part(trace, part, level) for part in mem_parts]
        summary["mem"] = {"encoding": mem_codec.MEM_SITE_DELTA, "parts": len(sizes),
                          "bytes_before": sum(b for b, _ in sizes),
                          "bytes_after": sum(a for _, a in sizes)}
    symbols = recompress_system_map(trace_dir)
    if symbols is not None:
        summary["symbols"] = symbols
    return summary


__all__ = ["DEFAULT_LEVEL", "compact_mem_part", "compact_part", "compact_trace"]
