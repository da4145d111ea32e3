"""Host-side peers of the network workloads: the other end of the guest's connections.

Each peer runs on this machine and talks to the guest only through 127.0.0.1 ports that QEMU
user networking forwards to it. It is bounded in count (the workload's parameters: one file, N
requests) and in time (the run's timeout; pysched stops it when QEMU exits). Its output goes to
``peer.log`` in the trace directory and a summary into the manifest.

=========  ==================================================================================
scp-in     ``scp`` of a sparse SIZE_MB file to the guest's ``/srv/incoming/file``
scp-out    ``scp`` of the guest's ``/srv/outgoing/file`` to /dev/null
ab         ApacheBench: ``ab -n REQUESTS -c CONCURRENCY -r http://127.0.0.1:PORT/PATH``
netclient  our request client (threads in this process) for the guest's netserver
=========  ==================================================================================
"""
from __future__ import annotations

import os
import re
import shutil
from abc import ABC, abstractmethod
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

#: The peer's log file in the trace directory.
PEER_LOG = "peer.log"

#: Seconds a stopped peer process gets to exit after SIGINT/SIGTERM before SIGKILL.
_STOP_GRACE_SECONDS = 5.0


class PeerError(Exception):
    """A peer could not be set up (a missing host program, bad parameters)."""


@dataclass
class PeerContext:
    """What a peer needs to know about the run.

    Attributes
    ----------
    params : mapping
        The workload's parameters.
    ports : mapping
        Guest TCP port -> host port on 127.0.0.1.
    work_dir : Path
        A scratch directory that lives as long as the run.
    log : Path
        The peer's log file (``peer.log`` in the trace directory).
    ssh_key, ssh_host_key : Path or None
        The host's private key for the guest's root and the guest's public host key.
    """

    params: Mapping[str, str]
    ports: Mapping[int, int]
    work_dir: Path
    log: Path
    ssh_key: Path | None = None
    ssh_host_key: Path | None = None


class Peer(ABC):
    """A host-side peer: started once, polled, stopped when the run ends."""

    kind = "peer"

    @abstractmethod
    def start(self) -> None:
        """Start it (when the guest is ready)."""

    @abstractmethod
    def finished(self) -> bool:
        """Whether it has ended by itself."""

    @abstractmethod
    def stop(self) -> dict[str, Any]:
        """End it if it still runs; return a JSON-ready summary for the manifest."""


class ProcessPeer(Peer):
    """A peer that is one host program.

    Parameters
    ----------
    kind : str
        The peer's name.
    argv : list of str
        The command line.
    log : Path
        Receives its stdout and stderr.
    interrupt_first : bool
        Stop it with SIGINT before SIGTERM (ab prints its results on SIGINT).
    """

    def __init__(self, kind: str, argv: list[str], log: Path, interrupt_first: bool = False):
        self.kind = kind
        self.argv = argv
        self.log = log
        self.interrupt_first = interrupt_first
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.stopped = False

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.started_at = time.monotonic()

    def finished(self) -> bool:
        if self.proc is None or self.proc.poll() is None:
            return False
        if self.ended_at is None:
            self.ended_at = time.monotonic()
        return True

    def stop(self) -> dict[str, Any]:
        if self.proc is not None and self.proc.poll() is None:
            self.stopped = True
            sigs = ([signal.SIGINT] if self.interrupt_first else []) + [signal.SIGTERM]
            for sig in sigs:
                self.proc.send_signal(sig)
                try:
                    self.proc.wait(timeout=_STOP_GRACE_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    continue
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self.finished()
        return {
            "kind": self.kind,
            "argv": self.argv,
            "started": self.proc is not None,
            "exit_status": self.proc.returncode if self.proc is not None else None,
            "stopped_by_pysched": self.stopped,
            "wall_seconds": (round(self.ended_at - self.started_at, 3)
                             if self.started_at is not None and self.ended_at is not None
                             else None),
            "log": self.log.name,
        }


def _which(program: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise PeerError(f"{program} is not installed on this machine (package {package}; "
                        "make setup installs it)")
    return path


def _int_param(params: Mapping[str, str], name: str, lo: int) -> int:
    try:
        v = int(params[name])
    except (KeyError, ValueError):
        raise PeerError(f"parameter {name} must be an integer (got {params.get(name)!r})") \
            from None
    if v < lo:
        raise PeerError(f"parameter {name} must be at least {lo} (got {v})")
    return v


def ssh_options(ctx: PeerContext, port: int) -> list[str]:
    """ssh/scp options: our key only, no prompts, the guest's host key pinned.

    Raises
    ------
    PeerError
        When the guest's keys are missing.
    """
    if ctx.ssh_key is None or ctx.ssh_host_key is None:
        raise PeerError("this guest has no ssh keys (the Debian guest's build makes them)")
    known = ctx.work_dir / "known_hosts"
    key_type, key = ctx.ssh_host_key.read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{port} {key_type} {key}\n")
    return ["-i", str(ctx.ssh_key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=60",
            "-o", "LogLevel=ERROR"]


def scp_in(ctx: PeerContext) -> Peer:
    """scp of a sparse SIZE_MB file to the guest's ``/srv/incoming/file``."""
    scp = _which("scp", "openssh-client")
    size = _int_param(ctx.params, "size_mb", 1)
    port = ctx.ports[22]
    src = ctx.work_dir / "iscp.bin"
    with open(src, "wb") as f:
        f.truncate(size << 20)
    argv = [scp, *ssh_options(ctx, port), "-P", str(port), str(src),
            "root@127.0.0.1:/srv/incoming/file"]
    return ProcessPeer("scp-in", argv, ctx.log)


def scp_out(ctx: PeerContext) -> Peer:
    """scp of the guest's ``/srv/outgoing/file`` to /dev/null on the host."""
    scp = _which("scp", "openssh-client")
    port = ctx.ports[22]
    argv = [scp, *ssh_options(ctx, port), "-P", str(port),
            "root@127.0.0.1:/srv/outgoing/file", "/dev/null"]
    return ProcessPeer("scp-out", argv, ctx.log)


def apache_bench(ctx: PeerContext) -> Peer:
    """ApacheBench against the guest's port 80."""
    ab = _which("ab", "apache2-utils")
    n = _int_param(ctx.params, "requests", 1)
    c = _int_param(ctx.params, "concurrency", 1)
    if c > n:
        raise PeerError(f"concurrency {c} is above requests {n}")
    path = ctx.params.get("path", "/")
    if not path.startswith("/"):
        raise PeerError(f"parameter path must start with / (got {path!r})")
    argv = [ab, "-n", str(n), "-c", str(c), "-r", "-s", "60",
            f"http://127.0.0.1:{ctx.ports[80]}{path}"]
    return ProcessPeer("ab", argv, ctx.log, interrupt_first=True)


@dataclass
class _NetStats:
    requests: int = 0
    bytes: int = 0
    connections: int = 0
    errors: list[str] = field(default_factory=list)
    by_size: dict[int, int] = field(default_factory=dict)
    #: errors after which the same connection thread got more answers: the connection failed
    #: during the run, not when the guest stopped its server at the region's end
    errors_mid_run: int = 0


class NetClientPeer(Peer):
    """Our request client for the guest's netserver: CONNECTIONS threads, each keeping one
    persistent connection for PER_CONNECTION requests, then reconnecting; request sizes cycle
    through SIZES; REQUESTS in all.

    Parameters
    ----------
    port : int
        Host port forwarded to the guest's netserver.
    sizes : list of int
        Response sizes to ask for, in turn.
    connections, per_connection, requests : int
        As above.
    log : Path
        Receives a summary line when it ends.
    """

    kind = "netclient"

    def __init__(self, port: int, sizes: list[int], connections: int, per_connection: int,
                 requests: int, log: Path):
        self.port = port
        self.sizes = sizes
        self.connections = connections
        self.per_connection = per_connection
        self.requests = requests
        self.log = log
        self.stats = _NetStats()
        self._lock = threading.Lock()
        self._next = 0
        self._quit = threading.Event()
        self._threads: list[threading.Thread] = []
        self.started_at: float | None = None
        self.ended_at: float | None = None

    def _take(self) -> int | None:
        """The next request's size, or None when all have been issued."""
        with self._lock:
            if self._next >= self.requests or self._quit.is_set():
                return None
            size = self.sizes[self._next % len(self.sizes)]
            self._next += 1
            return size

    def _worker(self) -> None:
        failed = False  # this thread's last event was an error
        while not self._quit.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=60) as s:
                    with self._lock:
                        self.stats.connections += 1
                    for _ in range(self.per_connection):
                        size = self._take()
                        if size is None:
                            return
                        s.sendall(b"%d\n" % size)
                        left = size
                        while left > 0:
                            chunk = s.recv(min(left, 1 << 20))
                            if not chunk:
                                raise ConnectionError("the server closed the connection")
                            left -= len(chunk)
                        with self._lock:
                            if failed:
                                self.stats.errors_mid_run += 1
                                failed = False
                            self.stats.requests += 1
                            self.stats.bytes += size
                            self.stats.by_size[size] = self.stats.by_size.get(size, 0) + 1
            except OSError as e:
                with self._lock:
                    failed = True
                    if len(self.stats.errors) < 10:
                        self.stats.errors.append(f"{type(e).__name__}: {e}")
                # The guest going away ends the client; a refused connection early on is
                # retried after a pause.
                if self._quit.wait(0.5):
                    return
                with self._lock:
                    if len(self.stats.errors) >= 10:
                        return

    def start(self) -> None:
        self.started_at = time.monotonic()
        for i in range(self.connections):
            t = threading.Thread(target=self._worker, name=f"netclient-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def finished(self) -> bool:
        if not self._threads or any(t.is_alive() for t in self._threads):
            return False
        if self.ended_at is None:
            self.ended_at = time.monotonic()
        return True

    def stop(self) -> dict[str, Any]:
        stopped = not self.finished() and bool(self._threads)
        self._quit.set()
        for t in self._threads:
            t.join(timeout=_STOP_GRACE_SECONDS)
        self.finished()
        with self._lock:
            st = self.stats
            summary = {
                "kind": self.kind,
                "started": bool(self._threads),
                "stopped_by_pysched": stopped,
                "requests": st.requests,
                "bytes": st.bytes,
                "connections": st.connections,
                "requests_by_size": {str(k): v for k, v in sorted(st.by_size.items())},
                "errors": list(st.errors),
                "errors_mid_run": st.errors_mid_run,
                "wall_seconds": (round(self.ended_at - self.started_at, 3)
                                 if self.started_at is not None and self.ended_at is not None
                                 else None),
                "log": self.log.name,
            }
        with open(self.log, "a") as f:
            f.write(f"netclient: {summary}\n")
        return summary


def net_client(ctx: PeerContext) -> Peer:
    """Our request client for the netserver workload."""
    try:
        sizes = [int(x) for x in ctx.params["sizes"].split(",") if x.strip()]
    except (KeyError, ValueError):
        raise PeerError(f"parameter sizes must be comma-separated byte counts "
                        f"(got {ctx.params.get('sizes')!r})") from None
    if not sizes or min(sizes) < 1 or max(sizes) > 16 << 20:
        raise PeerError("parameter sizes: each between 1 and 16777216 bytes")
    return NetClientPeer(ctx.ports[7000], sizes, _int_param(ctx.params, "connections", 1),
                         _int_param(ctx.params, "per_connection", 1),
                         _int_param(ctx.params, "requests", 1), ctx.log)


#: Peer kind -> factory.
PEERS: dict[str, Callable[[PeerContext], Peer]] = {
    "scp-in": scp_in,
    "scp-out": scp_out,
    "ab": apache_bench,
    "netclient": net_client,
}


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports of 127.0.0.1 that are free now (the kernel picks them).

    There is a short race until QEMU binds them; a port taken meanwhile makes QEMU fail with a
    message naming the forward.
    """
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ab_failure(log: str, concurrency: int) -> str | None:
    """Whether ApacheBench's report says the requests failed (see :func:`peer_failure`)."""
    def count(label: str) -> int | None:
        m = re.search(rf"^{label}:\s+(\d+)", log, re.M)
        return int(m.group(1)) if m else None

    complete, failed, non2xx = (count(k) for k in
                                ("Complete requests", "Failed requests", "Non-2xx responses"))
    if complete is None:
        last = log.strip().splitlines()[-1:] or ["(empty log)"]
        return f"ab printed no report: {last[0]}"
    if non2xx:
        return f"{non2xx} of {complete} requests got an answer other than 2xx"
    if complete == 0:
        return "ab completed no request"
    # Failed requests are transport errors (receive errors, short answers, resets), not server
    # answers: those in flight when pysched stops ab, and some that QEMU's user-mode network
    # loses under tracing (about 12 % of a traced apache run). A quarter is the bound.
    allowed = max(concurrency, complete // 4)
    if failed and failed > allowed:
        return (f"{failed} of {complete} requests failed (more than {allowed}: the "
                f"{concurrency} in flight when ab was stopped, or a quarter of those completed)")
    return None


def peer_failure(summary: Mapping[str, Any] | None, log: str, params: Mapping[str, str]
                 ) -> str | None:
    """Whether the workload's host peer failed, by its own account.

    - ``ab``: it printed a report, completed at least one request, and no answer was other
      than 2xx; ``Failed requests`` (transport errors) up to the concurrency or a quarter of
      the completed requests, whichever is more, are allowed: ab counts the requests in
      flight when pysched stops it at the end of the region, and QEMU's user-mode network
      loses some connections under tracing.
    - ``scp-in`` / ``scp-out``: scp exited 0, or pysched stopped it (the region ended first).
    - ``netclient``: it got answers, and no connection thread got an answer after an error:
      the guest stops its netserver when the region ends (``roi_over_work``), which closes
      every connection in flight, and until pysched stops the client its threads reconnect
      (every 0.5 s) to a server that is gone; those errors come after each thread's last
      answer. (A server that dies during the region ends the region too: ``roi_wait`` waits
      for it.)

    Parameters
    ----------
    summary : mapping or None
        :meth:`Peer.stop`'s summary (None: no peer).
    log : str
        The peer's log (``peer.log``).
    params : mapping
        The workload's parameters.

    Returns
    -------
    str or None
        The failure, or None when the peer succeeded (or there is none).
    """
    if not summary:
        return None
    if not summary.get("started"):
        return "the host's peer never started (the guest did not ask for it)"
    kind = summary.get("kind")
    if kind == "ab":
        return _ab_failure(log, int(params.get("concurrency", "1")))
    if kind in ("scp-in", "scp-out"):
        status = summary.get("exit_status")
        if status != 0 and not summary.get("stopped_by_pysched"):
            last = log.strip().splitlines()[-1:] or [""]
            return f"scp exited with status {status}: {last[0]}".rstrip(": ")
        return None
    if kind == "netclient":
        if summary.get("errors_mid_run", 0 if "errors_mid_run" in summary
                       else len(summary.get("errors", []))):
            return (f"the client had errors during the run: {summary['errors'][0]}"
                    if summary.get("errors") else "the client had errors during the run")
        if not summary.get("requests"):
            return "the client got no answer"
    return None


def make_peer(kind: str, ctx: PeerContext) -> Peer:
    """Build the peer of the given kind.

    Raises
    ------
    PeerError
        For an unknown kind or a peer that cannot be set up.
    """
    try:
        factory = PEERS[kind]
    except KeyError:
        raise PeerError(f"unknown peer {kind!r} (known: {', '.join(PEERS)})") from None
    ctx.work_dir.mkdir(parents=True, exist_ok=True)
    os.makedirs(ctx.log.parent, exist_ok=True)
    return factory(ctx)


__all__ = ["Peer", "PeerContext", "PeerError", "ProcessPeer", "NetClientPeer", "PEERS",
           "free_ports", "make_peer", "peer_failure", "ssh_options"]
