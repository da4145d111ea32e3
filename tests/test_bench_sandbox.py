"""benchmarks/sandbox.py's scaling rows: cost per instruction and the model's work beside it."""
from __future__ import annotations

import importlib.util
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
