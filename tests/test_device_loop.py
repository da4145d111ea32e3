"""Devices in a closed loop (pysched.sandbox.device_loop): an interrupt that answers a traced
request comes the traced latency after the request ran in the simulation; ``traced`` keeps it
at its traced arrival; on shipped traces the links reproduce the traced arrivals exactly at
the traced schedule."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sandbox_factory import FIRST, prepared, tiny
from test_sandbox import machine

from pysched.evaluation.runner import evaluate
from pysched.policies import get_policy
from pysched.sandbox import SandboxConfig, build_workload
from pysched.sandbox.engine import Engine
from pysched.studies.ablation import FACTORS
from pysched.superfunctions.segment import segment
from pysched.trace import open_trace

DATA = Path(__file__).resolve().parents[1] / "data"
KICK, DELAY, RELEASE = 30_000, 2e-6, 1e-3


def _requested():
    """A thread of 40,000 instructions on vCPU 0 that kicks a device at instruction 30,000,
    and the device's interrupt on vCPU 1, traced at 1 ms (far later than the kick)."""
    w, fp = tiny([[(0, 40_000, 0, FIRST)]], interrupts=[(1, 100, 1, RELEASE)], vcpus=(0, 1))
    w.req_item[1], w.req_offset[1], w.req_delay[1] = 0, KICK, DELAY
    w.validate()
    return w, fp


def _run(w, fp, timing):
    eng = Engine(w, fp, get_policy("linux"), SandboxConfig(machine(2), device_timing=timing))
    eng.log = []
    eng.run()
    return eng


def test_the_interrupt_follows_its_request_in_the_simulation() -> None:
    eng = _run(*_requested(), "closed")
    kick = next(t1 for g, c, t0, t1, lo, hi in eng.log if g == 0 and hi == KICK)
    start = min(t0 for g, c, t0, t1, lo, hi in eng.log if g == 1)
    assert kick + DELAY <= start <= kick + DELAY + eng.cfg.ipi_s + 1e-12
    assert start < RELEASE


def test_traced_timing_keeps_the_traced_arrival() -> None:
    eng = _run(*_requested(), "traced")
    start = min(t0 for g, c, t0, t1, lo, hi in eng.log if g == 1)
    assert start >= RELEASE
    # no chunk ends at the request's offset: it is no event in an open loop
    assert all(hi != KICK for g, c, t0, t1, lo, hi in eng.log if g == 0)


def test_a_later_request_delays_its_answer() -> None:
    """The requester starts late (it waits for another thread's wake-up): the answer moves
    with it, which the traced arrival cannot."""
    w, fp = tiny([[(0, 5_000, 0, FIRST)], [(0, 40_000, 0, FIRST)]],
                 interrupts=[(1, 100, 1, RELEASE)], deps=[(1, 0, 5_000)], vcpus=(0, 1))
    w.req_item[2], w.req_offset[2], w.req_delay[2] = 1, KICK, DELAY
    eng = _run(w, fp, "closed")
    kick = next(t1 for g, c, t0, t1, lo, hi in eng.log if g == 1 and hi == KICK)
    waker_end = max(t1 for g, c, t0, t1, lo, hi in eng.log if g == 0)
    start = min(t0 for g, c, t0, t1, lo, hi in eng.log if g == 2)
    assert kick > waker_end and start >= kick + DELAY


def test_the_config_and_the_ablation_name_the_setting() -> None:
    with pytest.raises(ValueError, match="device_timing must be one of closed, traced"):
        SandboxConfig(device_timing="open")
    assert FACTORS["device_timing"].settings == ("closed", "traced")
    with pytest.raises(ValueError, match="req_item"):
        w, _ = _requested()
        w.req_item[1] = 5
        w.validate()


def test_runs_record_the_device_timing() -> None:
    t = prepared([[(0, 4_000, 0, FIRST)]])
    for timing in ("closed", "traced"):
        _, runs = evaluate([t], ["linux"], [2], [1], switch_cost="zero",
                           config={"device_timing": timing})
        assert runs["device_timing"].tolist() == [timing]


def _kick_seconds(w, clock, item, offset):
    """Machine time of instruction ``offset`` of ``item`` (its runs in order)."""
    for r in range(int(w.run_ptr[item]), int(w.run_ptr[item + 1])):
        n = int(w.run_stop[r] - w.run_start[r])
        if offset <= n:
            ic = np.array([int(w.run_start[r]) + offset], dtype=np.int64)
            return float(clock.seconds(int(w.run_vcpu[r]), ic)[0])
        offset -= n
    raise AssertionError("offset beyond the item")


@pytest.mark.parametrize("name", ["iscp", "netserver-10b"])
def test_shipped_links_reproduce_the_traced_arrivals(name: str) -> None:
    path = DATA / name
    if not path.is_dir():
        pytest.skip(f"data/{name} not shipped")
    tr = open_trace(path)
    seg = segment(tr)
    w = build_workload(seg, tr, name=name)
    closed = np.flatnonzero(w.req_item >= 0)
    assert w.device_completions > 0 and w.device_arrivals > 0
    assert len(closed) == w.device_completions + w.device_arrivals
    assert (w.req_item[closed] != closed).all() and (w.release[closed] > 0).all()
    for it in closed.tolist():
        kick = _kick_seconds(w, seg.clock, int(w.req_item[it]), int(w.req_offset[it]))
        if w.req_delay[it] > 0:
            assert kick + w.req_delay[it] == pytest.approx(w.release[it], rel=0, abs=1e-12)
        else:
            assert kick >= w.release[it] - 1e-12
