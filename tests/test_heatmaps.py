"""Page-heatmaps: the paper's hash, Bloom filters and overlaps against slow twins, the overlap
table, and Kendall tau-b against filter size."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pytest
import tracefactory as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.heatmaps import (
    SIZES,
    EpochPages,
    PageHeatmaps,
    bloom_bit,
    bloom_filters,
    overlap_matrix,
    overlap_table,
    page_hash,
    tau_per_type,
    tau_vs_size,
    unpack_bits,
)
from pysched.superfunctions import Category, segment

OS, APP = int(Category.SYSCALL), int(Category.APPLICATION)

matplotlib.use("Agg")  # before any figure is made (pysched.plots imports pyplot lazily)

from twins.heatmaps import twin_filters, twin_hash  # noqa: E402


# --- hash ------------------------------------------------------------------------------------

def test_hash_matches_hand_computed_values() -> None:
    # 0x1234: only the >> 9 term is non-zero: 0x1234 + 0x9 = 0x123d; 0x123d % 512 = 0x3d.
    assert page_hash(0x1234) == 0x123D
    assert bloom_bit(0x1234) == 61
    # 2**18 = 0x40000: 0x40000 + 0x200 (>> 9) + 1 (>> 18) = 0x40201; mod 512 = 1; mod 128 = 1.
    assert page_hash(1 << 18) == 0x40201 and bloom_bit(1 << 18, 512) == 1
    # 2**45: every shift contributes 2**(45 - s): 2**45 + 2**36 + 2**27 + 2**18 + 2**9 + 1.
    assert page_hash(1 << 45) == (1 << 45) + (1 << 36) + (1 << 27) + (1 << 18) + (1 << 9) + 1
    assert bloom_bit(1 << 45, 2048) == 512 + 1
    arr = np.array([0x1234, 1 << 18, 0], dtype=np.uint64)
    np.testing.assert_array_equal(bloom_bit(arr, 512), [61, 1, 0])
    with pytest.raises(ValueError):
        bloom_bit(1, 0)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**52 - 1), st.sampled_from(SIZES + (100, 64)))
def test_hash_equals_twin(pf: int, nbits: int) -> None:
    assert page_hash(pf) == twin_hash(pf)
    assert bloom_bit(np.array([pf], dtype=np.uint64), nbits)[0] == twin_hash(pf) % nbits


# --- Bloom filters and overlap -------------------------------------------------------------------

def _bits(filters: np.ndarray, nbits: int) -> list[set[int]]:
    u = unpack_bits(filters, nbits)
    return [set(np.flatnonzero(row).tolist()) for row in u]


def test_bloom_filters_hand_made() -> None:
    f = bloom_filters(np.array([0, 0, 1]), np.array([0x1234, 1 << 18, 0x1234]), 3, 128)
    assert f.shape == (3, 2)
    # 0x123d % 128 = 61; 0x40201 % 128 = 1.
    assert _bits(f, 128) == [{61, 1}, {61}, set()]
    m = overlap_matrix(f)
    np.testing.assert_array_equal(m, [[2, 1, 0], [1, 1, 0], [0, 0, 0]])
    with pytest.raises(ValueError, match="group ids"):
        bloom_filters(np.array([3]), np.array([1]), 2, 128)
    with pytest.raises(ValueError, match="one length"):
        bloom_filters(np.array([0, 1]), np.array([1]), 2, 128)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**40)), max_size=200),
       st.sampled_from(SIZES + (96,)))
def test_bloom_and_overlap_equal_twins(pairs, nbits) -> None:
    group = np.array([g for g, _ in pairs], dtype=np.int64)
    pfn = np.array([p for _, p in pairs], dtype=np.uint64)
    f = bloom_filters(group, pfn, 6, nbits)
    want = twin_filters(group, pfn, 6, nbits)
    assert _bits(f, nbits) == want
    m = overlap_matrix(f)
    for i in range(6):
        for j in range(6):
            assert m[i, j] == len(want[i] & want[j])


# --- page sets, overlap table, tau --------------------------------------------------------------

def pages_of(sets: dict[int, tuple[int, list[int]]]) -> EpochPages:
    """EpochPages from {type: (category, frames)}."""
    types = np.array(sorted(sets), dtype=np.uint64)
    group, pfn = [], []
    for i, t in enumerate(types.tolist()):
        for p in sets[t][1]:
            group.append(i)
            pfn.append(p)
    return EpochPages(0, types, np.array([sets[t][0] for t in types.tolist()], dtype=np.int8),
                      [f"t{t}" for t in types.tolist()], np.array(group, dtype=np.int64),
                      np.array(pfn, dtype=np.uint64))


def test_exact_overlap_and_table() -> None:
    p = pages_of({1: (OS, [1, 2, 3, 4]), 2: (OS, [3, 4, 5]), 3: (OS, [4, 9]),
                  10: (APP, [1, 2, 3]), 11: (APP, [2, 3])})
    np.testing.assert_array_equal(p.exact_overlap(), [[4, 2, 1, 3, 2], [2, 3, 1, 1, 1],
                                                      [1, 1, 2, 0, 0], [3, 1, 0, 3, 2],
                                                      [2, 1, 0, 2, 2]])
    t = overlap_table(p, nbits=None)
    # OS/application pairs and self pairs are not listed.
    assert set(zip(t["type"], t["other"])) == {(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2),
                                               (10, 11), (11, 10)}
    row1 = t[t["type"] == 1]
    assert list(row1["other"]) == [2, 3] and list(row1["overlap"]) == [2, 1]
    assert list(row1["rank"]) == [1, 2]
    both = overlap_table(p, nbits=None, os_app=True)
    assert len(both) == 20
    assert int(both[(both["type"] == 1) & (both["other"] == 10)]["overlap"].iloc[0]) == 3


def collision_free(n: int, nbits: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` frames whose bits in an ``nbits``-bit heatmap are all different."""
    out, used = [], set()
    while len(out) < n:
        p = int(rng.integers(0, 2**36))
        b = twin_hash(p) % nbits
        if b not in used:
            used.add(b)
            out.append(p)
    return np.array(out, dtype=np.uint64)


def test_tau_is_one_without_collisions() -> None:
    rng = np.random.default_rng(1)
    frames = collision_free(60, 512, rng)
    sets = {}
    for t in range(8):
        k = rng.integers(3, 30)
        sets[t] = (OS, sorted(rng.choice(frames, size=k, replace=False).tolist()))
    p = pages_of(sets)
    np.testing.assert_array_equal(p.bloom_overlap(512), p.exact_overlap())
    tau = tau_per_type(p, 512)
    assert len(tau) > 0 and np.allclose(tau["tau"], 1.0)


def test_tau_drops_with_collisions() -> None:
    rng = np.random.default_rng(2)
    pool = rng.integers(0, 2**30, size=600)
    sets = {t: (OS, rng.choice(pool, size=int(rng.integers(20, 300)), replace=False).tolist())
            for t in range(12)}
    p = pages_of(sets)
    small = tau_per_type(p, 16)["tau"].mean()
    big = tau_per_type(p, 2048)["tau"].mean()
    assert small < big <= 1.0


def test_tau_is_zero_when_the_filter_cannot_tell_types_apart() -> None:
    # Type 0's neighbours have 3, 2 and 1 common frames, but a 1-bit filter gives every AND
    # the same weight: the estimate orders nothing (tau 0, not left out). Type 4's exact
    # overlaps are all equal: no reference ranking at any size, so it is left out.
    p = pages_of({0: (OS, [1, 2, 3]), 1: (OS, [1, 2, 3]), 2: (OS, [1, 2]), 3: (OS, [1]),
                  4: (APP, [50, 51]), 5: (APP, [50, 60]), 6: (APP, [51, 61])})
    one = tau_per_type(p, 1)
    assert 4 not in one["type"].tolist()
    row = one[one["type"] == 0]
    assert len(row) == 1 and float(row["tau"].iloc[0]) == 0.0
    # Small frames hash to themselves (no shift reaches them), so 2048 bits have no
    # collision here: the same types are ranked, type 0 exactly as the page sets do.
    np.testing.assert_array_equal(p.bloom_overlap(2048), p.exact_overlap())
    big = tau_per_type(p, 2048)
    assert sorted(big["type"].tolist()) == sorted(one["type"].tolist())
    assert float(big.loc[big["type"] == 0, "tau"].iloc[0]) == 1.0


# --- on a segmentation -------------------------------------------------------------------------

def _trace(tmp_path: Path) -> Path:
    ks = tf.KernelSim(nvcpus=2)
    T1, T2 = 0xFFFF888000100000, 0xFFFF888000200000
    for rep in range(3):
        for v, t in ((0, T1), (1, T2)):
            ks.user(v, "A" if v == 0 else "B", 2)
            ks.syscall(v, t, rep % 2, "A" if v == 0 else "B", cr3=0x1000 * (v + 1))
            ks.kernel(v, "ksys_read", 2)
            ks.interrupt(v, t, 236, user=0)
            ks.softirq(v)
            ks.iret(v, t, user=0)
            ks.sysret(v, t, cr3=0x1000 * (v + 1))
    return ks.write(tmp_path / "t")


def test_page_heatmaps_from_a_segmentation(tmp_path: Path) -> None:
    seg = segment(_trace(tmp_path), epoch_len=20)
    heat = PageHeatmaps(seg)
    assert heat.nepochs == seg.nepochs
    total = set()
    for k in range(heat.nepochs):
        e = heat.epoch(k)
        h = seg.heat[seg.heat["epoch"] == k]
        for i, t in enumerate(e.types.tolist()):
            assert set(e.pages(i).tolist()) == set(h.loc[h["type"] == t, "pfn"].tolist())
        total |= set(zip(h["type"].tolist(), h["pfn"].tolist()))
    whole = heat.epoch(None)
    assert {(int(whole.types[g]), int(p)) for g, p in zip(whole.group, whole.pfn)} == total
    assert set(whole.labels) >= {"syscall 0", "syscall 1", "vector 236",
                                 "bh run_timer_softirq"}
    # Two applications (A, B) and OS types: the table never pairs them.
    t = overlap_table(whole)
    cats = dict(zip(whole.types.tolist(), whole.category.tolist()))
    assert all((cats[a] == APP) == (cats[b] == APP) for a, b in zip(t["type"], t["other"]))
    with pytest.raises(IndexError):
        heat.epoch(heat.nepochs)
    tv = tau_vs_size(heat, sizes=(128, 2048))
    assert list(tv["bits"]) == [128, 2048]
    assert (tv["tau_mean"].dropna() <= 1.0).all()


def test_plots_draw(tmp_path: Path) -> None:
    from pysched.plots import plot_heatmaps, plot_overlap, plot_tau

    seg = segment(_trace(tmp_path), epoch_len=20)
    heat = PageHeatmaps(seg)
    ax = plot_heatmaps(heat.epoch(None), 256)
    assert ax.images[0].get_array().shape == (len(heat.epoch(None)), 256)
    ax = plot_overlap(heat.epoch(None), None)
    assert ax.images[0].get_array().shape[0] == len(heat.epoch(None))
    ax = plot_tau(tau_vs_size(heat, sizes=(128, 256, 512)), label="t")
    assert len(ax.lines) == 1 and list(ax.lines[0].get_xdata()) == [128, 256, 512]
