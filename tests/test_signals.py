"""SIGTERM and SIGHUP unwind every command like Ctrl-C and end it with 128 + the signal."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pysched import _signals

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_signal_in_the_block_raises_terminated_and_the_handlers_come_back():
    # the default dispositions, whatever pytest inherited (under nohup SIGHUP is ignored, and
    # stays so: test_a_signal_the_process_ignores_stays_ignored)
    inherited = {s: signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with pytest.raises(KeyboardInterrupt) as e:
                with _signals.unwinding():
                    os.kill(os.getpid(), sig)
                    signal.sigtimedwait([], 1)  # let the handler run
            assert isinstance(e.value, _signals.Terminated) and e.value.signum == sig
            assert _signals.exit_status(e.value) == 128 + sig
            assert _signals.how(e.value) == f"stopped by {sig.name}"
            assert signal.getsignal(sig) is signal.SIG_DFL
    finally:
        for s, h in inherited.items():
            signal.signal(s, h)
    assert _signals.exit_status(KeyboardInterrupt()) == 130
    assert _signals.how(KeyboardInterrupt()) == "interrupted"


def test_a_signal_the_process_ignores_stays_ignored():
    # nohup: SIGHUP ignored from the start, and a run that outlives its terminal keeps going
    from pysched.capture.runfiles import signals_raise
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        for block in (_signals.unwinding, signals_raise):
            with block():
                assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
                assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
                os.kill(os.getpid(), signal.SIGHUP)
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def _ctrl_c(*a, **k):
    raise KeyboardInterrupt


def _sigterm(*a, **k):
    os.kill(os.getpid(), signal.SIGTERM)
    signal.sigtimedwait([], 1)
    raise AssertionError("SIGTERM did not unwind")


@pytest.mark.parametrize("stop, status, said", [(_ctrl_c, 130, "interrupted"),
                                                (_sigterm, 143, "stopped by SIGTERM")],
                         ids=["ctrl-c", "sigterm"])
def test_a_stopped_evaluate_says_so_in_one_line_and_leaves_nothing_finished(
        stop, status, said, tmp_path, monkeypatch, capsys):
    from pysched.cli import main
    from pysched.evaluation import command, runner
    monkeypatch.setattr(runner, "evaluate", stop)
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "o"
    assert main(["evaluate", str(DATA / "dss-mem"), "--policies", "linux", "--cores", "2",
                 "--out", str(out)]) == status
    assert f"{said}; nothing written to" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob(".o.*"))
    # a command without a handler of its own: the command line's one line
    monkeypatch.setattr(command, "run", stop)
    assert main(["evaluate", "x", "--out", str(out)]) == status
    assert f"pysched evaluate: {said}" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) == before
