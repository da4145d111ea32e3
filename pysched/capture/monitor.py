"""Watching a Debian guest run from the host: starting its peer, ending its region.

:class:`RunMonitor` is called about twice a second while QEMU runs
(:func:`pysched.capture.qemu.run_qemu`'s ``poll``). It

- starts the host-side peer when the console shows ``=== PYSCHED PEER START ===``;
- tells the guest to close its region of interest (``stop`` on the control serial port,
  ttyS2, which ``roi-wait`` in the guest watches) when the peer has ended by itself, when
  the plugin reports that it ended the region at the ``--roi-insns`` bound
  (:class:`pysched.capture.roiwatch.RoiBoundWatch`; the trace is then complete, the guest
  only has to wind down), or at the run's region deadline (on the instruction clock, where
  the guest's own time backstop would come after the timeout);
- stops the peer as soon as the plugin has ended the region at the bound, or the guest is
  done (``=== PYSCHED EXIT``), so that no traffic reaches a guest that is shutting down, or
  else when the run ends; and sums it all up for the manifest.
"""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from pysched.capture import console as con
from pysched.capture.peers import Peer
from pysched.capture.roiwatch import RoiBoundWatch

#: The console line after which the host starts the peer (guest/workloads/lib.sh peer_start).
PEER_START_MARK = b"=== PYSCHED PEER START ==="
#: The guest's last line before it powers off (guest/debian/init.sh).
EXIT_MARK = con.EXIT_MARK.encode()

# A "stop" is repeated this often until QEMU exits: the guest may not have opened the port yet.
_STOP_REPEAT_SECONDS = 2.0


class RunMonitor:
    """Host-side duties during one Debian guest run.

    Parameters
    ----------
    console : Path
        The console log QEMU writes.
    control : Path or None
        The control port's unix socket (QEMU listens on it).
    peer : Peer or None
        The workload's host-side peer.
    out_dir : Path or None
        The trace directory, with ``roi_insns``.
    roi_insns : int or None
        The plugin's ``roi_insns`` bound: say ``stop`` once the plugin has ended the region
        there.
    region_deadline : float or None
        With ``roi_insns``: say ``stop`` when the run has lasted this many seconds and the
        bound has not ended the region.
    """

    def __init__(self, console: Path, control: Path | None = None, peer: Peer | None = None,
                 out_dir: Path | None = None, roi_insns: int | None = None,
                 region_deadline: float | None = None):
        if roi_insns is not None and (out_dir is None or control is None):
            raise ValueError("roi_insns needs the trace directory and the control port")
        self.console = console
        self.control = control
        self.peer = peer
        self.roi_insns = roi_insns
        self.region_deadline = region_deadline if roi_insns is not None else None
        self.bound = RoiBoundWatch(out_dir) if roi_insns is not None and out_dir else None
        self._offset = 0
        self._tail = b""
        self._seen_start = False
        self._seen_exit = False
        self.peer_started_at: float | None = None
        self._peer_summary: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.stop_at: float | None = None
        self._last_stop_sent = -1e9
        self._sock: socket.socket | None = None
        self.control_errors: list[str] = []

    def _read_console(self) -> None:
        """Look for the peer-start and exit lines in what the console gained since last time."""
        try:
            with open(self.console, "rb") as f:
                f.seek(self._offset)
                new = f.read()
        except OSError:
            return
        self._offset += len(new)
        window = self._tail + new
        self._tail = window[-len(PEER_START_MARK):]
        self._seen_start = self._seen_start or PEER_START_MARK in window
        self._seen_exit = self._seen_exit or EXIT_MARK in window

    def _send_stop(self, elapsed: float) -> None:
        if self.control is None or elapsed - self._last_stop_sent < _STOP_REPEAT_SECONDS:
            return
        self._last_stop_sent = elapsed
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._sock.connect(str(self.control))
            self._sock.sendall(b"stop\n")
        except OSError as e:
            if len(self.control_errors) < 5:
                self.control_errors.append(f"{type(e).__name__}: {e}")
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    def poll(self, elapsed: float) -> None:
        """One round of duties; ``elapsed`` is the run's wall time so far."""
        self._read_console()
        if self._seen_exit:
            # The guest is done: nothing more to say to it, and its peer must go quiet.
            if self.peer is not None and self._peer_summary is None:
                self._peer_summary = self.peer.stop()
            return
        if self.peer is not None and self.peer_started_at is None and self._seen_start:
            self.peer.start()
            self.peer_started_at = elapsed
        if self.stop_reason is None:
            if self.peer is not None and self.peer_started_at is not None \
                    and self.peer.finished():
                self.stop_reason = "the host's peer ended"
            elif self.bound is not None and self.bound.poll():
                self.stop_reason = (f"the plugin ended the region: every vCPU retired at "
                                    f"least {self.roi_insns} instructions in it")
                # The trace is complete: stop the peer now, or the guest's shutdown (within a
                # poll or two of the stop) cuts its connection first and a peer that was still
                # working when the region ended (scp) reads as failed.
                if self.peer is not None and self.peer_started_at is not None \
                        and self._peer_summary is None:
                    self._peer_summary = self.peer.stop()
            elif self.region_deadline is not None and elapsed >= self.region_deadline:
                self.stop_reason = (f"the region was still open after {self.region_deadline:g} s "
                                    "of the run (half the timeout): a vCPU short of --roi-insns")
            if self.stop_reason is not None:
                self.stop_at = elapsed
        if self.stop_reason is not None:
            self._send_stop(elapsed)

    def finish(self) -> dict[str, Any]:
        """Stop the peer and close the control connection; the summary for the manifest.

        Returns
        -------
        dict
            ``peer`` (the peer's summary or None), ``host_stop`` (why and when the host told
            the guest to close its region, with ``insns_recorded`` per vCPU when the plugin
            had ended it at the bound; None when the guest's own bound did) and
            ``control_errors``.
        """
        peer = None
        if self.peer is not None:
            peer = self._peer_summary if self._peer_summary is not None else self.peer.stop()
            peer["started_after_seconds"] = (round(self.peer_started_at, 3)
                                             if self.peer_started_at is not None else None)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        host_stop = None
        if self.stop_reason is not None:
            host_stop = {"reason": self.stop_reason, "after_seconds": round(self.stop_at or 0, 3)}
            if self.bound is not None and self.bound.ended:
                host_stop["insns_recorded"] = self.bound.window_icount
        return {"peer": peer, "host_stop": host_stop, "control_errors": self.control_errors}


__all__ = ["RunMonitor", "PEER_START_MARK"]
