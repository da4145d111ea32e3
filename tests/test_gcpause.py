"""The cyclic collector paused around replays (pysched._gcpause)."""
from __future__ import annotations

import gc
import threading

import pytest

from sandbox_factory import FIRST, tiny
from test_sandbox import machine

from pysched._gcpause import paused_gc
from pysched.policies import get_policy
from pysched.sandbox import SandboxConfig, simulate


def test_the_collector_is_off_inside_and_as_before_after():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_threads_overlapping_leave_it_on_once_the_last_one_leaves():
    first_in, second_done = threading.Event(), threading.Event()
    seen = []

    def first():
        with paused_gc():
            first_in.set()
            second_done.wait(10)
            seen.append(gc.isenabled())

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(10)
    with paused_gc():
        pass
    second_done.set()  # the second left first: still off for the first
    t.join(10)
    assert seen == [False]
    assert gc.isenabled()


def test_a_replay_leaves_the_collector_on_even_when_it_fails():
    w, fp = tiny([[(0, 100, 0, FIRST)]])
    cfg = SandboxConfig(machine(1), switch_cycles=0)
    simulate(w, fp, get_policy("linux"), cfg)
    assert gc.isenabled()
    bad = get_policy("linux")
    bad.thread_ready = lambda work, last: 99  # no such core: the replay raises inside
    with pytest.raises(ValueError, match="returned core 99"):
        simulate(w, fp, bad, cfg)
    assert gc.isenabled()
