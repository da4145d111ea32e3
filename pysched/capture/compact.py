"""Re-encoding a trace's ``exec`` parts in the successor encoding at a higher zstd level, and
its ``insns`` and ``mem`` parts compactly.

The plugin writes ``exec`` parts in the successor encoding of :mod:`pysched.trace.exec_codec`
(``exec-successor/2``: columns ``code`` and ``run``, byte stream split) at its
``exec_zstd=`` level, 9 by default (older plugins wrote them at ``zstd=``, 1 by default);
re-written at a higher level they shrink further. Parts written by plugins before that encoding hold
``exec-successor/1`` or the plain ``block`` column: they are re-written in
``exec-successor/2``, checked to decode to the same rows before they replace the plugin's.
The decoded rows, the one row group per file and the ``pysched.*`` key/value metadata (but
the encoding) stay as they were, so every reader and ``pysched check`` see the same trace.

The ``insns`` parts are re-written at the level in the gap encoding of
:mod:`pysched.trace.insns_codec`, which the plugin writes; a plain part (older plugins') is
checked to decode to the same rows first, and one that does not (an older plugin could cut a
block's rows between two parts) stays plain.

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

from pysched.trace import exec_codec, insns_codec, mem_codec
from pysched.trace.symbol_files import recompress_system_map
from pysched.trace.reader import Part, Trace
from pysched.trace.schema import TABLES

#: zstd level of re-encoded parts (9: about 0.2 s per 4 million rows on one core).
DEFAULT_LEVEL = 9
#: Rows a page may hold: more than a part ever has, so that pages end at their byte size.
PAGE_ROWS = 1 << 40


def compact_part(path: Path, level: int = DEFAULT_LEVEL) -> tuple[int, int]:
    """Re-encode one ``exec`` part in place (written beside it, then renamed over it).

    Parameters
    ----------
    path : Path
        An ``exec/vVVV-NNNNNN.parquet`` file, plain or in a successor encoding.
    level : int
        zstd level (1-22).

    Returns
    -------
    tuple of int
        Bytes before and after.

    Raises
    ------
    ValueError
        When the part is not an ``exec`` part (a ``block`` column, or a successor encoding's
        two, in one row group), it does not decode, or the re-encoded part does not decode to
        its rows; nothing is replaced then.
    """
    pf = pq.ParquetFile(path)
    names = pf.schema_arrow.names
    meta = pf.metadata.metadata or {}
    raw = meta.get(mem_codec.META_ENCODING.encode())
    encoding = raw.decode(errors="replace") if raw is not None else None
    schema = exec_codec.ENCODED_SCHEMAS.get(encoding) if encoding is not None else None
    want = schema.names if schema is not None else ["block"]
    if names != want or pf.metadata.num_row_groups > 1:
        raise ValueError(f"{path}: not an exec part (a 'block' column, or a successor "
                         f"encoding's two, in one row group; encoding {encoding!r}, columns "
                         f"{names})")
    table = pf.read()  # the file's key/value metadata comes along as schema metadata
    before = path.stat().st_size
    if encoding != exec_codec.EXEC_SUCCESSOR:
        if encoding is None:
            blocks = table.column("block").to_numpy()
        else:
            rows = meta.get(exec_codec.META_ROWS.encode(), b"")
            if not rows.strip().isdigit():
                raise ValueError(f"{path}: metadata {exec_codec.META_ROWS} is {rows!r}, not a "
                                 "row count")
            try:
                blocks = exec_codec.decode_exec(table, int(rows), encoding)
            except ValueError as exc:
                raise ValueError(f"{path}: does not decode: {exc}") from None
        out = exec_codec.encode_exec(blocks)
        back = exec_codec.decode_exec(out, len(blocks))
        if not np.array_equal(back, blocks):
            raise ValueError(f"{path}: the successor encoding does not decode to the same "
                             "rows; the part is left as the plugin wrote it")
        keep = _pysched_metadata(meta)
        table = out.replace_schema_metadata({**keep, **out.schema.metadata})
    return before, _replace_part(path, table, level,
                                 {c: "BYTE_STREAM_SPLIT" for c in table.column_names})


def _pysched_metadata(meta: dict[bytes, bytes] | None) -> dict[bytes, bytes]:
    """A part's key/value metadata without Arrow's own schema entry (rewritten on write)."""
    return {k: v for k, v in (meta or {}).items() if not k.startswith(b"ARROW:")}


def _replace_part(path: Path, table: pa.Table, level: int,
                  column_encoding: dict[str, str] | None = None,
                  dictionary: list[str] | None = None) -> int:
    """Write ``table`` as one row group beside ``path``, rename it over ``path``; its size.
    Columns in ``dictionary`` are dictionary-encoded, the others as ``column_encoding`` says
    (default plain)."""
    tmp = path.with_name(path.name + ".tmp")
    # pages end at the default 1 MiB, not at 20,000 rows: zstd compresses each page apart
    # (the plugin's writer does the same, qemu-plugin/parquet_writer.cc)
    pq.write_table(table, tmp, compression="zstd", compression_level=level,
                   use_dictionary=dictionary or False, column_encoding=column_encoding,
                   row_group_size=max(1, table.num_rows), write_statistics=False,
                   write_page_checksum=True, max_rows_per_page=PAGE_ROWS)
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


def compact_insns_part(trace: Trace, part: Part,
                       level: int = DEFAULT_LEVEL) -> tuple[int, int, bool]:
    """Re-write one ``insns`` part gap-encoded at zstd ``level`` (beside it, then renamed over
    it).

    ``part`` is one of ``trace.parts("insns")``. A plain part is encoded, and replaced only if
    the encoding decodes to its rows (not when a block's rows are out of order or cut between
    parts: then it is left as it is); an encoded part is re-written at ``level``. Returns the
    bytes before and after, and whether a plain part was encoded.
    """
    before = part.path.stat().st_size
    names = TABLES["insns"].schema.names
    pf = pq.ParquetFile(part.path)
    meta = _pysched_metadata(pf.metadata.metadata)
    if part.encoding is not None:
        encoded = pf.read(columns=insns_codec.ENCODED_SCHEMA.names)
        was_plain = False
    else:
        plain = pf.read(columns=names)
        encoded = insns_codec.encode_insns(plain)
        try:
            back = insns_codec.decode_insns(encoded, trace.block_vaddr)
        except ValueError:
            return before, before, False
        if not all(np.array_equal(back.column(c).to_numpy(), plain.column(c).to_numpy())
                   for c in names):
            return before, before, False
        meta[mem_codec.META_ENCODING.encode()] = insns_codec.INSNS_GAP.encode()
        was_plain = True
    after = _replace_part(part.path, encoded.replace_schema_metadata(meta), level,
                          {"block": "DELTA_BINARY_PACKED"}, dictionary=["size", "flags", "pgap"])
    return before, after, was_plain


def compact_trace(trace_dir: Path, level: int = DEFAULT_LEVEL) -> dict[str, Any]:
    """Re-encode every ``exec``, ``insns`` and ``mem`` part of a trace directory, and its kernel
    map.

    Parameters
    ----------
    trace_dir : Path
        The trace directory.
    level : int
        zstd level (1-22).

    Returns
    -------
    dict
        ``{"table": "exec", "encoding": "exec-successor/2", "zstd_level": level,
        "parts": n, "bytes_before": b, "bytes_after": a}`` for the manifest, with
        ``"insns": {"encoding": "insns-gap/1", "parts": n, "encoded": k, "bytes_before": b,
        "bytes_after": a}`` (``k`` plain parts encoded), ``"mem": {"encoding": ..., "parts": n,
        "bytes_before": b, "bytes_after": a}`` when the trace has data accesses, and
        ``"symbols": {"system_map": "System.map.xz", "bytes_before": b, "bytes_after": a}``
        when its ``System.map.gz`` was re-written.

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
        "table": "exec", "encoding": exec_codec.EXEC_SUCCESSOR, "zstd_level": level, "parts": n,
        "bytes_before": total_before, "bytes_after": total_after}
    trace = Trace.open(trace_dir)
    mem_parts = trace.parts("mem")
    if mem_parts:
        sizes = [compact_mem_part(trace, part, level) for part in mem_parts]
        summary["mem"] = {"encoding": mem_codec.MEM_SITE_DELTA, "parts": len(sizes),
                          "bytes_before": sum(b for b, _ in sizes),
                          "bytes_after": sum(a for _, a in sizes)}
    # last: the mem parts' encoding reads insns through the parts listed when it opened
    insns = [compact_insns_part(trace, part, level) for part in trace.parts("insns")]
    summary["insns"] = {"encoding": insns_codec.INSNS_GAP, "parts": len(insns),
                        "encoded": sum(done for _, _, done in insns),
                        "bytes_before": sum(b for b, _, _ in insns),
                        "bytes_after": sum(a for _, a, _ in insns)}
    symbols = recompress_system_map(trace_dir)
    if symbols is not None:
        summary["symbols"] = symbols
    return summary


__all__ = ["DEFAULT_LEVEL", "compact_insns_part", "compact_mem_part", "compact_part",
           "compact_trace"]
