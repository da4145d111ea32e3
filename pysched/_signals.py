"""SIGTERM and SIGHUP unwind a command like Ctrl-C, so that the same clean-up runs (temporary
outputs removed, worker processes and local clusters stopped), and the command then exits with
128 + the signal, as a shell reports a process the signal ended (130 for Ctrl-C, 143 for
SIGTERM). ``pysched trace`` has its own handlers (:mod:`pysched.capture.runfiles`), inside
these."""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """Raised by the handlers of :func:`unwinding`: a ``KeyboardInterrupt``, so that every
    ``except KeyboardInterrupt`` clean-up runs for it too.

    Parameters
    ----------
    signum : int
        The signal.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def _raise(signum, frame):
    raise Terminated(signum)


@contextlib.contextmanager
def unwinding() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated`, unless the process
    ignores them (``nohup``); the former handlers are restored after it. Outside the main
    thread (where Python cannot handle signals) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a signal the process was started ignoring (SIGHUP under nohup) stays ignored
    old = {s: signal.signal(s, _raise) for s in _SIGNALS
           if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def exit_status(e: KeyboardInterrupt) -> int:
    """The exit status of a command that ``e`` interrupted: 128 + its signal (130: Ctrl-C)."""
    return 128 + (e.signum if isinstance(e, Terminated) else int(signal.SIGINT))


def how(e: KeyboardInterrupt) -> str:
    """``interrupted`` (Ctrl-C) or ``stopped by SIGTERM`` (or SIGHUP), for a message."""
    return f"stopped by {signal.Signals(e.signum).name}" if isinstance(e, Terminated) \
        else "interrupted"
