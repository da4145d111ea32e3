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
    META_FIRST_ICOUNT,
    MEM_SITE_DELTA,
    _site_codec,
    decode_mem,
    encode_mem,
    instruction_pcs,
)
from pysched.trace.reader import open_trace

M64 = (1 << 64) - 1


def twin_deltas(icount: list[int], pc: list[int], paddr: list[int], slots: int) -> list[int]:
    """Each address minus its prediction, modulo 2**64, with a dict for the site table."""
    last: dict[tuple[int, int], int] = {}
    out, prev, rank = [], 0, 0
    for i, (ic, p, a) in enumerate(zip(icount, pc, paddr)):
        rank = rank + 1 if i and ic == icount[i - 1] else 0
        site = (p, min(rank, 7))
        pred = last.get(site, prev)
        out.append((a - pred) & M64)
        if site in last or 2 * len(last) < slots:
            last[site] = a
        prev = a
    return out


def mem_table(icount: list[int], paddr: list[int], size: list[int], store: list[int]) -> pa.Table:
    return pa.table({"icount": pa.array(icount, pa.uint64()), "paddr": pa.array(paddr, pa.uint64()),
                     "size": pa.array(size, pa.uint8()), "store": pa.array(store, pa.uint8())})


@st.composite
def accesses(draw: st.DrawFn) -> tuple[pa.Table, np.ndarray]:
    n = draw(st.integers(0, 60))
    gaps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    first = draw(st.integers(0, 1 << 40))
    icount = list(np.cumsum([first] + gaps[1:])) if n else []
    sites = draw(st.lists(st.sampled_from([0x401000, 0x401004, tf.KBASE + 0x10, 0]),
                          min_size=n, max_size=n))
    pc_of = {}
    pcs = [pc_of.setdefault(int(ic), s) for ic, s in zip(icount, sites)]  # one pc an instruction
    base = draw(st.sampled_from([0x1000, 0x7FFF_F000, M64 - 64]))
    paddr = [(base + draw(st.integers(-64, 4096))) & M64 if draw(st.booleans()) else
             draw(st.sampled_from([0, M64, 1 << 63])) for _ in range(n)]
    size = draw(st.lists(st.sampled_from([1, 2, 4, 8, 16, 64]), min_size=n, max_size=n))
    store = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return mem_table([int(i) for i in icount], paddr, size, store), np.array(pcs, np.uint64)


@settings(max_examples=200, deadline=None)
@given(accesses(), st.sampled_from([2, 4, 1 << 10]))
def test_kernel_matches_twin_and_round_trips(case: tuple[pa.Table, np.ndarray], slots: int) -> None:
    table, pcs = case
    icount = table.column("icount").to_numpy().astype(np.uint64)
    paddr = table.column("paddr").to_numpy().astype(np.uint64)
    bits = slots.bit_length() - 1
    got = _site_codec(icount, pcs, paddr, False, bits)
    assert got.tolist() == twin_deltas(icount.tolist(), pcs.tolist(), paddr.tolist(), slots)
    assert _site_codec(icount, pcs, got, True, bits).tolist() == paddr.tolist()
    enc = encode_mem(table, pcs, slots)
    first = int(icount[0]) if len(icount) else 0
    assert decode_mem(enc, first, pcs, slots).equals(table)


def test_a_stride_costs_nothing_after_the_first() -> None:
    # one instruction walking an array, another re-reading one stack slot, interleaved
    n = 100
    icount = np.repeat(np.arange(n, dtype=np.uint64) * 2, 2)
    pcs = np.tile(np.array([0x401000, 0x401008], np.uint64), n)
    paddr = np.ravel(np.column_stack([0x10000 + 8 * np.arange(n), np.full(n, 0x7000)]))
    enc = encode_mem(mem_table(icount.tolist(), paddr.tolist(), [8] * 2 * n, [0] * 2 * n),
                     pcs)
    z = enc.column("pdelta").to_numpy()
    # after the first two, the slot's delta is 0 and the array's is +8 (zigzag 16)
    assert set(z[4::2].tolist()) == {16} and set(z[3::2].tolist()) == {0}


def test_encoding_refuses_what_it_cannot_hold() -> None:
    with pytest.raises(ValueError, match="icount order"):
        encode_mem(mem_table([5, 3], [0, 0], [8, 8], [0, 0]), np.zeros(2, np.uint64))
    with pytest.raises(ValueError, match="uint32"):
        encode_mem(mem_table([0, 1 << 33], [0, 0], [8, 8], [0, 0]), np.zeros(2, np.uint64))
    with pytest.raises(ValueError, match="power of two"):
        encode_mem(mem_table([0], [0], [8], [0]), np.zeros(1, np.uint64), slots=3)


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


def test_instruction_pcs_are_the_expanded_streams(tmp_path: Path) -> None:
    f = tf.sample()
    root = f.write(tmp_path / "t")
    trace = open_trace(root)
    for v in (0, 1):
        want = f.expected_pcs(v)
        got = instruction_pcs(trace, v, np.arange(len(want) + 2))
        assert got[:len(want)].tolist() == want and got[len(want):].tolist() == [0, 0]


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
