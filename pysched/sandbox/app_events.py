"""Application events: the paper's performance measure counts, per workload, "the number of
application-specific events that it performs in one second" (SchedTask section 6.1). The
paper instruments each benchmark's source; here an event is the completion of a system call
that the workload makes once per event, chosen from what its traces show. Each choice and its
caveat is in :data:`EVENTS`. Workloads not listed (a ``--cmd`` trace, the other seeds'
programs) have no events: the evaluation then compares instruction throughput instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysched.superfunctions.functype import Category

from .workload import Workload


@dataclass(frozen=True)
class AppEvent:
    """What one application event of a workload is.

    Attributes
    ----------
    what : str
        The paper's event (section 6.1).
    syscalls : tuple of int
        x86-64 system call numbers whose completion counts one event each.
    note : str
        How well the system calls stand for the event.
    """

    what: str
    syscalls: tuple[int, ...]
    note: str


#: Workload name (``manifest.json`` ``workload``) -> its event.
EVENTS: dict[str, AppEvent] = {
    "find": AppEvent("searching an i-node entry", (262,),
                     "newfstatat: find examines each directory entry with one"),
    "iscp": AppEvent("receiving a data packet", (1,),
                     "write: sftp-server writes each received block to the file"),
    "oscp": AppEvent("transmitting a data packet", (1,),
                     "write: sshd writes each encrypted block to the socket (sftp-server's "
                     "writes to its pipe count too)"),
    "apache": AppEvent("serving a web page", (288,),
                       "accept4: ApacheBench opens one connection per request (no keep-alive)"),
    "dss": AppEvent("processing a query", (17,),
                    "pread64: a database page read, a proxy: a short trace holds few whole "
                    "TPC-H queries, each reading many pages"),
    "oltp": AppEvent("processing a query", (44, 45),
                     "sendto/recvfrom: the client's queries and the server's answers over "
                     "the socket (a proxy)"),
    "filesrv": AppEvent("completing a file operation", (257, 87, 262),
                        "openat, unlink, newfstatat: fsbench's create/write, append and read "
                        "open the file, delete unlinks it, stat stats it"),
    "mailsrv": AppEvent("completing a mail operation", (257, 87),
                        "openat, unlink: each varmail operation opens or deletes one file"),
}


def event_items(workload: Workload, name: str | None,
                instances_number: np.ndarray | None = None) -> np.ndarray | None:
    """Events each item completes (1 for the last item of an event system call), or None when
    the workload has no event definition."""
    ev = EVENTS.get(name or "")
    if ev is None:
        return None
    w = workload
    is_ev = (w.category == int(Category.SYSCALL)) & np.isin(w.number, ev.syscalls)
    out = np.zeros(len(w), dtype=np.int64)
    if not is_ev.any():
        return out
    # The last item of each instance completes it.
    idx = np.flatnonzero(is_ev)
    inst = w.instance[idx]
    order = np.lexsort((idx, inst))
    last = np.ones(len(idx), dtype=bool)
    last[:-1] = inst[order][1:] != inst[order][:-1]
    out[idx[order][last]] = 1
    return out
