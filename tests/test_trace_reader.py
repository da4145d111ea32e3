"""Reading, expanding and checking trace directories (synthetic traces from tracefactory)."""
from __future__ import annotations

import argparse
import io
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracefactory as tf
from pysched.trace import (
    SCHEMA_VERSION,
    TABLES,
    TraceError,
    block_index,
    block_sizes,
    block_start_icount,
    check_trace,
    expand,
    open_trace,
)
from pysched.trace import checker as check_cli
from pysched.trace.expand import _expand, expand_rows

U64 = np.uint64


# --- helpers -------------------------------------------------------------------------------

def run_check(path: Path) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    check_cli.add_arguments(parser)
    out = io.StringIO()
    status = check_cli.run(parser.parse_args([str(path)]), out=out)
    return status, out.getvalue()


def rewrite(path: Path, **changes) -> None:
    """Rewrite one part file with some columns replaced (keeping its metadata)."""
    t = pq.read_table(path)
    for name, values in changes.items():
        typ = t.schema.field(name).type
        t = t.set_column(t.schema.get_field_index(name), name, pa.array(values, type=typ))
    pq.write_table(t, path)


@pytest.fixture
def sample_dir(tmp_path: Path) -> Path:
    return tf.sample().write(tmp_path / "t")


def tiny() -> tuple[tf.TraceFactory, int, int]:
    """Block A (0x1000: 1, 2, 3 bytes) and kernel block B (4, 4 bytes)."""
    f = tf.TraceFactory(nvcpus=1)
    a = f.block(0x1000, [1, 2, 3])
    b = f.block(tf.KBASE + 0x2000, [4, 4], flags={1: tf.F_IRETQ})
    return f, a, b


# --- reading -------------------------------------------------------------------------------

def test_open_and_read_tables(sample_dir: Path) -> None:
    f = tf.sample()
    t = open_trace(sample_dir)
    assert t.vcpus == [0, 1]
    assert t.plugin_info["options"]["roi"] == "marker"
    assert t.manifest is None
    # exec of vCPU 0 spans several parts (4 rows each): concatenated in name order
    assert len(t.parts("exec", 0)) == 4
    assert t.table("exec", 0).column("block").to_pylist() == f.exec[0]
    all_exec = t.table("exec").column("block").to_pylist()
    assert all_exec == f.exec[0] + f.exec[1]
    sc = t.table("syscalls")
    assert sc.schema == TABLES["syscalls"].schema
    assert sc.column("vcpu").to_pylist() == [0, 0, 0, 1, 1, 1]
    assert t.num_rows("syscalls", 1) == 3
    df = t.df("interrupts", 0)
    assert list(df["vector"]) == [14, -1] and df["icount"].dtype == np.uint64
    assert t.table("blocks").num_rows == len(f.blocks)


def test_absent_event_table_reads_empty(tmp_path: Path) -> None:
    f, a, _ = tiny()
    f.run(0, a)
    t = open_trace(f.write(tmp_path / "t"))
    for name in ("syscalls", "interrupts", "switches", "markers", "wakeups", "device_requests",
                 "mem"):
        empty = t.table(name)
        assert empty.num_rows == 0 and empty.schema == TABLES[name].schema
        assert t.table(name, 0).num_rows == 0
    assert len(t.df("switches").columns) == len(TABLES["switches"].schema)


def test_manifest_tmp_parts_and_argument_errors(sample_dir: Path) -> None:
    (sample_dir / "manifest.json").write_text(json.dumps({"cmd": "true"}))
    (sample_dir / "exec" / "v000-000099.parquet.tmp").write_bytes(b"half a part")
    t = open_trace(sample_dir)
    assert t.manifest == {"cmd": "true"}
    with pytest.raises(KeyError):
        t.table("nope")
    with pytest.raises(ValueError):
        t.table("blocks", vcpu=0)


def test_missing_required_table(sample_dir: Path) -> None:
    shutil.rmtree(sample_dir / "insns")
    with pytest.raises(TraceError, match=r"insns.*required table 'insns'"):
        open_trace(sample_dir)


def test_missing_column_names_file_and_column(sample_dir: Path) -> None:
    part = sample_dir / "syscalls" / "v001-000000.parquet"
    t = pq.read_table(part)
    pq.write_table(t.drop_columns(["matched"]), part)
    with pytest.raises(TraceError) as err:
        open_trace(sample_dir)
    assert str(part) in str(err.value) and "'matched'" in str(err.value)


def test_wrong_type_names_file_and_column(sample_dir: Path) -> None:
    part = sample_dir / "exec" / "v000-000001.parquet"
    t = pq.read_table(part)
    pq.write_table(t.set_column(0, "code", t.column("code").cast(pa.int64())), part)
    with pytest.raises(TraceError) as err:
        open_trace(sample_dir)
    msg = str(err.value)
    assert str(part) in msg and "'code'" in msg and "int64" in msg and "uint32" in msg


@pytest.mark.parametrize("version", ["2", None])
def test_schema_version_checked(sample_dir: Path, version: str | None) -> None:
    part = tf.part_path(sample_dir, "blocks", 0)
    blocks, _ = tf.sample().static_rows()
    tf.write_part(part, "blocks", blocks, version=version)
    with pytest.raises(TraceError, match="pysched.schema_version") as err:
        open_trace(sample_dir)
    assert str(part) in str(err.value)
    assert SCHEMA_VERSION == 1


def test_metadata_and_names_checked(sample_dir: Path) -> None:
    part = sample_dir / "exec" / "v001-000000.parquet"
    t = pq.read_table(part)
    pq.write_table(t.replace_schema_metadata({**t.schema.metadata, b"pysched.vcpu": b"3"}), part)
    with pytest.raises(TraceError, match=r"v001-000000.parquet.*pysched.vcpu"):
        open_trace(sample_dir)
    part.unlink()
    shutil.copy(sample_dir / "exec" / "v000-000000.parquet", sample_dir / "exec" / "x.parquet")
    with pytest.raises(TraceError, match=r"x.parquet.*vVVV-NNNNNN"):
        open_trace(sample_dir)


# --- expansion -----------------------------------------------------------------------------

def expand_py(row_start, row_size, insn_vaddr, insn_paddr):
    """Obviously-correct twin of the numba kernel."""
    pc, pa_, br = [], [], []
    for r, (s, n) in enumerate(zip(row_start, row_size)):
        for j in range(n):
            pc.append(insn_vaddr[s + j])
            pa_.append(insn_paddr[s + j])
            br.append(r)
    return (np.array(pc, dtype=U64), np.array(pa_, dtype=U64), np.array(br, dtype=np.int64))


def test_expand_by_hand(tmp_path: Path) -> None:
    f, a, b = tiny()
    f.run(0, a, b, a)
    t = open_trace(f.write(tmp_path / "t"))
    s = expand(t, 0)
    k = tf.KBASE
    assert s.pc.tolist() == [0x1000, 0x1001, 0x1003, k + 0x2000, k + 0x2004,
                             0x1000, 0x1001, 0x1003]
    assert s.paddr.tolist() == [tf.user_paddr(x) for x in (0x1000, 0x1001, 0x1003)] + \
        [0x2000, 0x2004] + [tf.user_paddr(x) for x in (0x1000, 0x1001, 0x1003)]
    assert s.block_row.tolist() == [0, 0, 0, 1, 1, 2, 2, 2]
    assert s.pc.dtype == U64 and s.paddr.dtype == U64 and s.block_row.dtype == np.int64
    assert s.icount.tolist() == list(range(8))
    assert block_sizes(t, 0).tolist() == [3, 2, 3]
    assert block_start_icount(t, 0).tolist() == [0, 3, 5, 8]
    assert s.row_start.tolist() == [0, 3, 5, 8]


def test_expand_truncated_block(tmp_path: Path) -> None:
    f, a, b = tiny()
    f.run(0, a, retired=1)                 # the instruction at 0x1001 faults
    f.interrupt(0, 14, tf.KBASE + 0x2000, user=1)
    f.run(0, b)
    f.interrupt_return(0, to=0x1001)
    f.run(0, a)
    t = open_trace(f.write(tmp_path / "t"))
    k = tf.KBASE
    assert expand(t, 0).pc.tolist() == [0x1000, k + 0x2000, k + 0x2004, 0x1000, 0x1001, 0x1003]
    assert block_sizes(t, 0).tolist() == [1, 2, 3]
    assert block_start_icount(t, 0).tolist() == [0, 1, 3, 6]
    assert run_check(tmp_path / "t")[0] == 0


def test_expand_sample_matches_factory(sample_dir: Path) -> None:
    f, t = tf.sample(), open_trace(sample_dir)
    for v in t.vcpus:
        s = expand(t, v)
        assert s.pc.tolist() == f.expected_pcs(v)
        assert len(s) == f.icount(v)
        assert (s.frame == s.paddr >> U64(12)).all()


def test_expand_missing_block_names_vcpu_row_block(sample_dir: Path) -> None:
    f = tf.sample()
    bad = f.exec[1][3]
    rows = f.static_rows()
    blocks = {c: [x for x, b in zip(vals, rows[0]["block"]) if b != bad]
              for c, vals in rows[0].items()}
    tf.write_part(tf.part_path(sample_dir, "blocks", 0), "blocks", blocks)
    t = open_trace(sample_dir)
    first = f.exec[1].index(bad)
    with pytest.raises(TraceError, match=fr"vCPU 1 exec row {first}: block {bad} "):
        expand(t, 1)
    with pytest.raises(TraceError, match="block"):
        block_sizes(t, 1)


def test_expand_kernel_by_hand() -> None:
    va = np.array([10, 11, 12, 20, 21], dtype=U64)
    pa_ = va + U64(1000)
    args = (np.array([3, 0, 3, 0]), np.array([2, 3, 0, 1]), va, pa_)
    got = expand_rows(*args)
    assert got[0].tolist() == [20, 21, 10, 11, 12, 10]
    assert got[2].tolist() == [0, 0, 1, 1, 1, 3]
    for g, w in zip(got, expand_py(*args)):
        np.testing.assert_array_equal(g, w)
    empty = expand_rows(np.zeros(0), np.zeros(0), va, pa_)
    assert [len(x) for x in empty] == [0, 0, 0]
    with pytest.raises(ValueError):
        expand_rows(np.array([4]), np.array([2]), va, pa_)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_expand_kernel_random(data: st.DataObject) -> None:
    va = np.array(data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20)),
                  dtype=U64)
    pa_ = va[::-1].copy()
    n = len(va)
    rows = data.draw(st.lists(st.integers(0, n - 1).flatmap(
        lambda s: st.tuples(st.just(s), st.integers(0, n - s))), max_size=30))
    row_start = np.array([r[0] for r in rows], dtype=np.int64)
    row_size = np.array([r[1] for r in rows], dtype=np.int64)
    got = _expand(row_start, row_size, va, pa_)
    for g, w in zip(got, expand_py(row_start, row_size, va, pa_)):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype


# --- random well-formed traces: expansion and checker agree with the simulation -------------

@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_traces_expand_and_check(data: st.DataObject) -> None:
    f = tf.TraceFactory(nvcpus=data.draw(st.integers(1, 3)),
                        rows_per_part=data.draw(st.integers(1, 5)),
                        id_step=data.draw(st.sampled_from([1, 7, 1_000_003])))
    ids = []
    for i in range(data.draw(st.integers(1, 6))):
        sizes = data.draw(st.lists(st.integers(1, 15), min_size=1, max_size=6))
        base = data.draw(st.sampled_from([0x400000, tf.KBASE + 0x1000000])) + i * 0x7F0
        ids.append(f.block(base, sizes))
    handler = f.block(tf.KBASE + 0x2000000, [3, 1])
    for v in range(f.nvcpus):
        for _ in range(data.draw(st.integers(1 if v == 0 else 0, 12))):
            bid = data.draw(st.sampled_from(ids))
            cut = data.draw(st.none() | st.integers(0, len(f.blocks[bid].sizes) - 1))
            f.run(v, bid, retired=cut)
            if cut is not None or data.draw(st.booleans()):
                f.interrupt(v, 14 if cut is not None else 32, tf.KBASE + 0x2000000)
                f.run(v, handler)
    with tempfile.TemporaryDirectory() as d:
        t = open_trace(f.write(Path(d) / "t"))
        for v in range(f.nvcpus):
            assert expand(t, v).pc.tolist() == f.expected_pcs(v)
        report = check_trace(t)
        assert report.ok, report.format()


# --- the checker ---------------------------------------------------------------------------

def test_check_passes_on_good_trace(sample_dir: Path) -> None:
    status, out = run_check(sample_dir)
    assert status == 0, out
    assert "OK" in out and "instructions: v0 37, v1 14" in out
    for name in ("blocks", "icount", "syscalls", "frames", "markers"):
        assert f"check {name}: ok" in out
    assert "mem 1" in out


def test_check_bad_icount(sample_dir: Path) -> None:
    part = sample_dir / "syscalls" / "v001-000000.parquet"
    icount = pq.read_table(part).column("icount").to_pylist()
    icount[1] += 1                              # past its block: not in (S[r-1], S[r]]
    rewrite(part, icount=icount)
    status, out = run_check(sample_dir)
    assert status == 1
    assert "check icount: 1 violation" in out
    assert f"syscalls v1 row 1 (exec_row 4, icount {icount[1]})" in out


def test_check_bad_switch_icount(sample_dir: Path) -> None:
    part = sample_dir / "switches" / "v000-000000.parquet"
    rewrite(part, icount=[30])
    status, out = run_check(sample_dir)
    assert status == 1 and "switches v0 row 0" in out and "icount != S[exec_row]" in out


def test_check_unmatched_syscall_return(sample_dir: Path) -> None:
    part = sample_dir / "syscalls" / "v000-000000.parquet"
    t = pq.read_table(part)
    pq.write_table(t.slice(1), part)            # drop the first entry; its return stays
    status, out = run_check(sample_dir)
    assert status == 1
    assert "check syscalls: 1 violation" in out
    assert "syscalls v0 row 0 (exec_row 5, icount 15): return with matched=1" in out


def test_check_matched_zero_is_info(sample_dir: Path) -> None:
    part = sample_dir / "syscalls" / "v000-000000.parquet"
    t = pq.read_table(part)
    pq.write_table(t.slice(1), part)
    rewrite(part, matched=[0, 0])
    status, out = run_check(sample_dir)
    assert status == 0, out
    assert "1 returns with matched=0" in out


def test_check_wrong_kernel_paddr(sample_dir: Path) -> None:
    f = tf.sample()
    blocks, insns = f.static_rows()
    row = insns["vaddr"].index(tf.KBASE + 0x1200040 + 3)     # the sysretq
    insns["paddr"][row] += 0x1000
    tf.write_part(tf.part_path(sample_dir, "insns", 0), "insns", insns)
    status, out = run_check(sample_dir)
    assert status == 1
    assert "check frames: 2 violations" in out     # kernel text, and its page has two frames
    assert f"insns row {row} (block 4, first run v0 exec_row 4 icount 13): kernel text" in out


def test_check_unknown_paddr_is_info(sample_dir: Path) -> None:
    f = tf.sample()
    blocks, insns = f.static_rows()
    insns["paddr"][0] = 2**64 - 1
    tf.write_part(tf.part_path(sample_dir, "insns", 0), "insns", insns)
    status, out = run_check(sample_dir)
    assert "1 of 30 instructions have an unknown paddr" in out
    # The block runs three times in a recording of about a hundred instructions: more than
    # 1 % of the executed instructions, which check health refuses (tests/test_health.py).
    assert status == 1 and "check frames: ok" in out, out
    assert "executed instructions have an unknown frame" in out


def test_check_missing_block(sample_dir: Path) -> None:
    f = tf.sample()
    gone = f.exec[0][2]                           # u_sys
    blocks, insns = f.static_rows()
    keep = [b != gone for b in insns["block"]]
    insns = {c: [x for x, k in zip(v, keep) if k] for c, v in insns.items()}
    tf.write_part(tf.part_path(sample_dir, "insns", 0), "insns", insns)
    status, out = run_check(sample_dir)
    assert status == 1
    assert f"exec v0 row 2 (block {gone}): executed block has no rows in the insns table" in out
    assert "counters not checked" in out


def test_check_bad_block_retired(sample_dir: Path) -> None:
    part = sample_dir / "interrupts" / "v000-000000.parquet"
    rewrite(part, block_retired=[1, 0])          # the fault was at instruction 2
    status, out = run_check(sample_dir)
    assert status == 1 and "interrupts v0 row" in out


def test_check_interrupt_handler(sample_dir: Path) -> None:
    part = sample_dir / "interrupts" / "v000-000000.parquet"
    handler = pq.read_table(part).column("handler").to_pylist()
    rewrite(part, handler=[handler[0] + 16, handler[1]])
    status, out = run_check(sample_dir)
    assert status == 1 and "interrupts v0 row 0" in out and "but the block at exec_row" in out


def test_check_markers_structure(sample_dir: Path) -> None:
    (sample_dir / "markers" / "v000-000000.parquet").unlink()   # no begin
    status, out = run_check(sample_dir)
    assert status == 1
    assert "markers v1 row 0" in out and "end outside a region" in out


def test_check_region_ended_by_the_bound(sample_dir: Path) -> None:
    (sample_dir / "markers" / "v001-000000.parquet").unlink()   # no end row
    status, out = run_check(sample_dir)
    assert status == 0 and "ends inside a region (no final end marker)" in out
    info = json.loads((sample_dir / "plugin.json").read_text())
    info["roi_insns_ends"] = 1                                 # the roi_insns bound ended it
    (sample_dir / "plugin.json").write_text(json.dumps(info))
    status, out = run_check(sample_dir)
    assert status == 0 and "ended by the roi_insns bound" in out


def test_check_markers_counts_bound_ended_regions() -> None:
    from pysched.trace.checker.order import check_markers
    from pysched.trace.checker.findings import Report

    def run(kinds: list[int], bound_ends: int) -> Report:
        n = len(kinds)
        t = pa.table({"time_ns": np.arange(n, dtype=np.uint64),
                      "icount": np.arange(n, dtype=np.uint64),
                      "exec_row": np.arange(n, dtype=np.uint64),
                      "kind": np.array(kinds, dtype=np.uint8)})
        report = Report()
        check_markers({0: t}, "marker", report, bound_ends)
        return report

    # begin, (bound end), begin, end: fine when the plugin says one region ended by the bound
    assert run([0, 0, 1], 1).ok
    bad = run([0, 0, 1], 0)
    assert not bad.ok
    assert run([0, 0, 0], 2).ok              # three regions, the first two ended by it
    assert not run([0, 0, 0], 1).ok        # but not more begins than bound ends explain


def test_check_block_structure(sample_dir: Path) -> None:
    f = tf.sample()
    blocks, insns = f.static_rows()
    blocks["nbytes"][0] += 1
    insns["idx"][1] = 5
    tf.write_part(tf.part_path(sample_dir, "blocks", 0), "blocks", blocks)
    tf.write_part(tf.part_path(sample_dir, "insns", 0), "insns", insns)
    status, out = run_check(sample_dir)
    assert status == 1
    assert "nbytes 15 but" in out and "idx 5 where 3 is expected" in out


def test_check_mem(sample_dir: Path) -> None:
    rewrite(sample_dir / "mem" / "v001-000000.parquet", icount=[99], paddr=[0x5011])
    status, out = run_check(sample_dir)
    assert status == 1
    assert "mem v1 row 0 (icount 99): icount beyond" in out


def test_check_unreadable_trace(tmp_path: Path) -> None:
    status, out = run_check(tmp_path / "nope")
    assert status == 1 and out.startswith("error:")


def test_check_limits_output(tmp_path: Path) -> None:
    f, a, b = tiny()
    f.run(0, *([a] * 30))
    d = f.write(tmp_path / "t")
    blocks, insns = f.static_rows()
    insns["paddr"] = [p + 1 for p in insns["paddr"]]
    tf.write_part(tf.part_path(d, "insns", 0), "insns", insns)
    report = check_trace(open_trace(d), limit=2)
    assert not report.ok
    assert "... and" in report.format()


def test_cli_dispatch(sample_dir: Path) -> None:
    pytest.importorskip("pysched.capture.command")
    from pysched.cli import main
    assert main(["check", str(sample_dir)]) == 0


def test_check_plugin_json_totals(sample_dir: Path) -> None:
    info = json.loads((sample_dir / "plugin.json").read_text())
    assert info["icount"] == [37, 14]
    info["icount"][1] = 15
    (sample_dir / "plugin.json").write_text(json.dumps(info))
    status, out = run_check(sample_dir)
    assert status == 1 and "plugin.json v1: icount 15 but the exec stream retires 14" in out
    info["final"] = False
    (sample_dir / "plugin.json").write_text(json.dumps(info))
    status, out = run_check(sample_dir)
    # Counters of a non-final plugin.json are not compared, but the trace is incomplete.
    assert "icount 15 but" not in out and "its counters are not compared" in out
    assert status == 1 and "incomplete trace: plugin.json is not final" in out


def test_plugin_json_schema_version(sample_dir: Path) -> None:
    (sample_dir / "plugin.json").write_text(json.dumps({"schema_version": 2}))
    with pytest.raises(TraceError, match=r"plugin.json: schema_version is 2"):
        open_trace(sample_dir)


@pytest.mark.parametrize("step", [1, 1_000_003])
def test_block_index_lookup(tmp_path: Path, step: int) -> None:
    f = tf.TraceFactory(id_step=step)
    ids = [f.block(0x1000 * (i + 1), [1, 2]) for i in range(5)]
    f.run(0, ids[0])
    idx = block_index(open_trace(f.write(tmp_path / "t")))
    probe = np.array([ids[3], ids[0], ids[4] + 1, 0, 2**32 - 1, ids[2]], dtype=np.uint32)
    assert idx.lookup(probe).tolist() == [3, 0, -1, -1, -1, 2]
    assert idx.well_formed.all() and idx.count.tolist() == [2] * 5


def test_empty_static_tables(tmp_path: Path) -> None:
    f = tf.TraceFactory()
    f.exec[0], f.retired[0] = [5, 5], [1, 1]       # executes a block nobody declared
    d = f.write(tmp_path / "t")
    t = open_trace(d)
    assert t.table("blocks").num_rows == 0
    with pytest.raises(TraceError, match="vCPU 0 exec row 0: block 5 is not in the blocks"):
        expand(t, 0)
    assert len(expand(t, 3)) == 0                   # no such vCPU: empty stream
    status, out = run_check(d)
    assert status == 1 and "exec v0 row 0 (block 5): executed block not in the blocks" in out


def test_expand_windows_match_whole_stream(sample_dir: Path) -> None:
    t = open_trace(sample_dir)
    whole = expand(t, 0)
    n = t.num_rows("exec", 0)
    assert len(t.parts("exec", 0)) > 1            # windows cross part boundaries
    for start, stop in [(0, n), (0, 3), (3, 9), (5, 6), (7, None), (n, None), (4, 4)]:
        w = expand(t, 0, start, stop)
        keep = (whole.block_row >= start) & (whole.block_row < (n if stop is None else stop))
        assert w.pc.tolist() == whole.pc[keep].tolist()
        assert w.block_row.tolist() == whole.block_row[keep].tolist()
        assert w.icount.tolist() == whole.icount[keep].tolist()
        hi = n if stop is None else stop
        assert w.row_start.tolist() == whole.row_start[start:hi + 1].tolist()
    with pytest.raises(ValueError):
        expand(t, 0, 5, 2)


# --- wake-ups ------------------------------------------------------------------------------

TTWU, NEW_TASK, DONE = tf.KBASE + 0x10E1700, tf.KBASE + 0x10E2AC0, tf.KBASE + 0x10DF890
WAKER, SLEEPER = 0xFFFF888000100000, 0xFFFF888000200000


def wake_factory() -> tuple[tf.TraceFactory, int]:
    """WAKER calls try_to_wake_up(SLEEPER), which takes effect (ttwu_do_wakeup) on the same
    vCPU; then SLEEPER runs. Returns the factory and the user block."""
    f = tf.TraceFactory(nvcpus=1)
    u = f.block(0x401000, [3, 2])
    ttwu, done = f.block(TTWU, [5, 4]), f.block(DONE, [4, 1])
    f.plugin_info["symbols"] = {"try_to_wake_up": TTWU, "wake_up_new_task": NEW_TASK,
                                "ttwu_do_wakeup": DONE}
    f.run(0, u)
    f.wakeup(0, 1, SLEEPER, waker=WAKER)
    f.run(0, ttwu)
    f.wakeup(0, 3, SLEEPER, waker=WAKER)
    f.run(0, done, u)
    f.switch(0, WAKER, SLEEPER)
    f.run(0, u)
    return f, u


def test_wakeups_read_and_check(tmp_path: Path) -> None:
    f, _ = wake_factory()
    t = open_trace(f.write(tmp_path / "t"))
    wk = t.df("wakeups")
    assert list(wk.kind) == [1, 3] and (wk.woken == SLEEPER).all() and (wk.waker == WAKER).all()
    report = check_trace(t)
    assert report.ok, report.format()
    assert "check wakeups: ok" in report.format()


@pytest.mark.parametrize("damage, message", [
    ("other_block", "not at try_to_wake_up"),
    ("user_woken", "is not a kernel (task_struct) address"),
    ("kind", "kind 0 is not one of"),
    ("not_boundary", "icount != S[exec_row]"),
    ("effect_without_call", "without an earlier try_to_wake_up call"),
])
def test_wakeup_violations(tmp_path: Path, damage: str, message: str) -> None:
    f, u = wake_factory()
    rows = f.rows["wakeups"][0]
    if damage == "other_block":  # a row whose exec_row block is not the function's
        f.wakeup(0, 1, SLEEPER, waker=WAKER)
        f.run(0, u)
    elif damage == "user_woken":
        rows[0]["woken"] = 0x7FFF0000
    elif damage == "kind":
        rows[1]["kind"] = 0
    elif damage == "not_boundary":
        rows[0]["icount"] += 1
    elif damage == "effect_without_call":  # a new task's wake-up is not a ttwu call
        rows[0]["kind"] = 2
    report = check_trace(open_trace(f.write(tmp_path / "t")))
    assert not report.ok and message in report.format(), report.format()


def test_first_effect_without_call_is_info(tmp_path: Path) -> None:
    """The call may precede the recording: the task's first row then is only counted."""
    f, _ = wake_factory()
    del f.rows["wakeups"][0][0]
    report = check_trace(open_trace(f.write(tmp_path / "t")))
    assert report.ok, report.format()
    assert "took effect without a recorded call" in report.format()


def bound_stop_factory(stop: str, *, new_region: bool = False) -> tf.TraceFactory:
    """Two vCPUs under a roi_insns bound. SLEEPER's first wake-up takes effect on v1 without a
    call (called before recording); v0 then retires its last block; a second wake-up of SLEEPER
    takes effect on v1, again without a recorded call. ``stop`` says when v0 stopped recording
    (plugin.json's ``bound_stop_ns``): "before" that second effect, "after" it, or "none" (a
    plugin.json without ``bound_stop_ns``). ``new_region``: a region begins on v0 between its
    stop and the second effect (v0 records again)."""
    f = tf.TraceFactory(nvcpus=2)
    u = f.block(0x401000, [3, 2])
    done = f.block(DONE, [4, 1])
    f.plugin_info["symbols"] = {"try_to_wake_up": TTWU, "wake_up_new_task": NEW_TASK,
                                "ttwu_do_wakeup": DONE}
    f.plugin_info["options"]["roi_insns"] = 10
    f.marker(0, 0)
    f.run(0, u)
    f.run(1, u)
    f.wakeup(1, 3, SLEEPER, waker=WAKER)
    f.run(1, done, u)
    f.run(0, u)
    stopped_at = f.clock + 10
    if new_region:
        f.marker(0, 0)
        f.run(0, u)
        f.plugin_info["roi_insns_ends"] = 1
    f.wakeup(1, 3, SLEEPER, waker=WAKER)
    f.run(1, done, u)
    if stop == "after":
        stopped_at = f.clock + 10
    if stop != "none":
        f.plugin_info["bound_stop_ns"] = [[stopped_at], []]
    return f


def test_effect_after_the_wakers_vcpu_stopped_is_info(tmp_path: Path) -> None:
    """Issue 19: the call may have been made on v0 after the bound stopped its recording."""
    report = check_trace(open_trace(bound_stop_factory("before").write(tmp_path / "t")))
    assert report.ok, report.format()
    assert ("1 wake-ups took effect without a recorded call after v0 had reached the roi_insns "
            "bound") in report.format()


@pytest.mark.parametrize("stop, new_region, note", [
    ("after", False, False),  # both vCPUs recorded when it took effect: the call is missing
    ("before", True, False),  # v0 stopped, but records again in the next region
    ("none", False, True),    # a plugin.json without bound_stop_ns: cannot be told apart
])
def test_effect_without_call_while_both_vcpus_record_fails(tmp_path: Path, stop: str,
                                                           new_region: bool, note: bool) -> None:
    f = bound_stop_factory(stop, new_region=new_region)
    report = check_trace(open_trace(f.write(tmp_path / "t")))
    text = report.format()
    assert report.checks["wakeups"].count == 1 and report.violations == 1, text
    assert "without an earlier try_to_wake_up call" in text
    assert "stopped recording" not in text
    assert ("plugin.json has no bound_stop_ns" in text) == note


# --- damaged part files --------------------------------------------------------------------

def with_page_checksums(part: Path) -> None:
    """Rewrite a part as the plugin now writes it: one row group, a CRC in every page header."""
    t = pq.read_table(part)
    pq.write_table(t, part, write_page_checksum=True, use_dictionary=False,
                   compression="none")


def test_damaged_page_is_a_trace_error_naming_file_and_table(sample_dir: Path) -> None:
    part = sorted((sample_dir / "syscalls").glob("*.parquet"))[0]
    with_page_checksums(part)
    meta = pq.ParquetFile(part).metadata.row_group(0)
    chunk = next(meta.column(i) for i in range(meta.num_columns)
                 if meta.column(i).path_in_schema == "time_ns")
    data = bytearray(part.read_bytes())
    # the last byte of the chunk: page data (uncompressed), after its page header
    data[chunk.data_page_offset + chunk.total_compressed_size - 1] ^= 0xFF
    part.write_bytes(bytes(data))
    t = open_trace(sample_dir)  # footers are intact: opening succeeds
    with pytest.raises(TraceError, match=f"{part}: table 'syscalls'.*CRC"):
        t.table("syscalls")
    status, out = run_check(sample_dir)
    assert status == 1 and f"{part}: table 'syscalls'" in out and "Traceback" not in out


def test_parts_without_checksums_still_read(sample_dir: Path) -> None:
    """tracefactory writes parts without page checksums, as the plugin did before: they read
    with verification on."""
    f = tf.sample()
    t = open_trace(sample_dir)
    assert t.table("syscalls").num_rows == sum(len(r) for r in f.rows["syscalls"].values())


# --- user PCs (check g) ----------------------------------------------------------------------

def user_pcs_run(f: tf.TraceFactory, **extra) -> tf.TraceFactory:
    """Say in plugin.json that the plugin recorded user blocks where they ran."""
    f.plugin_info = {**f.plugin_info, "user_pcs": "run", **extra}
    return f


def test_user_pcs_of_older_traces_are_info(sample_dir: Path) -> None:
    status, out = run_check(sample_dir)
    assert status == 0, out
    assert "user_pcs: recorded before per-process user PCs" in out
    assert "check user_pcs" not in out


def test_user_returns_resume_at_the_recorded_pc(tmp_path: Path) -> None:
    root = user_pcs_run(tf.sample()).write(tmp_path / "t")
    status, out = run_check(root)
    assert status == 0 and "check user_pcs: ok" in out, out
    assert "recorded before per-process user PCs" not in out
    # The page fault's return: resumes in another page than the block that ran next.
    part = root / "interrupts" / "v000-000000.parquet"
    pc = pq.read_table(part).column("pc").to_pylist()
    rewrite(part, pc=[pc[0], pc[1] + 0x1000])
    status, out = run_check(root)
    assert status == 1 and "check user_pcs: 1 violation" in out
    assert (f"interrupts v0 row 1 (exec_row 8, icount 24): returns to user pc {pc[1] + 0x1000:#x}"
            f" but the block at exec_row starts at {pc[1]:#x}") in out


def interrupt_before_first_user_block(saved: int | None = None) -> tf.TraceFactory:
    """A return to user mode at U, and a timer interrupt taken before U's block runs (saving
    SAVED, U when None), then the return from it to U."""
    f = user_pcs_run(tf.TraceFactory(nvcpus=1))
    u = f.block(0x7F0000001000, [2, 3])
    k_iret = f.block(tf.KBASE + 0x2000, [4, 2], flags={1: tf.F_IRETQ})
    timer = f.block(tf.KBASE + 0x3000, [4, 2], flags={1: tf.F_IRETQ})
    to = f.blocks[u].vaddr
    f.marker(0, 0)
    f.run(0, u, k_iret)
    f.interrupt_return(0, to=to)
    f.interrupt(0, 0xEC, tf.KBASE + 0x3000, pc=to if saved is None else saved)
    f.run(0, timer)
    f.interrupt_return(0, to=to)
    f.run(0, u)
    return f


def test_user_return_then_interrupt_compares_the_saved_pc(tmp_path: Path) -> None:
    status, out = run_check(interrupt_before_first_user_block().write(tmp_path / "a"))
    assert status == 0 and "check user_pcs: ok" in out, out
    status, out = run_check(interrupt_before_first_user_block(0x7F0000002000)
                            .write(tmp_path / "b"))
    assert status == 1 and "check user_pcs: 1 violation" in out
    assert ("returns to user pc 0x7f0000001000 but the interrupt taken before its first block "
            "saved pc 0x7f0000002000") in out


def test_rip_offset_mismatches_fail_user_pcs(tmp_path: Path) -> None:
    root = user_pcs_run(tf.sample(), user_rip_offset_mismatches=2).write(tmp_path / "t")
    status, out = run_check(root)
    assert status == 1 and "plugin.json: 2 user blocks started at a rip" in out
