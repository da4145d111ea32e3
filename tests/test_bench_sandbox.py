"""benchmarks/sandbox.py's scaling rows: cost per instruction and the model's work beside it."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "bench_sandbox", Path(__file__).resolve().parents[1] / "benchmarks" / "sandbox.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def test_cost_and_work_of_a_hand_made_row():
    row = {"sim_insns": 900, "switch_insns": 100, "cpu_s": 2e-6, "cache_accesses": 500,
           "l1_misses": 40, "l2_misses": 10, "l3_misses": 2}
    got = bench.cost_and_work(row)
    assert got["cpu_ns_per_insn"] == pytest.approx(2000 / 900)
    assert got["accesses_per_insn"] == pytest.approx(0.5)  # over 1,000 instructions run
    assert got["cpu_ns_per_access"] == pytest.approx(4.0)
    assert [got[f"l{k}_misses_per_kinsn"] for k in (1, 2, 3)] == pytest.approx([40, 10, 2])


def test_cost_and_work_of_an_empty_row_is_finite():
    row = {"sim_insns": 0, "switch_insns": 0, "cpu_s": 0.5, "cache_accesses": 0,
           "l1_misses": 0, "l2_misses": 0, "l3_misses": 0}
    got = bench.cost_and_work(row)
    assert got["accesses_per_insn"] == 0 and got["l1_misses_per_kinsn"] == 0


_SPLIT_SPEC = importlib.util.spec_from_file_location(
    "bench_sandbox_split",
    Path(__file__).resolve().parents[1] / "benchmarks" / "sandbox_split.py")
split = importlib.util.module_from_spec(_SPLIT_SPEC)
_SPLIT_SPEC.loader.exec_module(split)


def test_by_core_groups_calls_and_keeps_each_cores_order():
    calls = [(2, "a"), (0, "b"), (2, "c"), (1, "d"), (0, "e")]
    assert split.by_core(calls) == [(0, "b"), (0, "e"), (1, "d"), (2, "a"), (2, "c")]


def test_split_summary_of_a_hand_made_run():
    row = split.summary(insns=1000, cpu_s=3e-6, kernel_s=2e-6, chunks=4, accesses=500,
                        replays={"as_run": [(1.5e-6, 10), (1e-6, 12)],
                                 "by_core": [(0.5e-6, 8), (0.8e-6, 9)]})
    assert row["cpu_ns_per_insn"] == pytest.approx(3.0)
    assert row["kernel_ns_per_insn"] == pytest.approx(2.0)
    assert row["engine_ns_per_insn"] == pytest.approx(1.0)
    assert row["chunks_per_kinsn"] == pytest.approx(4.0)
    assert row["kernel_ns_per_access"] == pytest.approx(4.0)
    # the fastest run of each order, and that run's L3 misses
    assert row["as_run_ns_per_access"] == pytest.approx(2.0)
    assert row["as_run_l3_misses_per_kacc"] == pytest.approx(24.0)
    assert row["by_core_ns_per_access"] == pytest.approx(1.0)
    assert row["by_core_l3_misses_per_kacc"] == pytest.approx(16.0)
    assert row["as_run_over_by_core"] == pytest.approx(2.0)


def test_split_of_a_shipped_trace(capsys):
    trace = Path(__file__).resolve().parents[1] / "data" / "netserver-10b"
    assert split.main([str(trace), "2", "1", "1"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["cores"] == 2 and row["trace"] == "netserver-10b" and row["chunks"] > 0
    assert row["cache_accesses"] > 0 and row["sim_insns"] > 0
    # the replays ran every access the run did (main refuses otherwise), in both orders
    assert row["as_run_ns_per_access"] > 0 and row["by_core_ns_per_access"] > 0
    assert 0 < row["kernel_ns_per_insn"] < row["cpu_ns_per_insn"]
