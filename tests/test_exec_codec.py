"""The successor encodings of ``exec`` parts: the numba kernels against the slow twins, round
trips, the reader on parts in either encoding and plain, and damaged parts refused with the
file named."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracefactory as tf
from twins.exec_codec import slow_decode, slow_decode_v1, slow_encode, slow_encode_v1
from pysched.capture import compact
from pysched.capture.compact import compact_trace
from pysched.trace.checker import check_trace
from pysched.trace.errors import TraceError
from pysched.trace.exec_codec import (
    ENCODED_SCHEMAS,
    EXEC_SUCCESSOR,
    EXEC_SUCCESSOR_V1,
    MAX_BLOCK_ID,
    META_ROWS,
    SUCCESSORS,
    decode_exec,
    encode_exec,
)
from pysched.trace.reader import open_trace


def _columns(t: pa.Table) -> tuple[list[int], list[int]]:
    return t.column(t.column_names[0]).to_pylist(), t.column("run").to_pylist()


def _decode(first, run, rows: int, encoding: str = EXEC_SUCCESSOR) -> list[int]:
    names = ENCODED_SCHEMAS.get(encoding, ENCODED_SCHEMAS[EXEC_SUCCESSOR]).names
    t = pa.table({names[0]: pa.array(first, pa.uint32()), "run": pa.array(run, pa.uint32())})
    return decode_exec(t, rows, encoding).tolist()


def _explicit(x: int, prev: int) -> int:
    d = x - prev
    return SUCCESSORS + (2 * d if d >= 0 else -2 * d - 1)


@pytest.mark.parametrize("blocks, code, run", [
    ([], [], []),
    ([5], [_explicit(5, 0)], [0]),
    ([5, 5, 5, 5], [_explicit(5, 0), _explicit(5, 5)], [0, 2]),  # 5 -> 5 learnt at row 2
    ([1, 2, 3, 1, 2, 3, 1, 2], [_explicit(1, 0), _explicit(2, 1), _explicit(3, 2),
                                _explicit(1, 3)], [0, 0, 0, 4]),
    # 1 is followed by 2, then 3, then 2 again: the second place of 1's list
    ([1, 2, 1, 3, 1, 2], [_explicit(1, 0), _explicit(2, 1), _explicit(1, 2), _explicit(3, 1),
                          _explicit(1, 3), 1], [0, 0, 0, 0, 0, 0]),
    # 0 is followed by 7, 9, 8, 6, then 7 again: the fourth place of 0's list (code 3)
    ([0, 7, 0, 9, 0, 8, 0, 6, 0, 7], [_explicit(0, 0), _explicit(7, 0), _explicit(0, 7),
                                      _explicit(9, 0), _explicit(0, 9), _explicit(8, 0),
                                      _explicit(0, 8), _explicit(6, 0), _explicit(0, 6), 3],
     [0] * 10),
    # a fifth successor pushes the oldest off: 7 is coded by its id again
    ([0, 7, 0, 9, 0, 8, 0, 6, 0, 5, 0, 7], [_explicit(0, 0), _explicit(7, 0), _explicit(0, 7),
                                            _explicit(9, 0), _explicit(0, 9), _explicit(8, 0),
                                            _explicit(0, 8), _explicit(6, 0), _explicit(0, 6),
                                            _explicit(5, 0), _explicit(0, 5), _explicit(7, 0)],
     [0] * 12),
])
def test_hand_made(blocks: list[int], code: list[int], run: list[int]) -> None:
    enc = encode_exec(np.array(blocks, dtype=np.uint32))
    assert _columns(enc) == (code, run) == slow_encode(blocks)
    assert enc.schema.metadata[META_ROWS.encode()] == str(len(blocks)).encode()
    assert enc.schema.metadata[b"pysched.encoding"] == EXEC_SUCCESSOR.encode()
    assert _decode(code, run, len(blocks)) == blocks == slow_decode(code, run)


@pytest.mark.parametrize("blocks, block, run", [
    ([], [], []),
    ([5], [5], [0]),
    ([5, 5, 5, 5], [5, 5], [0, 2]),            # 5 -> 5 learnt at the second row
    ([1, 2, 3, 1, 2, 3, 1, 2], [1, 2, 3, 1], [0, 0, 0, 4]),
    ([1, 2, 1, 3, 1, 2], [1, 2, 1, 3, 1, 2], [0, 0, 0, 0, 0, 0]),  # 1's successor changes
    ([0, 7, 0, 7, 0, 9], [0, 7, 0, 9], [0, 0, 2, 0]),
])
def test_hand_made_v1(blocks: list[int], block: list[int], run: list[int]) -> None:
    enc = encode_exec(np.array(blocks, dtype=np.uint32), EXEC_SUCCESSOR_V1)
    assert _columns(enc) == (block, run) == slow_encode_v1(blocks)
    assert enc.schema.metadata[b"pysched.encoding"] == EXEC_SUCCESSOR_V1.encode()
    assert _decode(block, run, len(blocks), EXEC_SUCCESSOR_V1) == blocks == \
        slow_decode_v1(block, run)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=300), st.integers(1, 2000))
def test_random_streams_match_the_twins(small: list[int], scale: int) -> None:
    blocks = [b * scale for b in small]   # sparse ids as well as dense ones
    enc = encode_exec(np.array(blocks, dtype=np.uint32))
    assert _columns(enc) == slow_encode(blocks)
    code, run = _columns(enc)
    assert _decode(code, run, len(blocks)) == blocks == slow_decode(code, run)
    v1 = encode_exec(np.array(blocks, dtype=np.uint32), EXEC_SUCCESSOR_V1)
    assert _columns(v1) == slow_encode_v1(blocks)
    block, run = _columns(v1)
    assert _decode(block, run, len(blocks), EXEC_SUCCESSOR_V1) == blocks


def test_the_rows_start_where_v1_rows_start() -> None:
    # the front of a block's list is its last successor: the same rows, other codes
    rng = np.random.default_rng(3)
    blocks = rng.choice(rng.integers(0, 3000, 60), 20_000).astype(np.uint32)
    assert encode_exec(blocks).column("run").to_pylist() == \
        encode_exec(blocks, EXEC_SUCCESSOR_V1).column("run").to_pylist()


def test_loops_shrink() -> None:
    rng = np.random.default_rng(1)
    body = rng.integers(0, 5000, 40).astype(np.uint32)
    blocks = np.tile(body, 1000)
    enc = encode_exec(blocks)
    assert enc.num_rows <= 2 * len(body)
    assert np.array_equal(decode_exec(enc, len(blocks)), blocks)


def test_large_ids_grow_the_decoder_lists() -> None:
    # ids far above the 4096 lists the decoder starts with (each id's list takes 16 bytes
    # in the encoder and the decoder: a few million keep the test small)
    big = 3_000_000
    blocks = [big, 3, big, 3, 70_000, big, 70_000]
    enc = encode_exec(np.array(blocks, np.uint32))
    assert decode_exec(enc, len(blocks)).tolist() == blocks


def test_bad_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="make 3 rows"):
        _decode([_explicit(1, 0), _explicit(2, 1)], [0, 1], 4)
    # block 1's successor was never recorded in the part
    with pytest.raises(ValueError, match="encoded row 0"):
        _decode([_explicit(1, 0)], [2], 3)
    # a place in a list before any successor, a code 0, ids out of range
    with pytest.raises(ValueError, match="encoded row 1"):
        _decode([_explicit(1, 0), 2], [0, 0], 2)
    with pytest.raises(ValueError, match="encoded row 1"):
        _decode([_explicit(1, 0), 0], [0, 0], 2)
    with pytest.raises(ValueError, match="encoded row 1"):
        _decode([_explicit(1, 0), _explicit(0, 2)], [0, 0], 2)   # id -1
    with pytest.raises(ValueError, match="encoded row 0"):
        _decode([_explicit(MAX_BLOCK_ID + 1, 0)], [0], 1)
    with pytest.raises(ValueError, match="above"):
        _decode([MAX_BLOCK_ID + 1], [0], 1, EXEC_SUCCESSOR_V1)
    with pytest.raises(ValueError, match="encoded row 0"):
        _decode([1], [2], 3, EXEC_SUCCESSOR_V1)
    with pytest.raises(ValueError, match="above"):
        encode_exec(np.array([MAX_BLOCK_ID + 1], np.uint32))
    with pytest.raises(ValueError, match="unknown exec encoding 'x'"):
        _decode([1], [0], 1, "x")
    with pytest.raises(ValueError, match="unknown exec encoding 'x'"):
        encode_exec(np.array([1], np.uint32), "x")


# --- the reader ---------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", [EXEC_SUCCESSOR, EXEC_SUCCESSOR_V1, None])
def test_reader_reads_every_form(tmp_path: Path, encoding: str | None) -> None:
    f = tf.sample()
    f.exec_encoding = encoding
    root = f.write(tmp_path / "t")
    t = open_trace(root)
    assert {p.encoding for p in t.parts("exec")} == {encoding}
    for v in (0, 1):
        assert t.table("exec", v).column("block").to_pylist() == f.exec[v]
        assert t.num_rows("exec", v) == len(f.exec[v])
    assert check_trace(t).ok


@pytest.mark.parametrize("encoding", [EXEC_SUCCESSOR_V1, None])
def test_compact_encodes_plain_and_v1_parts(tmp_path: Path, encoding: str | None) -> None:
    f = tf.sample()
    f.exec_encoding = encoding
    root = f.write(tmp_path / "t")
    summary = compact_trace(root, level=3)
    assert summary["encoding"] == EXEC_SUCCESSOR
    t = open_trace(root)
    assert {p.encoding for p in t.parts("exec")} == {EXEC_SUCCESSOR}
    assert [t.table("exec", v).column("block").to_pylist() for v in (0, 1)] == \
        [f.exec[0], f.exec[1]]
    assert check_trace(t).ok


def test_compacted_pages_end_at_their_size_not_at_20000_rows(tmp_path: Path) -> None:
    # rows that repeat 30,000 rows later: zstd finds the repeat only inside one page
    half = np.random.default_rng(1).integers(0, 1 << 20, 30_000, dtype=np.uint32)
    t = pa.table({"block": np.concatenate([half, half]), "run": np.concatenate([half, half])})
    split = {c: "BYTE_STREAM_SPLIT" for c in t.column_names}
    path = tmp_path / "v000-000000.parquet"
    size = compact._replace_part(path, t, 3, split)
    assert pq.read_table(path).equals(t)
    capped = tmp_path / "capped.parquet"
    pq.write_table(t, capped, compression="zstd", compression_level=3, use_dictionary=False,
                   column_encoding=split, write_statistics=False, max_rows_per_page=20_000)
    assert size < 0.7 * capped.stat().st_size


def _rewrite(path: Path, first, run, rows: str) -> None:
    meta = dict(pq.ParquetFile(path).metadata.metadata)
    meta[META_ROWS.encode()] = rows.encode()
    t = pa.table({"code": pa.array(first, pa.uint32()), "run": pa.array(run, pa.uint32())})
    pq.write_table(t.replace_schema_metadata(meta), path)


def test_damaged_parts_name_the_file(tmp_path: Path) -> None:
    root = tf.sample().write(tmp_path / "t")
    part = sorted((root / "exec").glob("v000-*.parquet"))[1]
    code, run = _columns(pq.read_table(part))
    _rewrite(part, code, run, "x")
    with pytest.raises(TraceError, match=f"{part.name}.*{META_ROWS}.*not a row count"):
        open_trace(root)
    _rewrite(part, code, run, str(len(code) + sum(run) + 1))
    with pytest.raises(TraceError, match=f"{part.name}.*does not decode.*make"):
        open_trace(root).table("exec", 0)
    _rewrite(part, code, [3] + run[1:], str(len(code) + 3 + sum(run[1:])))
    with pytest.raises(TraceError, match=f"{part.name}.*does not decode.*encoded row 0"):
        open_trace(root).table("exec", 0)
