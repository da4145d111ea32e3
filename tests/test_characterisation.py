"""Instruction breakups, per-epoch breakup vectors and their cosine similarity."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
import tracefactory as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.characterisation import (
    Breakup,
    consecutive_similarity,
    cosine_similarity,
    epoch_breakup,
    epoch_breakups,
    epoch_counts,
    instruction_breakup,
    steady_state,
)
from pysched.characterisation.kernels import _epoch_counts
from pysched.superfunctions import DEFAULT_EPOCH, Category, segment, syscall_type

T1 = 0xFFFF888000100000

matplotlib.use("Agg")  # before any figure is made (pysched.plots imports pyplot lazily)

from twins.characterisation import twin_counts  # noqa: E402


def test_epoch_counts_hand_made() -> None:
    got = epoch_counts(np.array([0, 5, 12]), np.array([5, 12, 30]), np.array([0, 1, 0]), 10)
    np.testing.assert_array_equal(got, [[5, 5], [8, 2], [10, 0]])
    with pytest.raises(ValueError, match="start <= stop"):
        epoch_counts(np.array([5]), np.array([4]), np.array([0]), 10)
    with pytest.raises(ValueError, match="too small"):
        epoch_counts(np.array([0]), np.array([25]), np.array([0]), 10, nepochs=2)
    # Bounds of a vCPU idle through epoch 1 (two equal bounds), then past the last bound.
    got = epoch_counts(np.array([0, 12]), np.array([12, 40]), np.array([0, 1]),
                       np.array([10, 10, 30]))
    np.testing.assert_array_equal(got, [[10, 0], [0, 0], [2, 18], [0, 10]])
    with pytest.raises(ValueError, match="sorted"):
        epoch_counts(np.array([0]), np.array([5]), np.array([0]), np.array([4, 2]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40), st.integers(0, 4)),
                max_size=40), st.integers(1, 60))
def test_epoch_counts_equal_twin(pieces, L) -> None:
    start = np.array([a for a, _, _ in pieces], dtype=np.int64)
    stop = start + np.array([n for _, n, _ in pieces], dtype=np.int64)
    col = np.array([c for _, _, c in pieces], dtype=np.int64)
    ne = int((stop.max() - 1) // L + 1) if len(stop) and stop.max() > 0 else 0
    bounds = np.arange(L, L * max(ne, 1), L, dtype=np.int64)
    np.testing.assert_array_equal(_epoch_counts(start, stop, col, bounds, ne, 5),
                                  twin_counts(start, stop, col, bounds, ne, 5))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40), st.integers(0, 4)),
                max_size=40), st.lists(st.integers(0, 340), max_size=12))
def test_epoch_counts_uneven_bounds_equal_twin(pieces, bounds) -> None:
    """Bounds of a machine-wide clock: uneven, repeated (a vCPU idle through an epoch)."""
    start = np.array([a for a, _, _ in pieces], dtype=np.int64)
    stop = start + np.array([n for _, n, _ in pieces], dtype=np.int64)
    col = np.array([c for _, _, c in pieces], dtype=np.int64)
    b = np.sort(np.array(bounds, dtype=np.int64))
    ne = len(b) + 1
    np.testing.assert_array_equal(epoch_counts(start, stop, col, b, ne, 5),
                                  twin_counts(start, stop, col, b, ne, 5))


def test_breakup_record_arithmetic() -> None:
    a = Breakup(application=6, syscall=2, interrupt=1, bottom_half=1, scheduler=5)
    b = Breakup(application=1, syscall=1)
    assert a - b == Breakup(application=5, syscall=1, interrupt=1, bottom_half=1, scheduler=5)
    assert (a - b) + b == a
    assert a.total == 10
    assert a.fractions() == {"application": 0.6, "syscall": 0.2, "interrupt": 0.1,
                             "bottom_half": 0.1, "kernel_thread": 0.0, "unknown": 0.0}
    assert sum(a.fractions(include_scheduler=True).values()) == pytest.approx(1.0)
    assert a.paper_fractions()["application"] == 0.6
    assert a.get(Category.SYSCALL) == 2
    assert Breakup().fractions()["application"] == 0.0


def _trace(tmp_path: Path) -> Path:
    """vCPU 0: 3 rounds of (8 user, syscall 0 with 11 kernel instructions) then schedule."""
    ks = tf.KernelSim()
    for _ in range(3):
        ks.user(0, "A", 2)                    # 8
        ks.syscall(0, T1, 0)                  # 3 user + 3 kernel
        ks.kernel(0, "ksys_read", 2)          # 6
        ks.sysret(0, T1)                      # 2
    ks.syscall(0, T1, 1)                      # 3 user + 3
    ks.switch(0, T1, 0xFFFF888000200000)      # 9 sched (T1) + 9 sched (T2)
    ks.kernel(0, "worker_thread", 2)          # 6 (T2: a kernel thread)
    return ks.write(tmp_path / "t")


def test_breakup_of_a_trace(tmp_path: Path) -> None:
    seg = segment(_trace(tmp_path), epoch_len=16)
    b = instruction_breakup(seg)
    assert b == Breakup(application=3 * 11 + 3, syscall=3 * 11 + 3, kernel_thread=6,
                        scheduler=18)
    assert b.total + b.scheduler == seg.total_insns == 96
    eb = epoch_breakups(seg)
    assert len(eb) == 6 and sum(eb, Breakup()) == b
    assert eb[0] == Breakup(application=11, syscall=5)


def test_epoch_breakup_and_similarity(tmp_path: Path) -> None:
    seg = segment(_trace(tmp_path), epoch_len=19)
    m = epoch_breakup(seg)
    assert m.index.name == "epoch" and m.columns.name == "type"
    assert int(m.to_numpy().sum()) == instruction_breakup(seg).total
    assert syscall_type(0) in m.columns
    by_cat = epoch_breakup(seg, by="category")
    np.testing.assert_array_equal(by_cat.sum(axis=1), m.sum(axis=1))
    sim = consecutive_similarity(m)
    assert list(sim.index) == list(m.index[1:])
    for k in sim.index:
        assert sim[k] == pytest.approx(cosine_similarity(m.loc[k - 1], m.loc[k]))
    with pytest.raises(ValueError, match="by must be"):
        epoch_breakup(seg, by="thread")


def test_cosine_similarity_values() -> None:
    assert cosine_similarity([1, 0], [0, 1]) == 0.0
    assert cosine_similarity([1, 2], [2, 4]) == pytest.approx(1.0)
    assert cosine_similarity([3, 4], [4, 3]) == pytest.approx(24 / 25)
    assert np.isnan(cosine_similarity([0, 0], [1, 0]))
    s = pd.Series([0.2, 0.99, 0.996, 0.999, 0.997, 0.998, 0.9999, 0.5], index=range(1, 9))
    assert steady_state(s, 0.995, 4) == 3
    assert steady_state(s, 0.9999, 2) is None


def test_default_epoch_is_3ms_at_2ghz_ipc_1() -> None:
    assert DEFAULT_EPOCH == 6_000_000


def test_breakup_plots_draw(tmp_path: Path) -> None:
    from pysched.plots import plot_breakup, plot_similarity

    seg = segment(_trace(tmp_path), epoch_len=19)
    ax = plot_breakup({"ours": instruction_breakup(seg),
                       "paper": {"application": 0.35, "syscall": 0.65}}, hatched=("paper",))
    heights = [p.get_height() for p in ax.patches]
    assert sum(heights) == pytest.approx(200.0)           # two bars of 100 %
    ax = plot_similarity({"t": consecutive_similarity(epoch_breakup(seg))})
    assert len(ax.lines) == 2                             # the curve and the 0.995 line
