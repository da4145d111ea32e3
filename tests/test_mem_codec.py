"""The site-delta encoding of ``mem`` parts: the numba kernel against a slow twin, round trips,
and compacted traces that read back the same rows."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracefactory as tf
from pysched.capture.compact import compact_trace
from pysched.trace.checker import check_trace
from pysched.trace.errors import TraceError
from pysched.trace.mem_codec import (
    MAX_GAP,
    META_FIRST_ICOUNT,
    MEM_SITE_DELTA,
    ExecRows,
    decode_mem,
    encode_mem,
)
from pysched.trace.reader import open_trace

M64 = (1 << 64) - 1


def zz(d: int) -> int:
    d &= M64
    return ((d << 1) & M64) ^ (M64 if d >> 63 else 0)


def twin_encode(icount: list[int], kind: list[int], paddr: list[int], pc_of: dict[int, int],
                slots: int) -> tuple[list[int], list[int], list[int]]:
    """The residuals, the slow way: dicts for the site table, Python integers mod 2**64."""
    last: dict[tuple[int, int], tuple[int, int]] = {}   # site -> (address, kind)
    next_gap: dict[tuple[int, int], int] = {}            # site -> gap that followed it
    gaps, kinds, deltas = [], [], []
    prev_addr, prev_site, rank = 0, None, 0
    for i, (ic, k, a) in enumerate(zip(icount, kind, paddr)):
        g = ic - icount[i - 1] if i else 0
        pg = next_gap.get(prev_site, 0) if prev_site in last else 0
        gaps.append(zz(g - pg) if i else 0)
        rank = rank + 1 if i and g == 0 else 0
        site = (pc_of.get(ic, 0), min(rank, 7))
        pa_, pk = last.get(site, (prev_addr, 0))
        kinds.append(k ^ pk)
        deltas.append(zz(a - pa_))
        if prev_site in last:
            next_gap[prev_site] = g
        if site in last or 2 * len(last) < slots:
            last[site] = (a, k)
            prev_site = site
        else:
            prev_site = None
        prev_addr = a
    return gaps, kinds, deltas


def mem_table(icount: list[int], paddr: list[int], size: list[int], store: list[int]) -> pa.Table:
    return pa.table({"icount": pa.array(icount, pa.uint64()), "paddr": pa.array(paddr, pa.uint64()),
                     "size": pa.array(size, pa.uint8()), "store": pa.array(store, pa.uint8())})


@st.composite
def accesses(draw: st.DrawFn) -> tuple[pa.Table, np.ndarray]:
    """Sorted accesses over a stream of ``len(pcs)`` one-instruction rows (some past its end)."""
    n = draw(st.integers(0, 60))
    pcs = np.array(draw(st.lists(st.sampled_from([0x401000, 0x401004, tf.KBASE + 0x10, 0]),
                                 min_size=1, max_size=40)), np.uint64)
    icount = sorted(draw(st.lists(st.integers(0, len(pcs) + 3), min_size=n, max_size=n)))
    base = draw(st.sampled_from([0x1000, 0x7FFF_F000, M64 - 64]))
    paddr = [(base + draw(st.integers(-64, 4096))) & M64 if draw(st.booleans()) else
             draw(st.sampled_from([0, M64, 1 << 63])) for _ in range(n)]
    size = draw(st.lists(st.sampled_from([1, 2, 4, 8, 16, 64]), min_size=n, max_size=n))
    store = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return mem_table(icount, paddr, size, store), pcs


@settings(max_examples=300, deadline=None)
@given(accesses(), st.sampled_from([2, 4, 1 << 10]))
def test_kernel_matches_twin_and_round_trips(case: tuple[pa.Table, np.ndarray], slots: int) -> None:
    table, pcs = case
    rows = ExecRows.flat(pcs)
    enc = encode_mem(table, rows, slots)
    d = table.to_pydict()
    kind = [s | (st_ << 7) for s, st_ in zip(d["size"], d["store"])]
    want = twin_encode(d["icount"], kind, d["paddr"], dict(enumerate(pcs.tolist())), slots)
    assert (enc.column("gap").to_pylist(), enc.column("kind").to_pylist(),
            enc.column("pdelta").to_pylist()) == want
    first = d["icount"][0] if d["icount"] else 0
    assert decode_mem(enc, first, rows, slots).equals(table)


def test_predictable_accesses_cost_nothing_after_the_first() -> None:
    # a loop of two instructions: one walks an array, one re-reads a stack slot
    n = 100
    icount = np.repeat(np.arange(n, dtype=np.uint64) * 2, 2)
    pcs = np.tile(np.array([0x401000, 0x401008], np.uint64), n)
    paddr = np.ravel(np.column_stack([0x10000 + 8 * np.arange(n), np.full(n, 0x7000)]))
    table = mem_table(icount.tolist(), paddr.tolist(), [8] * 2 * n, [0, 1] * n)
    enc = encode_mem(table, ExecRows.flat(pcs))
    z, k, g = (enc.column(c).to_numpy() for c in ("pdelta", "kind", "gap"))
    # after the first iteration: the array's delta is +8 (zigzag 16), the slot's 0; kinds
    # and gaps as predicted
    assert set(z[2::2].tolist()) == {16} and set(z[3::2].tolist()) == {0}
    assert set(k[2:].tolist()) == {0} and set(g[4:].tolist()) == {0}


def test_encoding_refuses_what_it_cannot_hold() -> None:
    rows = ExecRows.flat(np.zeros(4, np.uint64))
    with pytest.raises(ValueError, match="icount order"):
        encode_mem(mem_table([5, 3], [0, 0], [8, 8], [0, 0]), rows)
    with pytest.raises(ValueError, match="more than the encoding holds"):
        encode_mem(mem_table([0, MAX_GAP + 1], [0, 0], [8, 8], [0, 0]), rows)
    with pytest.raises(ValueError, match="128"):
        encode_mem(mem_table([0], [0], [128], [0]), rows)
    with pytest.raises(ValueError, match="power of two"):
        encode_mem(mem_table([0], [0], [8], [0]), rows, slots=3)


def _trace_with_accesses(tmp_path: Path) -> Path:
    f = tf.sample()
    f.rows_per_part = 4  # several mem parts per vCPU
    f.rows["mem"][1].clear()
    for v in (0, 1):
        total = f.icount(v)
        for ic in range(0, total, 2):
            f.mem(v, ic, 0x7FFF0000 + 8 * ic, store=int(ic % 3 == 0))
            f.mem(v, ic, tf.KBASE + 0x200000, size=4)
    return f.write(tmp_path / "t")


def test_compacted_trace_reads_the_same_rows(tmp_path: Path) -> None:
    root = _trace_with_accesses(tmp_path)
    before = open_trace(root)
    rows = {v: before.table("mem", v) for v in (0, 1)}
    windows = {v: before.window("mem", v, 3, 9) for v in (0, 1)}
    summary = compact_trace(root, level=3)
    assert summary["mem"]["encoding"] == MEM_SITE_DELTA
    assert summary["mem"]["parts"] == len(list((root / "mem").glob("*.parquet"))) > 2
    after = open_trace(root)
    assert all(p.encoding == MEM_SITE_DELTA for p in after.parts("mem"))
    for v in (0, 1):
        assert after.table("mem", v).equals(rows[v])
        assert after.window("mem", v, 3, 9).equals(windows[v])
    assert check_trace(after).ok
    # compacting again leaves encoded parts as they are
    sizes = {p.name: p.stat().st_size for p in (root / "mem").glob("*.parquet")}
    compact_trace(root, level=3)
    assert {p.name: p.stat().st_size for p in (root / "mem").glob("*.parquet")} == sizes


def test_exec_rows_give_the_expanded_streams(tmp_path: Path) -> None:
    f = tf.sample()
    f.rows_per_part = 3
    trace = open_trace(f.write(tmp_path / "t"))
    for v in (0, 1):
        rows = ExecRows.of(trace, v)
        want = f.expected_pcs(v)
        assert rows.row_start[-1] == len(want)
        got = [int(rows.insn_vaddr[rows.row_insn0[r] + i - rows.row_start[r]])
               for i in range(len(want))
               for r in [int(np.searchsorted(rows.row_start, i, side="right")) - 1]]
        assert got == want


def test_a_damaged_encoded_part_is_refused_by_name(tmp_path: Path) -> None:
    root = _trace_with_accesses(tmp_path)
    compact_trace(root, level=3)
    part = sorted((root / "mem").glob("*.parquet"))[1]
    t = pq.ParquetFile(part).read()
    meta = {k: v for k, v in t.schema.metadata.items() if k != META_FIRST_ICOUNT.encode()}
    pq.write_table(t.replace_schema_metadata(meta), part)
    with pytest.raises(TraceError, match=f"{part.name}.*{META_FIRST_ICOUNT}"):
        open_trace(root)
    meta[b"pysched.encoding"] = b"mem-something-else/9"
    meta[META_FIRST_ICOUNT.encode()] = b"0"
    pq.write_table(t.replace_schema_metadata(meta), part)
    with pytest.raises(TraceError, match="unknown encoding"):
        open_trace(root)
