"""Check ``timer`` (issue 32, item 1): local timer interrupts per G instructions per vCPU are
reported for every trace; a trace whose manifest records the guest clock from instructions
fails above 4x what its HZ and instruction rate give, and every command that reads it refuses
it; a trace on the host's clock is reported and not failed; the shipped traces (instruction
clock) are judged and pass.

The synthetic trace is :func:`tracefactory.sample` with its page fault turned into a local
timer interrupt: one in 51 instructions, far above any bound, unless it came in the kernel's
idle functions (the trace's ``System.map`` then puts its PC in ``.cpuidle.text``).
"""
from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

import tracefactory as tf
from pysched.trace import TraceRejected, preflight
from pysched.trace import checker as check_cli
from pysched.trace.checker.timer import LOCAL_TIMER_VECTOR, expected_rate

INSNS_CLOCK = {"source": "insns", "icount": "shift=0,sleep=on", "machine_insn_rate": 1e9,
               "insn_rate_per_vcpu": 5e8, "hz": 250}


def _check(path: Path) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    check_cli.add_arguments(parser)
    out = io.StringIO()
    return check_cli.run(parser.parse_args([str(path)]), out=out), out.getvalue()


def _trace(tmp_path: Path, clock: dict | None, *, timer: bool = True,
           idle: bool = False) -> Path:
    f = tf.sample()
    row = f.rows["interrupts"][0][0]
    if timer:
        row.update(vector=LOCAL_TIMER_VECTOR, error_code=0, user=0 if idle else row["user"])
    path = f.write(tmp_path / "t")
    if idle:
        (path / "System.map").write_text(f"{row['pc']:016x} T __cpuidle_text_start\n"
                                         f"{row['pc'] + 16:016x} T __cpuidle_text_end\n")
    manifest = {} if clock is None else {"guest_clock": clock}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def test_expected_rate_from_hz_and_the_instruction_rate() -> None:
    assert expected_rate(INSNS_CLOCK) == 500.0
    assert expected_rate({**INSNS_CLOCK, "insn_rate_per_vcpu": 1e9}) == 250.0
    assert expected_rate({**INSNS_CLOCK, "hz": None}) is None
    assert expected_rate({"source": "host", "hz": 250}) is None
    assert expected_rate(None) is None


def test_instruction_clock_trace_over_the_bound_fails_everywhere(tmp_path: Path) -> None:
    path = _trace(tmp_path, INSNS_CLOCK)
    status, out = _check(path)
    assert status == 1, out
    assert "check timer: 1 violation" in out, out
    for words in ("per G instructions per vCPU (v0 27,027,027, v1 0; the trace has no "
                  "System.map with __cpuidle_text_start", "over 4x the 500",
                  "HZ 250 and 500 M instructions a second per vCPU",
                  "pysched trace --clock insns"):
        assert words in out, (words, out)
    with pytest.raises(TraceRejected, match="over 4x the 500"):
        preflight(path)


def test_instruction_clock_trace_within_the_bound_passes(tmp_path: Path) -> None:
    status, out = _check(_trace(tmp_path, INSNS_CLOCK, timer=False))
    assert status == 0, out
    assert "check timer: ok" in out
    assert "timer: 0 local timer interrupts (vector 236) per G instructions per vCPU" in out
    assert "at most 500 expected from HZ 250" in out and "fails above 2,000" in out


def test_timer_interrupts_in_the_idle_loop_are_reported_not_judged(tmp_path: Path) -> None:
    path = _trace(tmp_path, INSNS_CLOCK, idle=True)
    status, out = _check(path)
    assert status == 0, out
    assert ("0 local timer interrupts (vector 236) per G instructions per vCPU outside the idle "
            "loop (v0 0, v1 0; 19,607,843 with the 1 that came while idle)") in out, out
    preflight(path)


@pytest.mark.parametrize("name, data", [("System.map.xz", b"not xz\n"),
                                        ("System.map.gz", b"not gzip\n"),
                                        ("System.map", b"zz T __cpuidle_text_start\n")])
def test_a_map_that_cannot_be_read_is_a_violation_naming_it(tmp_path: Path, name: str,
                                                             data: bytes) -> None:
    path = _trace(tmp_path, INSNS_CLOCK, timer=False)
    (path / name).write_bytes(data)
    status, out = _check(path)
    assert status == 1, out
    assert "check timer: 1 violation" in out and f"{name}: cannot read symbol map" in out, out
    with pytest.raises(TraceRejected, match="cannot read symbol map"):
        preflight(path)


@pytest.mark.parametrize("clock, why", [
    (None, "the guest clock was the host's"),
    ({"source": "host", "icount": None, "machine_insn_rate": None, "insn_rate_per_vcpu": None,
      "hz": 250}, "the guest clock was the host's"),
    ({**INSNS_CLOCK, "hz": None}, "lacks hz"),
])
def test_host_clock_or_unknown_hz_is_reported_not_failed(tmp_path: Path, clock: dict | None,
                                                         why: str) -> None:
    path = _trace(tmp_path, clock)
    status, out = _check(path)
    assert status == 0, out
    assert "check timer: ok" in out
    assert "27,027,027" in out and "not judged" in out and why in out, out
    preflight(path)  # accepted


def test_shipped_trace_is_judged_and_within_the_bound() -> None:
    root = Path(__file__).resolve().parents[1] / "data" / "dss-mem"
    if not root.is_dir():
        pytest.skip("data/dss-mem not shipped")
    status, out = _check(root)
    assert status == 0, out
    assert "check timer: ok" in out
    assert "local timer interrupts (vector 236) per G instructions per vCPU" in out
    assert "expected from HZ 250 and 500 M instructions a second per vCPU" in out, out
    assert "not judged" not in out
