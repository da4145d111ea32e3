"""The gap encoding of ``insns`` parts: the codec against a slow twin, round trips, the reader
on encoded and plain parts, a damaged part refused, and compacted traces that read back the
same rows."""
from __future__ import annotations

import shutil
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
from pysched.trace.insns_codec import INSNS_GAP, UNKNOWN, decode_insns, encode_insns
from pysched.trace.reader import open_trace
from twins.insns_codec import M64, slow_decode, slow_encode


def plain(rows: list[tuple[int, int, int, int, int, int]]) -> pa.Table:
    """A plain insns table of ``(block, idx, vaddr, paddr, size, flags)`` rows."""
    cols = list(zip(*rows)) if rows else [[]] * 6
    return pa.table({name: pa.array(list(c), t) for (name, t), c in zip(tf.COLUMNS["insns"], cols)})


def blocks_of(table: pa.Table) -> dict[int, int]:
    """Each block's vaddr (its idx 0 row's)."""
    d = table.to_pydict()
    return {b: v for b, i, v in zip(d["block"], d["idx"], d["vaddr"]) if i == 0}


def lookup(vaddr_of: dict[int, int]):
    def f(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        found = np.array([int(i) in vaddr_of for i in ids], dtype=bool)
        return (np.array([vaddr_of.get(int(i), 0) for i in ids], dtype=np.uint64), found)
    return f


def make_block(bid: int, vaddr: int, sizes: list[int], frames: dict[int, int], flags=None):
    """Rows of a block at ``vaddr``: each virtual page ``p`` maps to ``frames[p]`` (a frame
    number, or UNKNOWN for an unknown frame)."""
    rows, va = [], vaddr
    for i, s in enumerate(sizes):
        f = frames[va >> 12]
        pa_ = UNKNOWN if f == UNKNOWN else (f << 12) | (va & 0xFFF)
        rows.append((bid, i, va, pa_, s, (flags or {}).get(i, 0)))
        va += s
    return rows


#: Kernel text, a block across a page into a frame elsewhere, an unknown frame, a frame below
#: its virtual address, one-instruction blocks, a variant (another id at another address with
#: the same frames).
HAND = (make_block(7, tf.KBASE + 0x1000, [4, 1, 1, 5], {(tf.KBASE + 0x1000) >> 12: 0x1001})
        + make_block(3, 0x400FF8, [3, 4, 2, 6], {0x400: 0x9F00, 0x401: 0x12}, {2: 1})
        + make_block(9, 0x7FFF0000, [2], {0x7FFF0: UNKNOWN})
        + make_block(4, 0x500FFE, [5, 1], {0x500: UNKNOWN, 0x501: 0x33})
        + make_block(10, 0x600FFE, [5, 1], {0x600: 0x2, 0x601: UNKNOWN})
        + make_block(11, 0x9000, [1], {0x9: 0x9}))


def check_against_twin(rows) -> None:
    t = plain(rows)
    enc = encode_insns(t)
    d = t.to_pydict()
    assert enc.column("pgap").to_pylist() == slow_encode(d["block"], d["vaddr"], d["paddr"])
    vaddr_of = blocks_of(t)
    dec = decode_insns(enc, lookup(vaddr_of))
    assert dec.schema.names == [n for n, _ in tf.COLUMNS["insns"]]
    twin = slow_decode(d["block"], d["size"], enc.column("pgap").to_pylist(), vaddr_of)
    got = dec.to_pydict()
    assert list(zip(got["block"], got["idx"], got["vaddr"], got["paddr"])) == twin
    assert dec.equals(t.cast(dec.schema))


def test_hand_made_blocks_against_the_twin() -> None:
    check_against_twin(HAND)


def test_gap_is_zero_inside_a_page_and_at_contiguous_crossings() -> None:
    # rows at 0x1FFC, 0x1FFE, 0x2000, 0x2002; page 1 at frame 0x40
    t = plain(make_block(1, 0x1FFC, [2, 2, 2, 2], {0x1: 0x40, 0x2: 0x41}))
    assert encode_insns(t).column("pgap").to_pylist() == [0x3F000, 0, 0, 0]
    t = plain(make_block(1, 0x1FFC, [2, 2, 2, 2], {0x1: 0x40, 0x2: 0x90}))
    assert encode_insns(t).column("pgap").to_pylist() == [0x3F000, 0, 0x8E000 - 0x3F000, 0]


def test_empty_part() -> None:
    dec = decode_insns(encode_insns(plain([])), lookup({}))
    assert dec.num_rows == 0 and dec.schema.names[1] == "idx"


@st.composite
def parts(draw):
    rows, bid = [], draw(st.integers(0, 50))
    for _ in range(draw(st.integers(0, 8))):
        bid += draw(st.integers(1, 1000))
        n = draw(st.integers(1, 12))
        sizes = draw(st.lists(st.integers(1, 15), min_size=n, max_size=n))
        vaddr = draw(st.sampled_from([0x1000, 0x7FFF_FFFF_F000, tf.KBASE, 2**64 - 4096]))
        vaddr += draw(st.integers(0, 4095))
        pages = range(vaddr >> 12, ((vaddr + sum(sizes)) >> 12) + 1)
        frames = {p: draw(st.one_of(st.just(UNKNOWN), st.integers(0, 2**40))) for p in pages}
        # an address past 2**64 wraps as the guest's would not: keep the block below it
        if vaddr + sum(sizes) > M64:
            continue
        rows += make_block(bid, vaddr, sizes, frames)
    return rows


@settings(max_examples=150, deadline=None)
@given(parts())
def test_random_parts_against_the_twin(rows) -> None:
    check_against_twin(rows)


def test_a_block_missing_from_blocks_gets_unknown_addresses() -> None:
    t = plain(HAND)
    vaddr_of = blocks_of(t)
    del vaddr_of[3]
    dec = decode_insns(encode_insns(t), lookup(vaddr_of)).to_pydict()
    for b, i, v, p, *_ in zip(*dec.values()):
        assert (v == p == UNKNOWN) == (b == 3), (b, i, v, p)


def test_a_block_with_too_many_rows_is_named() -> None:
    t = plain([(5, i % 65536, 0x1000 + i, 0x1000 + i, 1, 0) for i in range(65537)])
    with pytest.raises(ValueError, match=r"block 5 has more than 65,536 consecutive rows"):
        decode_insns(encode_insns(t), lookup({5: 0x1000}))


def test_reader_gives_the_same_table_from_both_forms(tmp_path: Path) -> None:
    f = tf.sample()
    enc = f.write(tmp_path / "enc")
    f.insns_encoding = None
    old = f.write(tmp_path / "plain")
    a, b = open_trace(enc), open_trace(old)
    assert a.parts("insns")[0].encoding == INSNS_GAP and b.parts("insns")[0].encoding is None
    assert a.table("insns").equals(b.table("insns"))
    assert check_trace(a).ok, check_trace(a).format()


def test_check_rejects_an_encoded_part_whose_block_is_not_in_blocks(tmp_path: Path) -> None:
    d = tf.sample().write(tmp_path / "t")
    part = next((d / "blocks").glob("*.parquet"))
    blocks = pq.read_table(part)
    gone = blocks.column("block")[0].as_py()
    pq.write_table(blocks.slice(1).replace_schema_metadata(blocks.schema.metadata), part)
    report = check_trace(open_trace(d))
    assert not report.ok
    assert (f"insns row 0 (block {gone}, first run v0 exec_row 0 icount 0): instruction of a "
            "block not in the blocks table") in report.format()


def test_reader_refuses_an_encoded_part_that_does_not_decode(tmp_path: Path) -> None:
    d = tf.sample().write(tmp_path / "t")
    part = next((d / "insns").glob("*.parquet"))
    t = pq.read_table(part)
    # one block's rows made longer than idx can number
    big = pa.table({"block": pa.array([t.column("block")[0].as_py()] * 70000, pa.uint32()),
                    "size": pa.array([1] * 70000, pa.uint8()),
                    "flags": pa.array([0] * 70000, pa.uint8()),
                    "pgap": pa.array([0] * 70000, pa.uint64())})
    pq.write_table(big.replace_schema_metadata(t.schema.metadata), part)
    with pytest.raises(TraceError, match=r"insns/000000.parquet: table 'insns': the "
                                         r"gap-encoded part does not decode: block \d+ has more"):
        open_trace(d).table("insns")


def test_compact_encodes_plain_parts_and_keeps_a_cut_block_plain(tmp_path: Path) -> None:
    f = tf.sample()
    f.insns_encoding = None
    d = f.write(tmp_path / "t")
    before = open_trace(d).table("insns")
    # a second part whose first block continues one of the first part's (as older plugins cut
    # a block between parts when the buffer filled): it cannot be encoded on its own
    part0 = d / "insns" / "000000.parquet"
    t = pq.read_table(part0)
    meta = t.schema.metadata
    n = t.num_rows
    cut = next(i for i in range(1, n) if t.column("idx")[i].as_py() > 0)
    pq.write_table(t.slice(0, cut).replace_schema_metadata(meta), part0)
    pq.write_table(t.slice(cut).replace_schema_metadata(meta), d / "insns" / "000001.parquet")
    summary = compact_trace(d, 3)["insns"]
    assert summary["encoding"] == INSNS_GAP and summary["parts"] == 2
    assert summary["encoded"] == 1
    after = open_trace(d)
    assert [p.encoding for p in after.parts("insns")] == [INSNS_GAP, None]
    assert after.table("insns").equals(before)
    assert check_trace(after).ok


def test_compact_rewrites_encoded_parts_at_its_level(tmp_path: Path) -> None:
    d = tf.sample().write(tmp_path / "t")
    before = open_trace(d).table("insns")
    summary = compact_trace(d, 19)["insns"]
    assert summary["parts"] == 1 and summary["encoded"] == 0
    after = open_trace(d)
    assert after.parts("insns")[0].encoding == INSNS_GAP
    assert pq.ParquetFile(after.parts("insns")[0].path).metadata.row_group(0).column(0) \
        .compression == "ZSTD"
    assert after.table("insns").equals(before)


def test_compact_of_a_shipped_trace_reads_back_the_same_rows(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[1] / "data" / "netserver-10b"
    if not (src / "insns").is_dir():
        pytest.skip("data/netserver-10b is not here")
    d = tmp_path / "t"
    shutil.copytree(src, d)
    before = open_trace(src).table("insns")
    summary = compact_trace(d, 3)["insns"]
    assert summary["encoded"] == summary["parts"] > 0
    assert summary["bytes_after"] < summary["bytes_before"] / 3
    assert open_trace(d).table("insns").equals(before)
