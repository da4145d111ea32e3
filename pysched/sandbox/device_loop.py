"""Devices in a closed loop: a completion a traced latency after the request it answers ran.

In the trace, a device interrupt arrived when the traced machine got it. Replayed at that
instant whatever the simulated schedule, a schedule that issues its disk reads sooner cannot
get them back sooner, and one that starves the requesting thread still receives the answers.
With the trace's device requests (``device_requests``: each virtio queue kick) and their links
to the interrupts that answer them (:func:`pysched.trace.completions.link_completions`), an
interrupt can instead be released by its request:

* a **completion** (an interrupt of a virtqueue that answers kicks: virtio-blk's request
  queue, virtio-net's transmit queue) waits for the **latest kick it answers** to be executed
  in the simulation, plus the traced latency from that kick to the interrupt;
* an **arrival** (virtio-net's receive queue: the peer's packet) of a closed-loop peer (the
  suite's clients send the next request once they have the answer: ApacheBench, netclient,
  scp's acknowledgements) waits for the guest's **latest transmit kick** on that device
  before it, plus the traced gap (the peer's think time and the network's delay). The trace
  does not say which connection a packet belongs to, so the response a request follows is
  taken to be the latest one the guest sent.

Latencies and think times are in the trace's machine time
(:meth:`pysched.trace.clock.TraceClock.seconds`, the clock of every release in the sandbox):
the interval from the kick's instruction to the interrupt's, at the nominal clock and IPC, over
the instructions the traced machine retired in between. So at the traced schedule a released
interrupt arrives exactly when it arrived in the trace. An idle traced vCPU retires nothing, so
time the whole traced machine spent idle waiting for a device is not in the latency: the
sandbox's devices are as fast as the traced machine kept busy, the approximation of every
traced release (:mod:`.workload`, Time of the trace). A latency is floored at 0 where the
machine-time order and the host-time order of a link disagree.

Interrupts with no linked request stay at their traced times: a completion answering no kick
of the region (``no kick pending``, ``before first kick``), configuration interrupts, arrivals
before the guest's first transmit, every interrupt of a trace without ``device_requests`` or
whose vectors could not be mapped, and an interrupt whose request lies in no item (scheduler
code, which the sandbox leaves out). :class:`DeviceLinks` counts what was linked.
``SandboxConfig.device_timing="traced"`` keeps every interrupt at its traced time (an ablation
factor).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysched.trace.completions import AFTER_LAST, ARRIVAL, COMPLETION, LINKED, link_completions

#: ``SandboxConfig.device_timing``: released by the request (default) or at traced times.
DEVICE_TIMINGS = ("closed", "traced")


@dataclass
class DeviceLinks:
    """Per item, the request that releases it (see the module).

    Attributes
    ----------
    item, offset : numpy.ndarray of int64
        The item is released once item ``item`` has executed ``offset`` instructions (the
        kick), plus ``delay``; ``item`` is -1 for an item no request releases.
    delay : numpy.ndarray of float64
        Seconds of the trace's machine time from the kick to the interrupt.
    completions, arrivals : int
        Interrupt items released by a kick they answer, and by the transmit they follow.
    """

    item: np.ndarray
    offset: np.ndarray
    delay: np.ndarray
    completions: int = 0
    arrivals: int = 0


def no_links(n: int) -> DeviceLinks:
    """Links of a workload of ``n`` items that no request releases."""
    return DeviceLinks(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64),
                       np.zeros(n, dtype=np.float64))


def device_links(trace, n: int, irq_item: dict[int, int], inst_vcpu: np.ndarray,
                 inst_icount: np.ndarray, inst_time: np.ndarray, locate, clock) -> DeviceLinks:
    """The request releasing each interrupt item of a workload (see the module).

    Parameters
    ----------
    trace : Trace
        The trace the workload was built from.
    n : int
        Items in the workload.
    irq_item : dict
        Interrupt instance -> its first item.
    inst_vcpu, inst_icount, inst_time : numpy.ndarray
        Each instance's start: vCPU, instruction count and machine time (seconds).
    locate : callable
        ``(vcpu, icount) -> (item, offset)``: the item executing there and its offset.
    clock : TraceClock
        The trace's machine time.
    """
    out = no_links(n)
    if not trace.parts("device_requests"):
        return out
    comp = link_completions(trace)
    links = comp.links
    if links.empty:
        return out
    # An interrupt's instance starts at its ``interrupts`` row: (vCPU, icount).
    by_start = {(int(inst_vcpu[i]), int(inst_icount[i])): i for i in irq_item}

    def release(i: int, kv: int, ki: int) -> bool:
        """Let the kick at (``kv``, ``ki``) release the item of interrupt instance ``i``."""
        it = irq_item[i]
        w_item, w_off = locate(kv, ki)
        if w_item < 0 or w_item == it:
            return False
        out.item[it], out.offset[it] = w_item, w_off
        kick_s = float(clock.seconds(kv, np.array([ki], dtype=np.int64))[0])
        out.delay[it] = max(0.0, float(inst_time[i]) - kick_s)
        return True

    linked = links[(links["status"] == LINKED) & (links["kind"] == COMPLETION)]
    last = linked.sort_values("kick_time_ns", kind="stable").drop_duplicates(
        ["vcpu", "icount"], keep="last")
    for v, ic, kv, ki in zip(*(last[c].to_numpy(dtype=np.int64) for c in (
            "vcpu", "icount", "kick_vcpu", "kick_icount"))):
        i = by_start.get((int(v), int(ic)))
        if i is not None:
            out.completions += release(i, int(kv), int(ki))
    # Each arrival follows the device's latest transmit kick before it (host-time order).
    kicks = comp.kicks
    tx = kicks[kicks["status"].isin([LINKED, AFTER_LAST])]
    arrivals = links[links["kind"] == ARRIVAL].drop_duplicates(["vcpu", "icount"])
    for slot, a in arrivals.groupby("slot", sort=False):
        k = tx[tx["slot"] == slot].sort_values("time_ns", kind="stable")
        kt = k["time_ns"].to_numpy(dtype=np.int64)
        kv, ki = k["vcpu"].to_numpy(dtype=np.int64), k["icount"].to_numpy(dtype=np.int64)
        j = np.searchsorted(kt, a["time_ns"].to_numpy(dtype=np.int64), side="right") - 1
        for v, ic, jj in zip(a["vcpu"].to_numpy(dtype=np.int64),
                             a["icount"].to_numpy(dtype=np.int64), j.tolist()):
            i = by_start.get((int(v), int(ic)))
            if jj >= 0 and i is not None:
                out.arrivals += release(i, int(kv[jj]), int(ki[jj]))
    return out


__all__ = ["DEVICE_TIMINGS", "DeviceLinks", "device_links", "no_links"]
