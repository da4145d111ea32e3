"""Opening a trace directory: part discovery and validation, then tables on demand."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import exec_codec, insns_codec, mem_codec
from .errors import TraceError
from .schema import (
    META_SCHEMA_VERSION,
    META_TABLE,
    META_VCPU,
    SCHEMA_VERSION,
    STATIC_PART_RE,
    TABLES,
    VCPU_PART_RE,
    TableSpec,
)


@dataclass(frozen=True)
class Part:
    """One part file of a table.

    Attributes
    ----------
    path : pathlib.Path
        The ``.parquet`` file.
    table : str
        Table name.
    vcpu : int or None
        vCPU index from the file name (per-vCPU tables), else None.
    seq : int
        Part number ``NNNNNN`` from the file name.
    num_rows : int
        Rows of the table in the file (from its footer; a successor-encoded ``exec`` part's
        decoded rows, from its metadata).
    encoding : str or None
        The encoding of an ``exec`` part (a key of
        :data:`pysched.trace.exec_codec.ENCODED_SCHEMAS`), a gap-encoded ``insns`` part
        (:data:`pysched.trace.insns_codec.INSNS_GAP`) or a compact ``mem`` part
        (:data:`pysched.trace.mem_codec.MEM_SITE_DELTA`), None for a table's plain columns.
    icount_range : tuple of int or None
        First and last ``icount`` of an encoded part (from its metadata).
    """

    path: Path
    table: str
    vcpu: int | None
    seq: int
    num_rows: int
    encoding: str | None = None
    icount_range: tuple[int, int] | None = None


def _parse_name(spec: TableSpec, path: Path) -> tuple[int | None, int]:
    """Return ``(vcpu, seq)`` from a part file name, or raise naming the file."""
    if spec.per_vcpu:
        m = VCPU_PART_RE.match(path.name)
        if m:
            return int(m.group(1)), int(m.group(2))
        want = "vVVV-NNNNNN.parquet"
    else:
        m = STATIC_PART_RE.match(path.name)
        if m:
            return None, int(m.group(1))
        want = "NNNNNN.parquet"
    raise TraceError(f"{path}: part of table {spec.name!r} must be named {want}")


def _validate_part(spec: TableSpec, path: Path) -> Part:
    """Read a part's footer and check its metadata and column types against ``spec``."""
    vcpu, seq = _parse_name(spec, path)
    try:
        pf = pq.ParquetFile(path)
    except MemoryError:
        raise
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise TraceError(f"{path}: table {spec.name!r}: not a readable Parquet file "
                         f"({exc})") from exc
    meta = {k.decode(errors="replace"): v.decode(errors="replace")
            for k, v in (pf.metadata.metadata or {}).items()}

    version = meta.get(META_SCHEMA_VERSION)
    if version is None:
        raise TraceError(f"{path}: missing metadata key {META_SCHEMA_VERSION!r}")
    if version.strip() != str(SCHEMA_VERSION):
        raise TraceError(f"{path}: {META_SCHEMA_VERSION} is {version!r}, "
                         f"this reader supports {SCHEMA_VERSION}")
    if meta.get(META_TABLE) != spec.name:
        raise TraceError(f"{path}: metadata {META_TABLE} is {meta.get(META_TABLE)!r}, "
                         f"expected {spec.name!r}")
    if spec.per_vcpu:
        raw = meta.get(META_VCPU)
        if raw is None or not raw.strip().isdigit() or int(raw) != vcpu:
            raise TraceError(f"{path}: metadata {META_VCPU} is {raw!r}, "
                             f"expected {vcpu} (from the file name)")

    encoding = meta.get(mem_codec.META_ENCODING)
    columns = spec.schema
    icount_range = None
    num_rows = pf.metadata.num_rows
    if spec.name == "exec" and encoding in exec_codec.ENCODED_SCHEMAS:
        columns = exec_codec.ENCODED_SCHEMAS[encoding]
        raw = meta.get(exec_codec.META_ROWS, "")
        if not raw.strip().isdigit():
            raise TraceError(f"{path}: successor-encoded exec part whose metadata "
                             f"{exec_codec.META_ROWS} is {meta.get(exec_codec.META_ROWS)!r}, "
                             "not a row count")
        num_rows = int(raw)
    elif spec.name == "insns" and encoding == insns_codec.INSNS_GAP:
        columns = insns_codec.ENCODED_SCHEMA
    elif encoding is not None:
        if spec.name != "mem" or encoding != mem_codec.MEM_SITE_DELTA:
            raise TraceError(f"{path}: table {spec.name!r} in an unknown encoding {encoding!r}")
        columns = mem_codec.ENCODED_SCHEMA
        try:
            icount_range = (int(meta[mem_codec.META_FIRST_ICOUNT]),
                            int(meta[mem_codec.META_LAST_ICOUNT]))
        except (KeyError, ValueError):
            raise TraceError(f"{path}: encoded mem part without a valid "
                             f"{mem_codec.META_FIRST_ICOUNT}/{mem_codec.META_LAST_ICOUNT}"
                             ) from None
    have = pf.schema_arrow
    for field in columns:
        idx = have.get_field_index(field.name)
        if idx < 0:
            raise TraceError(f"{path}: missing column {field.name!r} "
                             f"(expected {field.type})")
        if have.field(idx).type != field.type:
            raise TraceError(f"{path}: column {field.name!r} has type {have.field(idx).type}, "
                             f"expected {field.type}")
    return Part(path, spec.name, vcpu, seq, num_rows, encoding, icount_range)


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TraceError(f"{path}: cannot read JSON ({exc})") from exc


class Trace:
    """A validated trace directory (schema version 1).

    Construct with :meth:`Trace.open` (or :func:`open_trace`). Opening reads every part's
    footer, not its data; tables are read when asked for.

    Attributes
    ----------
    path : pathlib.Path
        The trace directory.
    plugin_info : dict or None
        ``plugin.json`` (options, calibration, counters), None when missing.
    manifest : dict or None
        ``manifest.json`` written by the capture step, None when missing.
    prefix : dict of int to (int, int), or None
        Set on a view of an incomplete trace's complete prefix (see
        :meth:`prefix_view`): per vCPU, the exec rows and instructions it keeps.
    """

    def __init__(self, path: Path, parts: dict[str, list[Part]],
                 plugin_info: dict[str, Any] | None, manifest: dict[str, Any] | None,
                 prefix: dict[int, tuple[int, int]] | None = None) -> None:
        self.path = path
        self._parts = parts
        self.plugin_info = plugin_info
        self.manifest = manifest
        self.prefix = prefix
        # Derived data shared by expand/check (e.g. the block index), keyed by name.
        self._cache: dict[Any, Any] = {}

    @classmethod
    def open(cls, path: str | Path) -> Trace:
        """Open and validate a trace directory.

        Parameters
        ----------
        path : str or pathlib.Path
            Directory written by ``libpysched-trace.so``.

        Returns
        -------
        Trace

        Raises
        ------
        TraceError
            When the directory or a required table is missing, a part file is misnamed, has
            the wrong schema version or table/vCPU metadata, or lacks a column or has it with
            another type. The message names the file (and column).
        """
        root = Path(path)
        if not root.is_dir():
            raise TraceError(f"{root}: not a directory")
        parts: dict[str, list[Part]] = {}
        for spec in TABLES.values():
            tdir = root / spec.name
            # Only complete parts count: the writer renames *.tmp when a part is done.
            files = sorted(tdir.glob("*.parquet")) if tdir.is_dir() else []
            found = [_validate_part(spec, f) for f in files]
            if spec.required and not found:
                raise TraceError(f"{tdir}: required table {spec.name!r} has no part files")
            # Numeric order equals name order for fixed-width names and stays right beyond.
            found.sort(key=lambda p: (p.vcpu if p.vcpu is not None else -1, p.seq))
            parts[spec.name] = found
        info = _read_json(root / "plugin.json")
        if info is not None and info.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise TraceError(f"{root / 'plugin.json'}: schema_version is "
                             f"{info.get('schema_version')!r}, this reader supports "
                             f"{SCHEMA_VERSION}")
        return cls(root, parts, info, _read_json(root / "manifest.json"))

    def prefix_view(self, exec_parts: dict[int, int],
                    instructions: dict[int, int]) -> Trace:
        """The same trace cut to a prefix of each vCPU's stream.

        Parameters
        ----------
        exec_parts : dict of int to int
            Per vCPU, how many of its exec parts to keep (vCPUs not named keep none).
        instructions : dict of int to int
            Per vCPU, the instructions those parts retire (the ``mem`` table is cut there).

        Returns
        -------
        Trace
            Reads of event tables keep the rows with ``exec_row`` at most the kept exec rows
            (events at the prefix's end, as at any trace's end), ``mem`` the rows with
            ``icount`` below the kept instructions. :meth:`num_rows` of those tables still
            counts whole parts.
        """
        parts = dict(self._parts)
        parts["exec"] = [p for p in self._parts["exec"]
                         if p.seq < exec_parts.get(p.vcpu, 0)]
        limits = {v: (sum(p.num_rows for p in parts["exec"] if p.vcpu == v),
                      int(instructions.get(v, 0))) for v in self.all_vcpus()}
        return Trace(self.path, parts, self.plugin_info, self.manifest, prefix=limits)

    def __repr__(self) -> str:
        return f"Trace({str(self.path)!r}, vcpus={self.vcpus})"

    @property
    def vcpus(self) -> list[int]:
        """Sorted vCPU indices that have ``exec`` parts."""
        return sorted({p.vcpu for p in self._parts["exec"] if p.vcpu is not None})

    def all_vcpus(self) -> list[int]:
        """Sorted vCPU indices that have a part in any per-vCPU table."""
        return sorted({p.vcpu for ps in self._parts.values() for p in ps if p.vcpu is not None})

    def parts(self, name: str, vcpu: int | None = None) -> list[Part]:
        """Part files of table ``name`` in row order, optionally only those of ``vcpu``."""
        spec = self._spec(name, vcpu)
        found = self._parts[spec.name]
        return found if vcpu is None else [p for p in found if p.vcpu == vcpu]

    @property
    def roi(self) -> str:
        """The plugin's ``roi=`` option from ``plugin.json`` (top level or under ``options``):
        ``"marker"`` (the default) or ``"all"``."""
        info = self.plugin_info or {}
        for d in (info.get("options"), info):
            if isinstance(d, dict) and isinstance(d.get("roi"), str):
                return d["roi"]
        return "marker"

    def num_rows(self, name: str, vcpu: int | None = None) -> int:
        """Rows of a table (from the part footers, without reading data)."""
        return sum(p.num_rows for p in self.parts(name, vcpu))

    def table(self, name: str, vcpu: int | None = None) -> pa.Table:
        """Read a table.

        Parameters
        ----------
        name : str
            Table name, one of :data:`pysched.trace.schema.TABLES`.
        vcpu : int, optional
            For per-vCPU tables: only this vCPU's parts. Not allowed for static tables.

        Returns
        -------
        pyarrow.Table
            The parts concatenated in part-name order (all vCPUs: vCPU by vCPU), with exactly
            the schema's columns in the schema's order; an empty table of that schema when the
            table has no parts.
        """
        spec = self._spec(name, vcpu)
        chunks = [self.read_part(part) for part in self.parts(name, vcpu)]
        if not chunks:
            return spec.schema.empty_table()
        return pa.concat_tables(chunks)

    def read_part(self, part: Part) -> pa.Table:
        """Read one part file (see :meth:`parts`) with exactly its table's schema.

        Page checksums are verified where the writer stored them (the plugin does); a damaged
        file raises :class:`TraceError` naming the file and its table. An encoded part
        (:mod:`pysched.trace.exec_codec`, :mod:`pysched.trace.insns_codec`,
        :mod:`pysched.trace.mem_codec`) is decoded to the table's columns.
        """
        spec = TABLES[part.table]
        if part.encoding is None:
            names = spec.schema.names
        elif part.table == "exec":
            names = exec_codec.ENCODED_SCHEMAS[part.encoding].names
        elif part.table == "insns":
            names = insns_codec.ENCODED_SCHEMA.names
        else:
            names = mem_codec.ENCODED_SCHEMA.names
        try:
            t = pq.ParquetFile(part.path, page_checksum_verification=True).read(columns=names)
        except pa.ArrowMemoryError:
            raise MemoryError(f"{part.path}: out of memory reading it") from None
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise TraceError(f"{part.path}: table {part.table!r}: the file is damaged and "
                             f"cannot be read ({exc})") from exc
        if part.encoding and part.table == "exec":
            t = self._decode_exec(part, t)
        elif part.encoding and part.table == "insns":
            t = self._decode_insns(part, t)
        elif part.encoding:
            t = self._decode_mem(part, t)
        # Types are validated; the cast only unifies nullability and drops metadata.
        t = t.select(spec.schema.names).cast(spec.schema)
        if self.prefix is not None and part.vcpu is not None and part.table != "exec":
            rows, insns = self.prefix.get(part.vcpu, (0, 0))
            if "exec_row" in spec.schema.names:
                t = t.filter(pc.less_equal(t.column("exec_row"), rows))
            else:
                t = t.filter(pc.less(t.column("icount"), insns))
        return t

    @staticmethod
    def _decode_exec(part: Part, encoded: pa.Table) -> pa.Table:
        assert part.encoding is not None
        try:
            blocks = exec_codec.decode_exec(encoded, part.num_rows, part.encoding)
        except ValueError as exc:
            raise TraceError(f"{part.path}: table 'exec': the successor-encoded part does not "
                             f"decode: {exc}") from None
        return pa.table({"block": blocks})

    def _decode_insns(self, part: Part, encoded: pa.Table) -> pa.Table:
        try:
            return insns_codec.decode_insns(encoded, self.block_vaddr)
        except ValueError as exc:
            raise TraceError(f"{part.path}: table 'insns': the gap-encoded part does not "
                             f"decode: {exc}") from None

    def block_vaddr(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``blocks.vaddr`` of each block id of ``ids`` (a duplicated id: its first row) and
        whether ``blocks`` has it (uint64 and bool arrays), from ``blocks`` read once."""
        known = self._cache.get("block_vaddr")
        if known is None:
            b = self.table("blocks")
            bid = b.column("block").to_numpy()
            order = np.argsort(bid, kind="stable")
            known = self._cache["block_vaddr"] = (bid[order],
                                                  b.column("vaddr").to_numpy()[order])
        sorted_ids, vaddr = known
        pos = np.searchsorted(sorted_ids, ids)
        inside = pos < len(sorted_ids)
        found = np.zeros(len(ids), dtype=bool)
        found[inside] = sorted_ids[pos[inside]] == ids[inside]
        out = np.zeros(len(ids), dtype=np.uint64)
        out[found] = vaddr[pos[found]]
        return out, found

    def _decode_mem(self, part: Part, encoded: pa.Table) -> pa.Table:
        assert part.icount_range is not None and part.vcpu is not None
        # Readers walk a stream in windows smaller than a part: keep the last part decoded.
        last = self._cache.get("mem_decoded")
        if last is not None and last[0] == part.path:
            return last[1]
        try:
            rows = mem_codec.ExecRows.of(self, part.vcpu)
        except TraceError as exc:
            raise TraceError(f"{part.path}: the encoded mem part needs vCPU {part.vcpu}'s "
                             f"instructions, which cannot be read: {exc}") from exc
        decoded = mem_codec.decode_mem(encoded, part.icount_range[0], rows)
        self._cache["mem_decoded"] = (part.path, decoded)
        return decoded

    def window(self, name: str, vcpu: int, lo: int, hi: int,
               column: str = "icount") -> pa.Table:
        """Rows of ``vcpu``'s part of table ``name`` with ``lo <= column < hi``.

        Parts are in order of ``column`` (the contract for ``icount``), so the row-group
        statistics let parts wholly below the window be skipped and reading stop at the first
        part wholly above it.
        """
        spec = self._spec(name, vcpu)
        if column not in spec.schema.names:
            raise KeyError(f"table {name!r} has no column {column!r}")
        tables = []
        for part in self.parts(name, vcpu):
            if part.icount_range is not None:  # an encoded part: its range is in its metadata
                if column == "icount" and part.icount_range[0] >= hi:
                    break
                if column != "icount" or part.icount_range[1] >= lo:
                    tables.append(self.read_part(part))
                continue
            md = pq.ParquetFile(part.path).metadata
            col = md.schema.to_arrow_schema().get_field_index(column)
            stats = [md.row_group(g).column(col).statistics for g in range(md.num_row_groups)]
            if stats and all(st is not None and st.has_min_max for st in stats):
                if min(st.min for st in stats) >= hi:
                    break
                if max(st.max for st in stats) < lo:
                    continue
            tables.append(self.read_part(part))
        if not tables:
            return spec.schema.empty_table()
        t = pa.concat_tables(tables)
        c = t.column(column).to_numpy()
        return t.filter((c >= lo) & (c < hi))

    def df(self, name: str, vcpu: int | None = None) -> pd.DataFrame:
        """Read a table as a :class:`pandas.DataFrame` (see :meth:`table`)."""
        return self.table(name, vcpu).to_pandas()

    def _spec(self, name: str, vcpu: int | None) -> TableSpec:
        spec = TABLES.get(name)
        if spec is None:
            raise KeyError(f"unknown table {name!r}; tables are {', '.join(TABLES)}")
        if vcpu is not None and not spec.per_vcpu:
            raise ValueError(f"table {name!r} is static: it has no per-vCPU parts")
        return spec


def open_trace(path: str | Path) -> Trace:
    """Open and validate a trace directory; same as :meth:`Trace.open`."""
    return Trace.open(path)
