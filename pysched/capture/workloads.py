"""The workload suite: one table of the workloads ``pysched trace <name>`` runs on the Debian
guest.

Each workload is a guest script, ``guest/workloads/<script>.sh``, that sets the workload up,
opens the region of interest (``roi_start``) once it is in its steady state, waits for the
region's bound (``roi_wait``: ``--roi-seconds``, ``--roi-insns`` or the end of the host's peer),
and closes it (``roi_stop``). Some need a peer on the host (an scp client, ApacheBench, our
request client, see :mod:`pysched.capture.peers`), which pysched starts when the guest prints
``=== PYSCHED PEER START ===``. Parameters reach the script as ``P_<NAME>`` environment
variables, the host's peer as a dict.

The first eight are analogues of the OS-intensive suite of SchedTask (seed 000, section 4.2);
the others serve the other seeds: barrier-synchronised threads (seed 001), a request-size sweep
on a network server (seed 002), cache-hungry and cache-light programs (seed 003).
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Mapping

#: Seconds the guest waits after starting the work before it opens the region.
DEFAULT_WARMUP_SECONDS = 1.0


@dataclass(frozen=True)
class Workload:
    """One workload of the suite.

    Attributes
    ----------
    name : str
        What ``pysched trace <name>`` takes.
    summary : str
        One line: what it is.
    runs : str
        What it runs, with the parameters named (the documentation of the workload).
    analogue : str
        The paper workload it stands for.
    params : dict
        Parameter defaults (strings), overridden with ``--param name=value``.
    script : str
        The guest script's stem in ``guest/workloads/``.
    peer : str or None
        The host-side peer (a key of :data:`pysched.capture.peers.PEERS`).
    guest_ports : tuple of int
        Guest TCP ports forwarded from 127.0.0.1 for the peer.
    roi_seconds : float
        Default region length in guest seconds.
    criterion : str
        What counts as success (recorded in the manifest's ``outcome``). The guest script
        checks its part (a failure exits non-zero with a ``workload: ...`` message); the host
        checks the peer's (:func:`pysched.capture.peers.peer_failure`).
    """

    name: str
    summary: str
    runs: str
    analogue: str
    params: Mapping[str, str] = field(default_factory=dict)
    script: str = ""
    peer: str | None = None
    guest_ports: tuple[int, ...] = ()
    roi_seconds: float = 8.0
    criterion: str = "the work runs until the region ends and the script exits 0"

    @property
    def script_name(self) -> str:
        """The guest script's file name."""
        return f"{self.script or self.name}.sh"


_W = [
    Workload(
        "find", "filesystem walk from a cold cache (disk interrupts)",
        "INSTANCES side-by-side loops (0: one per vCPU) of find / -xdev -name NAME over the "
        "root file system with a generated tree of 1,884 directories and 20,736 files; page, "
        "dentry and inode caches dropped before every pass so directories come from the "
        "virtio disk",
        "seed 000 Find (find on a large ext3 file system, one instance per core)",
        {"name": "pysched-needle", "instances": "0"},
        criterion="every find loop runs until the region ends (one that stops fails the workload)",
    ),
    Workload(
        "iscp", "scp of a large file into the guest (network and disk interrupts)",
        "the host's scp sends a SIZE_MB file (sparse on the host) to the guest's sshd through "
        "QEMU user networking and the virtio NIC; sftp-server writes it to the virtio disk",
        "seed 000 Iscp (scp of a 10 GB file from a remote machine)",
        {"size_mb": "1024"}, peer="scp-in", guest_ports=(22,),
        criterion="scp exits 0, or is still copying when the region ends",
    ),
    Workload(
        "oscp", "scp of a large file out of the guest (network and disk interrupts)",
        "the guest writes a SIZE_MB file and drops it from the page cache; the host's scp "
        "fetches it: sftp-server reads it from the virtio disk and sshd sends it through the "
        "virtio NIC",
        "seed 000 Oscp (scp of a 10 GB file to a remote machine)",
        {"size_mb": "512"}, peer="scp-out", guest_ports=(22,),
        criterion="scp exits 0, or is still copying when the region ends",
    ),
    Workload(
        "apache", "web server under ApacheBench",
        "apache2 (event MPM, Debian's default site) in the guest; the host's ab requests PATH "
        "with CONCURRENCY requests in flight, a new connection each, REQUESTS in all",
        "seed 000 Apache (ApacheBench, 96 concurrent requests on 32 cores)",
        {"concurrency": "16", "requests": "1000000", "path": "/index.html"},
        peer="ab", guest_ports=(80,),
        criterion="ab completes requests and every answer is 2xx (no non-2xx response; failed requests, i.e. transport errors, at most CONCURRENCY or a quarter of the completed ones)",
    ),
    Workload(
        "dss", "decision-support query (TPC-H Q2) on SQLite",
        "STREAMS concurrent sqlite3 processes run batches of BATCH TPC-H query 2 (minimum cost "
        "supplier) instances with random parameters on a TPC-H-like database at scale 0.1 "
        "(16 MB), warm in the page cache",
        "seed 000 DSS (TPC-H minimum cost supplier query, 1 GB, MySQL)",
        {"streams": "4", "batch": "5"},
        criterion="every sqlite3 stream runs its batches without error until the region ends",
    ),
    Workload(
        "oltp", "transactional mix: sysbench oltp_read_write on MariaDB",
        "MariaDB in the guest and sysbench oltp_read_write with THREADS client threads on "
        "TABLES tables of TABLE_SIZE rows, over the unix socket",
        "seed 000 OLTP (sysbench OLTP, 96 threads)",
        {"threads": "32", "tables": "4", "table_size": "10000"},
        criterion="sysbench and MariaDB run until the region ends",
    ),
    Workload(
        "filesrv", "file server: create/write/append/read/delete/stat, many threads",
        "our fsbench in Filebench's fileserver personality: THREADS threads over FILES files "
        "of mean SIZE bytes in directories of 20 on the virtio disk",
        "seed 000 FileSrv (Filebench fileserver, 400 threads)",
        {"threads": "50", "files": "2000", "size": "32768"},
        criterion="fsbench runs every thread until the region ends",
    ),
    Workload(
        "mailsrv", "mail server: small-file delete/create/append/fsync/read, many threads",
        "our fsbench in Filebench's varmail personality: THREADS threads over FILES files of "
        "mean SIZE bytes in one directory, with fsync after every append",
        "seed 000 MailSrvIO (Filebench mailserver, 96 threads)",
        {"threads": "32", "files": "1000", "size": "16384"},
        criterion="fsbench runs every thread until the region ends",
    ),
    Workload(
        "barrier", "barrier-synchronised multi-threaded program",
        "our barrier program: THREADS threads relax a GRID x GRID grid (Jacobi) with a pthread "
        "barrier after every sweep; IMBALANCE percent more rows per thread index",
        "seed 001 (SPLASH-2-like barrier-synchronised workloads)",
        {"threads": "4", "grid": "512", "imbalance": "0"},
        criterion="the barrier program runs until the region ends",
    ),
    Workload(
        "netserver", "network server answering requests of 10 B to 10 MB",
        "our netserver answers requests for SIZES bytes (cycled); the host's client keeps "
        "CONNECTIONS persistent connections of PER_CONNECTION requests each, REQUESTS in all",
        "seed 002 (NEWTOS: 8 connections x 10 requests, 10 B to 10 MB)",
        {"sizes": "10,1000,100000,10000000", "connections": "8", "per_connection": "10",
         "requests": "1000000"},
        peer="netclient", guest_ports=(7000,),
        criterion="the client gets complete answers and no connection or protocol error",
    ),
    Workload(
        "chase-large", "cache-hungry single-threaded program (64 MiB pointer chase)",
        "COPIES copies of our pointer chase over KIB KiB of 64-byte nodes in one random cycle",
        "seed 003 (high-miss-rate co-runner)",
        {"kib": "65536", "copies": "2"}, script="chase",
        criterion="every pointer chase runs until the region ends",
    ),
    Workload(
        "chase-small", "cache-light single-threaded program (16 KiB pointer chase)",
        "COPIES copies of our pointer chase over KIB KiB of 64-byte nodes in one random cycle",
        "seed 003 (low-miss-rate co-runner)",
        {"kib": "16", "copies": "2"}, script="chase",
        criterion="every pointer chase runs until the region ends",
    ),
]

#: The workloads by name, in documentation order.
WORKLOADS: dict[str, Workload] = {w.name: w for w in _W}

_PARAM_RE = re.compile(r"[a-z][a-z0-9_]*")
# Values go through the shell quoted, but keep them printable and on one line.
_VALUE_RE = re.compile(r"[\x20-\x7e]*")


class UnknownWorkloadError(KeyError):
    """A workload name that is not in :data:`WORKLOADS`; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


def known_names() -> str:
    """The known workload names, comma-separated."""
    return ", ".join(WORKLOADS)


def get(name: str) -> Workload:
    """The workload called ``name``.

    Raises
    ------
    UnknownWorkloadError
        When there is none; the message lists the known workloads.
    """
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UnknownWorkloadError(
            f"unknown workload {name!r}; known workloads: {known_names()}"
        ) from None


def parse_params(workload: Workload, assignments: list[str] | None) -> dict[str, str]:
    """The workload's parameters: its defaults overridden by ``name=value`` assignments.

    Parameters
    ----------
    workload : Workload
        The workload.
    assignments : list of str, optional
        ``--param`` values, e.g. ``["threads=8"]``.

    Returns
    -------
    dict
        All parameters, defaults included.

    Raises
    ------
    ValueError
        For a malformed assignment, a parameter the workload does not have (the message lists
        its parameters), or a value with control characters.
    """
    params = dict(workload.params)
    for a in assignments or []:
        name, sep, value = a.partition("=")
        name = name.strip()
        if not sep or not _PARAM_RE.fullmatch(name):
            raise ValueError(f"--param {a!r}: use name=value (lower-case name)")
        if name not in params:
            have = ", ".join(params) or "none"
            raise ValueError(f"--param {a!r}: workload {workload.name} has no parameter "
                             f"{name!r} (its parameters: {have})")
        if not _VALUE_RE.fullmatch(value):
            raise ValueError(f"--param {a!r}: the value must be printable ASCII on one line")
        params[name] = value
    return params


def param_env(params: Mapping[str, str]) -> dict[str, str]:
    """The parameters as the guest script's ``P_<NAME>`` variables."""
    return {f"P_{k.upper()}": v for k, v in params.items()}


def describe(width: int = 100) -> str:
    """A table of the workloads for ``pysched trace --list``, wrapped at ``width``."""
    indent = " " * 15
    lines = []
    for w in WORKLOADS.values():
        params = " ".join(f"{k}={v}" for k, v in w.params.items())
        lines.append(f"{w.name:14s} {w.summary}")
        for label, text in (("runs", w.runs), ("after", w.analogue), ("success", w.criterion),
                            ("defaults", f"{params or '-'}; region {w.roi_seconds:g} s"
                             + (f"; host peer: {w.peer}" if w.peer else ""))):
            lines += textwrap.wrap(f"{label}: {text}", width, initial_indent=indent,
                                   subsequent_indent=indent + "  ")
    return "\n".join(lines)


__all__ = ["Workload", "WORKLOADS", "UnknownWorkloadError", "get", "known_names",
           "parse_params", "param_env", "describe", "DEFAULT_WARMUP_SECONDS"]
