"""The successor encoding of ``exec`` parts: the numba kernels against the slow twin, round
trips, the reader on encoded and plain parts, and damaged parts refused with the file named."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracefactory as tf
from twins.exec_codec import slow_decode, slow_encode
from pysched.capture import compact
from pysched.capture.compact import compact_trace
from pysched.trace.checker import check_trace
from pysched.trace.errors import TraceError
from pysched.trace.exec_codec import (
    EXEC_SUCCESSOR,
    MAX_BLOCK_ID,
    META_ROWS,
    decode_exec,
    encode_exec,
)
from pysched.trace.reader import open_trace


def _columns(t: pa.Table) -> tuple[list[int], list[int]]:
    return t.column("block").to_pylist(), t.column("run").to_pylist()


@pytest.mark.parametrize("blocks, block, run", [
    ([], [], []),
    ([5], [5], [0]),
    ([5, 5, 5, 5], [5, 5], [0, 2]),            # 5 -> 5 learnt at the second row
    ([1, 2, 3, 1, 2, 3, 1, 2], [1, 2, 3, 1], [0, 0, 0, 4]),
    ([1, 2, 1, 3, 1, 2], [1, 2, 1, 3, 1, 2], [0, 0, 0, 0, 0, 0]),  # 1's successor changes
    ([0, 7, 0, 7, 0, 9], [0, 7, 0, 9], [0, 0, 2, 0]),
])
def test_hand_made(blocks: list[int], block: list[int], run: list[int]) -> None:
    enc = encode_exec(np.array(blocks, dtype=np.uint32))
    assert _columns(enc) == (block, run) == slow_encode(blocks)
    assert enc.schema.metadata[META_ROWS.encode()] == str(len(blocks)).encode()
    assert enc.schema.metadata[b"pysched.encoding"] == EXEC_SUCCESSOR.encode()
    assert decode_exec(np.array(block, np.uint32), np.array(run, np.uint32),
                       len(blocks)).tolist() == blocks == slow_decode(block, run)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=300), st.integers(1, 2000))
def test_random_streams_match_the_twin(small: list[int], scale: int) -> None:
    blocks = [b * scale for b in small]   # sparse ids as well as dense ones
    enc = encode_exec(np.array(blocks, dtype=np.uint32))
    assert _columns(enc) == slow_encode(blocks)
    block, run = (np.array(c, dtype=np.uint32) for c in _columns(enc))
    assert decode_exec(block, run, len(blocks)).tolist() == blocks


def test_loops_shrink() -> None:
    rng = np.random.default_rng(1)
    body = rng.integers(0, 5000, 40).astype(np.uint32)
    blocks = np.tile(body, 1000)
    enc = encode_exec(blocks)
    assert enc.num_rows <= 2 * len(body)
    assert np.array_equal(decode_exec(enc.column("block").to_numpy(),
                                      enc.column("run").to_numpy(), len(blocks)), blocks)


def test_bad_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="make 3 rows"):
        decode_exec(np.array([1, 2], np.uint32), np.array([0, 1], np.uint32), 4)
    # block 1's successor was never recorded in the part
    with pytest.raises(ValueError, match="encoded row 0"):
        decode_exec(np.array([1], np.uint32), np.array([2], np.uint32), 3)
    with pytest.raises(ValueError, match="above"):
        decode_exec(np.array([MAX_BLOCK_ID + 1], np.uint32), np.array([0], np.uint32), 1)
    with pytest.raises(ValueError, match="above"):
        encode_exec(np.array([MAX_BLOCK_ID + 1], np.uint32))


# --- the reader ---------------------------------------------------------------------------------

@pytest.mark.parametrize("encoded", [True, False])
def test_reader_reads_both_forms(tmp_path: Path, encoded: bool) -> None:
    f = tf.sample()
    f.exec_encoding = encoded
    root = f.write(tmp_path / "t")
    t = open_trace(root)
    assert {p.encoding for p in t.parts("exec")} == ({EXEC_SUCCESSOR} if encoded else {None})
    for v in (0, 1):
        assert t.table("exec", v).column("block").to_pylist() == f.exec[v]
        assert t.num_rows("exec", v) == len(f.exec[v])
    assert check_trace(t).ok


def test_compact_encodes_plain_parts(tmp_path: Path) -> None:
    f = tf.sample()
    f.exec_encoding = False
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


def _rewrite(path: Path, block, run, rows: str) -> None:
    meta = dict(pq.ParquetFile(path).metadata.metadata)
    meta[META_ROWS.encode()] = rows.encode()
    t = pa.table({"block": pa.array(block, pa.uint32()), "run": pa.array(run, pa.uint32())})
    pq.write_table(t.replace_schema_metadata(meta), path)


def test_damaged_parts_name_the_file(tmp_path: Path) -> None:
    root = tf.sample().write(tmp_path / "t")
    part = sorted((root / "exec").glob("v000-*.parquet"))[1]
    block, run = _columns(pq.read_table(part))
    _rewrite(part, block, run, "x")
    with pytest.raises(TraceError, match=f"{part.name}.*{META_ROWS}.*not a row count"):
        open_trace(root)
    _rewrite(part, block, run, str(len(block) + sum(run) + 1))
    with pytest.raises(TraceError, match=f"{part.name}.*does not decode.*make"):
        open_trace(root).table("exec", 0)
    _rewrite(part, block, [3] + run[1:], str(len(block) + 3 + sum(run[1:])))
    with pytest.raises(TraceError, match=f"{part.name}.*does not decode.*encoded row 0"):
        open_trace(root).table("exec", 0)
