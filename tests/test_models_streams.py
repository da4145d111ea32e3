"""Access streams: fetch lines, data lines, program-order merge, from a synthetic trace."""
from __future__ import annotations

import numpy as np
import pytest

import tracefactory as tf
from twins.streams import slow_fetch_lines
from pysched.models.caches import access_stream, data_accesses, fetch_lines, merge_accesses
from pysched.models.caches.streams import os_classes
from pysched.models.codes import APP, IFETCH, LOAD, OS, STORE
from pysched.trace import open_trace

UNK = 2**64 - 1


def test_fetch_lines_hand_made():
    p = np.array([0, 4, 60, 64, 70, UNK, 72, 0, 130], dtype=np.uint64)
    assert fetch_lines(p, 64).tolist() == [0, 3, 6, 7, 8]
    assert fetch_lines(np.zeros(0, np.uint64)).tolist() == []


def test_fetch_lines_random_against_twin():
    rng = np.random.default_rng(1)
    p = np.cumsum(rng.integers(1, 12, 3000)).astype(np.uint64)
    p[rng.random(3000) < 0.05] = np.uint64(UNK)
    for line in (32, 64, 128):
        assert fetch_lines(p, line).tolist() == slow_fetch_lines(p, line)
    with pytest.raises(ValueError, match="line"):
        fetch_lines(p, 48)


def test_data_accesses_split_and_drop():
    ic = np.array([0, 1, 2, 3])
    pa = np.array([10, 60, UNK, 128], dtype=np.uint64)
    size = np.array([8, 8, 4, 64])
    store = np.array([0, 1, 0, 1])
    i, a, k = data_accesses(ic, pa, size, store, 64)
    assert i.tolist() == [0, 1, 1, 3]
    assert a.tolist() == [10, 60, 64, 128]
    assert k.tolist() == [LOAD, STORE, STORE, STORE]


def test_merge_puts_fetch_before_its_data():
    fi = np.array([0, 2, 5])
    di = np.array([0, 1, 2, 2, 6])
    icount, addr, kind = merge_accesses(fi, np.array([100, 200, 300], np.uint64), di,
                                        np.arange(5, dtype=np.uint64),
                                        np.full(5, LOAD, np.uint8))
    assert icount.tolist() == [0, 0, 1, 2, 2, 2, 5, 6]
    assert kind.tolist() == [IFETCH, LOAD, LOAD, IFETCH, LOAD, LOAD, IFETCH, LOAD]
    assert addr.tolist() == [100, 0, 1, 200, 2, 3, 300, 4]
    with pytest.raises(ValueError, match="sorted"):
        merge_accesses(fi[::-1], np.zeros(3, np.uint64), di, np.zeros(5, np.uint64),
                       np.ones(5, np.uint8))


def test_os_classes():
    pc = np.array([0x400000, tf.KBASE + 5], dtype=np.uint64)
    assert os_classes(pc).tolist() == [APP, OS]


def test_access_stream_from_synthetic_trace(tmp_path):
    f = tf.TraceFactory()
    ub = f.block(0x401000, [4, 4, 4, 4])            # 4 user instructions, one line
    kb = f.block(tf.KBASE + 0x1000, [30, 30, 30])   # kernel: crosses a line at byte 64
    f.run(0, ub)
    f.run(0, kb)
    f.run(0, ub)
    root = f.write(tmp_path / "t")
    from tracefactory import write_part, part_path
    # data accesses: icount 1 load, icount 5 store straddling, icount 9 unknown
    write_part(part_path(root, "mem", 0, 0), "mem",
               {"icount": [1, 5, 9], "paddr": [0x2000, 0x3FFC, UNK], "size": [8, 8, 8],
                "store": [0, 1, 0]}, vcpu=0)
    t = open_trace(root)
    s = access_stream(t, 0)
    assert s.instructions == 11
    assert s.unknown_data == 1
    # fetches: insn 0 (user line), 4 (kernel line A), 7? kernel insns at +0,+30,+60 all in the
    # first line except none: 0x1000+60 < 0x1040 -> one kernel line; insn 7 (user again)
    assert s.kind.tolist() == [IFETCH, LOAD, IFETCH, STORE, STORE, IFETCH]
    assert s.icount.tolist() == [0, 1, 4, 5, 5, 7]
    assert s.cls.tolist() == [APP, APP, OS, OS, OS, APP]
    assert s.addr[3:5].tolist() == [0x3FFC, 0x4000]
    s2 = access_stream(t, 0, data=False, classes=np.arange(11) % 3)
    assert s2.cls.tolist() == [0, 1, 1]
    with pytest.raises(ValueError, match="classes"):
        access_stream(t, 0, classes=np.zeros(3))
