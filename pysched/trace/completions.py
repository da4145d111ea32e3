"""Which request each virtio completion interrupt answers.

A virtio driver asks its device for work by adding buffers to a virtqueue and *kicking* it (the
queue's index written to the notify register: a ``device_requests`` row, see
:func:`pysched.trace.devices.device_requests`); the device answers by using the buffers and
raising the queue's MSI-X interrupt (an ``interrupts`` entry on a device vector). The trace
names neither the interrupt's device nor its queue: an ``interrupts`` row has only the x86
vector, which Linux allocates per CPU at run time. This module

1. **maps each (vCPU, vector) to a line of ``/proc/interrupts``** (:func:`map_vectors`), by
   counting: the vector's entries in the trace on that vCPU against each line's count on that
   CPU between the manifest's snapshots (taken just before and just after the region). A line
   names the virtqueue (``virtio1-req.0``: virtio-blk's request queue 0; ``virtio0-input.0`` /
   ``virtio0-output.0``: virtio-net's receive queue 0 and transmit queue 1; ``-config``: a
   configuration change) and, through its MSI number, the PCI slot (Linux 6.1's
   ``pci_msi_domain_calc_hwirq``: ``msi_index | (bus << 8 | devfn) << 11 | domain << 27``);
2. **links each completion interrupt to the kicks it answers** (:func:`link_completions`).

**How reliable the map is.** The snapshots lie outside the region (the guest reads them before
the region opens and after it closes, and under ``--roi-insns`` the workload runs on between
the region's end and the second read), so a line's count is an upper bound of its interrupts in
the region, not their number: on the shipped traces the region holds 10-100 % of a device
line's count (find: 350 of virtio-blk queue 0's 742 on CPU 0). A vector can be matched only to
a line that counted at least its entries on that CPU. It is matched when exactly one line is
left that could hold it, once the vectors matched so far have taken theirs (one vector per line
per CPU: Linux gives an interrupt one vector on the CPU it targets, and moves it only when its
affinity changes, which nothing in the guests does); otherwise it is **refused** as
``ambiguous`` (naming the candidate lines) or ``no line``, never guessed. On the five traces of
``data/`` recorded with ``device_requests`` every device vector is matched (docs/tracing.md,
"Device requests and their completions"). A wrong match stays possible where an unrelated line
happens to count enough on the same CPU and the right one does not (an interrupt moved to
another vector or CPU during the snapshots' window): the counts cannot tell.

**The linking rule.** Per queue, in ``time_ns`` order (the plugin's host monotonic clock, one
clock for every vCPU: qemu-plugin/README.md; a global order of events, and on the instruction
clock, where one QEMU thread runs every vCPU in turn, the order they ran in), a completion
interrupt answers every kick of that queue's device and queue made before it and after the
queue's previous completion interrupt: virtio coalesces (the driver suppresses notifications
while it works through the used ring, and virtio-net may ask for a transmit interrupt only once
most of the buffers in flight are used), so one interrupt may answer several kicks. Without a
kick pending, an interrupt answers nothing of ours: a request made before the region (``before
first kick``), or one the driver queued without a kick, since the device told it not to notify
(event index), or buffers the driver had already reaped by polling (``no kick pending``). A kick
after its queue's last interrupt in the region is left unanswered (the region ended first, or
the driver reaped its buffers while polling). A virtio-net receive interrupt answers no kick of
ours: it is the peer's packet arriving (``arrival``); receive-queue kicks only hand the device
empty buffers (``rx refill``). A configuration interrupt answers nothing (``config``).

So a latency here (interrupt ``time_ns`` minus kick ``time_ns``) runs from a kick to the first
interrupt of its queue after it. Where interrupts were coalesced, that is an upper bound on the
device's service time. The trace does not say which buffers an interrupt reported (the used ring
is written by the device, not by a vCPU). So with several requests in flight on one queue, the
interrupt of an earlier one also takes the later kicks: their latency is understated, and
their own interrupt counts as ``no kick pending``. Latencies are in the host's nanoseconds,
not the guest's (the plugin stamps events with host time; on the instruction clock the guest's
time is not recorded per event). ``same_vcpu_insns`` adds the instructions the kicking vCPU
retired until the interrupt, when the interrupt came on that vCPU (1: none between, the
interrupt came at the first block boundary after the kick).
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pysched.capture.console import parse_interrupts

from .devices import device_requests
from .reader import Trace
from .schema import DEVICE_VECTORS

#: ``map_vectors``' statuses: matched, and the two refusals.
MAPPED, AMBIGUOUS, NO_LINE, NO_SNAPSHOTS = "mapped", "ambiguous", "no line", "no snapshots"
#: An interrupt's kind, from its line: what a virtqueue's interrupt reports.
COMPLETION, ARRIVAL, CONFIG = "completion", "arrival", "config"
#: Why an interrupt answers no kick, and a kick's fate.
LINKED, BEFORE_FIRST, NONE_PENDING = "linked", "before first kick", "no kick pending"
AFTER_LAST, RX_REFILL, NO_VECTOR, UNKNOWN_DEVICE = (
    "after last interrupt", "rx refill", "no mapped interrupt", "unknown device")

_VIRTQUEUE_RE = re.compile(r"^virtio\d+-(?:(req|input|output)\.(\d+)|(config|control|virtqueues))$")
_MSI_EDGE_RE = re.compile(r"^(\d+)-edge$")
_DRIVER_OF = {"req": "virtio_blk", "input": "virtio_net", "output": "virtio_net",
              "control": "virtio_net"}


@dataclass(frozen=True)
class IrqLine:
    """One device line of ``/proc/interrupts`` and the virtqueue its name gives.

    Attributes
    ----------
    label : str
        The IRQ number before the colon (``"25"``).
    name : str
        The action's name (``"virtio1-req.0"``); empty when the line has none.
    slot : str or None
        PCI slot from the MSI number (``"0000:00:03.0"``); None for a non-MSI line.
    driver : str or None
        ``virtio_blk`` or ``virtio_net`` from the queue's name, else the slot's driver.
    queue : int or None
        The virtqueue index a kick writes (virtio-net: receive ``2N``, transmit ``2N+1``);
        None for a configuration line or one shared by every queue.
    kind : str or None
        :data:`COMPLETION`, :data:`ARRIVAL` (virtio-net receive) or :data:`CONFIG`; None for a
        line that is no virtqueue's.
    """

    label: str
    name: str
    slot: str | None
    driver: str | None
    queue: int | None
    kind: str | None


def _msi_slot(chip: str, hwirq: str) -> str | None:
    """The PCI slot of an MSI line (``PCI-MSI 49153-edge``: device 3, function 0, bus 0)."""
    m = _MSI_EDGE_RE.match(hwirq)
    if not chip.startswith("PCI-MSI") or not m:
        return None
    n = int(m.group(1))
    devid, domain = (n >> 11) & 0xFFFF, n >> 27
    return f"{domain:04x}:{devid >> 8:02x}:{(devid >> 3) & 0x1F:02x}.{devid & 7}"


def irq_lines(raw: str, devices: dict[str, Any] | None = None) -> dict[str, IrqLine]:
    """The device lines (numbered IRQs) of a ``/proc/interrupts`` snapshot, by label.

    Parameters
    ----------
    raw : str
        The snapshot as the manifest holds it (``manifest["interrupts"]["after"]["raw"]``).
    devices : dict, optional
        The manifest's ``devices``: the PCI slot's driver, for a line whose name gives none.

    Returns
    -------
    dict
        ``{label: IrqLine}``.
    """
    rows = [ln for ln in raw.splitlines() if ln.strip()]
    ncpu = len(re.findall(r"\bCPU\d+\b", rows[0])) if rows else 0
    drivers = {d.get("slot"): d.get("virtio_driver") or d.get("driver")
               for d in (devices or {}).get("pci") or []}
    npairs = sum(1 for ln in rows if re.search(r"-output\.\d+\s*$", ln))
    lines: dict[str, IrqLine] = {}
    for row in rows[1:]:
        label, _, rest = row.partition(":")
        label = label.strip()
        if not label.isdigit():
            continue
        words = rest.split()[ncpu:]
        chip, hwirq = (words + ["", ""])[:2]
        name = " ".join(words[2:])
        slot = _msi_slot(chip, hwirq)
        m = _VIRTQUEUE_RE.match(name)
        what, index, other = m.groups() if m else (None, None, None)
        queue = (None if index is None else int(index) if what == "req"
                 else 2 * int(index) + (what == "output"))
        if other == "control":
            queue = 2 * npairs
        kind = (CONFIG if other == "config" else ARRIVAL if what == "input"
                else COMPLETION if m else None)
        lines[label] = IrqLine(label, name, slot, _DRIVER_OF.get(what or other or "")
                               or drivers.get(slot), queue, kind)
    return lines


def _snapshots(trace: Trace) -> tuple[dict | None, dict | None]:
    snaps = (trace.manifest or {}).get("interrupts") or {}
    return snaps.get("before"), snaps.get("after")


def _assign(wanted: dict[int, int],
            room: dict[str, int]) -> dict[int, tuple[str, str | None, list[str]]]:
    """Vectors of one CPU (entries each) onto lines (count on that CPU): ``{vector: (status,
    label, candidates)}``. A vector takes the one line left that counted enough; repeated until
    nothing changes, so that a line taken by one vector is no candidate of another."""
    left, found = dict(room), {}
    changed = True
    while changed:
        changed = False
        for vec in sorted(set(wanted) - set(found)):
            fits = [lab for lab, c in left.items() if c >= wanted[vec]]
            if len(fits) == 1:
                found[vec] = (MAPPED, fits[0], fits)
                del left[fits[0]]
                changed = True
    for vec in set(wanted) - set(found):
        fits = sorted(lab for lab, c in left.items() if c >= wanted[vec])
        found[vec] = (AMBIGUOUS if fits else NO_LINE, None, fits)
    return found


def _device_entries(trace: Trace) -> pd.DataFrame:
    """The ``interrupts`` entries on device vectors."""
    df = trace.df("interrupts")
    return df[(df["kind"] == 0) & df["vector"].isin(list(DEVICE_VECTORS))]


def map_vectors(trace: Trace) -> pd.DataFrame:
    """Which ``/proc/interrupts`` line each device vector of each vCPU is (module docstring).

    Parameters
    ----------
    trace : Trace
        A trace whose manifest holds the ``interrupts`` snapshots (``before``/``after``).

    Returns
    -------
    pandas.DataFrame
        One row per (``vcpu``, ``vector``) with device-vector entries (0x21-0xeb but 0x80):
        ``entries`` (in the trace), ``status`` (:data:`MAPPED`; refused: :data:`AMBIGUOUS`,
        :data:`NO_LINE`, :data:`NO_SNAPSHOTS`), ``candidates`` (the lines that could hold it,
        ``name (label)``, for a refusal), then the matched line's ``irq`` (label), ``name``,
        ``counted`` (its count on that CPU between the snapshots), ``slot``, ``driver``,
        ``queue`` and ``kind`` (:class:`IrqLine`; None when refused).
    """
    entries = _device_entries(trace).groupby(["vcpu", "vector"]).size()
    before, after = _snapshots(trace)
    lines = irq_lines(after["raw"], (trace.manifest or {}).get("devices")) if after else {}
    first = parse_interrupts(before["raw"]) if before else {}
    last = parse_interrupts(after["raw"]) if after else {}
    rows = []
    for cpu in sorted({int(v) for v, _ in entries.index}):
        wanted = {int(vec): int(n) for (v, vec), n in entries.items() if v == cpu}
        room = {}
        for lab in lines:
            then, now = first.get(lab, []), last.get(lab, [])
            delta = (now[cpu] if cpu < len(now) else 0) - (then[cpu] if cpu < len(then) else 0)
            if delta > 0:
                room[lab] = delta
        found = (_assign(wanted, room) if before and after
                 else {vec: (NO_SNAPSHOTS, None, []) for vec in wanted})
        for vec, (status, lab, fits) in sorted(found.items()):
            line = lines.get(lab) if lab else None
            rows.append({
                "vcpu": cpu, "vector": vec, "entries": wanted[vec], "status": status,
                "candidates": "" if status == MAPPED else ", ".join(
                    f"{lines[c].name or '?'} ({c})" for c in fits),
                "irq": lab, "name": line.name if line else None,
                "counted": room.get(lab) if lab else None,
                **{k: getattr(line, k) if line else None
                   for k in ("slot", "driver", "queue", "kind")}})
    cols = ["vcpu", "vector", "entries", "status", "candidates", "irq", "name", "counted",
            "slot", "driver", "queue", "kind"]
    return pd.DataFrame(rows, columns=cols)


@dataclass
class Completions:
    """What :func:`link_completions` found.

    Attributes
    ----------
    vectors : pandas.DataFrame
        :func:`map_vectors`' table.
    links : pandas.DataFrame
        One row per (interrupt, kick) it answers, and one per interrupt that answers none:
        the interrupt's ``vcpu``, ``icount``, ``time_ns``, ``vector``, line (``irq``,
        ``name``), ``slot``, ``driver``, ``queue``, ``kind``; ``status`` (:data:`LINKED`,
        :data:`BEFORE_FIRST`, :data:`NONE_PENDING`, :data:`ARRIVAL`, :data:`CONFIG`);
        ``batch`` (kicks this interrupt answers); the kick's ``kick_vcpu``, ``kick_icount``,
        ``kick_time_ns``; ``latency_ns`` (interrupt minus kick ``time_ns``, host
        nanoseconds) and ``same_vcpu_insns`` (interrupt minus kick ``icount`` when both are on
        one vCPU; else missing).
    kicks : pandas.DataFrame
        Every kick (:func:`~pysched.trace.devices.device_requests` rows with ``kick``) with
        ``status``: :data:`LINKED`, :data:`AFTER_LAST`, :data:`RX_REFILL`,
        :data:`NO_VECTOR` (no mapped interrupt line for its queue), :data:`UNKNOWN_DEVICE`.
    unmapped : pandas.DataFrame
        The device-vector interrupt entries whose vector was refused: their device is unknown.
    """

    vectors: pd.DataFrame
    links: pd.DataFrame
    kicks: pd.DataFrame
    unmapped: pd.DataFrame = field(default_factory=pd.DataFrame)

    def report(self) -> pd.DataFrame:
        """Per device (PCI slot and driver): what was linked and what could not be, and why.

        Returns
        -------
        pandas.DataFrame
            Per device: ``interrupts``, ``completions``, ``linked`` (completions answering at
            least one kick), ``before_first_kick``, ``no_kick_pending``, ``arrivals``,
            ``config``; ``kicks``, ``kicks_linked``, ``kicks_after_last``, ``rx_refills``,
            ``kicks_no_vector``; ``kicks_per_completion`` (mean over linked completions);
            ``latency_median_us`` and ``latency_p90_us`` (over linked kicks, host
            microseconds). A last row with ``slot`` ``"?"`` counts the interrupts of refused
            vectors (device unknown) and the kicks of no known device, when there are any.
        """
        rows = []
        links, kicks = self.links, self.kicks
        slots = sorted(set(links["slot"].dropna()) | set(kicks["slot"].dropna()))
        for slot in slots:
            lk, kk = links[links["slot"] == slot], kicks[kicks["slot"] == slot]
            per_irq = lk.drop_duplicates(["vcpu", "icount", "vector"])
            comp = per_irq[per_irq["kind"] == COMPLETION]
            lat = lk.loc[lk["status"] == LINKED, "latency_ns"].to_numpy(dtype=float)
            driver = next(iter(set(lk["driver"].dropna()) | set(kk["driver"].dropna())), None)
            linked = comp[comp["status"] == LINKED]
            rows.append({
                "slot": slot, "driver": driver, "interrupts": len(per_irq),
                "completions": len(comp), "linked": len(linked),
                "before_first_kick": int((comp["status"] == BEFORE_FIRST).sum()),
                "no_kick_pending": int((comp["status"] == NONE_PENDING).sum()),
                "arrivals": int((per_irq["kind"] == ARRIVAL).sum()),
                "config": int((per_irq["kind"] == CONFIG).sum()),
                "kicks": len(kk), **{f"kicks_{k}": int((kk["status"] == s).sum()) for k, s in (
                    ("linked", LINKED), ("after_last", AFTER_LAST), ("no_vector", NO_VECTOR))},
                "rx_refills": int((kk["status"] == RX_REFILL).sum()),
                "kicks_per_completion": (float(linked["batch"].mean()) if len(linked)
                                         else float("nan")),
                "latency_median_us": float(np.median(lat)) / 1e3 if len(lat) else float("nan"),
                "latency_p90_us": float(np.percentile(lat, 90)) / 1e3 if len(lat)
                else float("nan")})
        lost = kicks[kicks["status"] == UNKNOWN_DEVICE]
        if len(self.unmapped) or len(lost):
            rows.append({"slot": "?", "driver": None, "interrupts": len(self.unmapped),
                         "kicks": len(lost)})
        return pd.DataFrame(rows)


def link_completions(trace: Trace) -> Completions:
    """Link every interrupt of a virtio queue to the kicks it answers (module docstring).

    Parameters
    ----------
    trace : Trace
        A trace with ``device_requests`` and a manifest holding the ``/proc/interrupts``
        snapshots and ``devices``; without them every interrupt is unmapped and every kick of
        an unknown device.

    Returns
    -------
    Completions
        The vector map, the links (one row per interrupt and kick it answers), every kick's
        fate, the interrupts of refused vectors; :meth:`Completions.report` sums them up per
        device.
    """
    vectors = map_vectors(trace)
    mapped = vectors[vectors["status"] == MAPPED]
    line_of = {(int(r.vcpu), int(r.vector)): r for r in mapped.itertuples(index=False)}
    ents = _device_entries(trace)
    keys = list(zip(ents["vcpu"].tolist(), ents["vector"].tolist()))
    known = np.array([k in line_of for k in keys], dtype=bool)
    unmapped = ents[~known].reset_index(drop=True)

    reqs = device_requests(trace)
    reqs = reqs[reqs["kick"]].reset_index(drop=True)
    _, after = _snapshots(trace)
    lines = irq_lines(after["raw"], (trace.manifest or {}).get("devices")).values() if after \
        else []
    queues = {(ln.slot, ln.queue): ln.kind for ln in lines if ln.queue is not None}
    shared = {ln.slot for ln in lines if ln.kind == COMPLETION and ln.queue is None}
    hidden = {(ln.slot, ln.queue) for ln in lines} - {(r.slot, r.queue) for r in
                                                       mapped.itertuples(index=False)}
    refused = len(unmapped) > 0
    status = np.full(len(reqs), AFTER_LAST, dtype=object)

    # Events of every queue in time order: kicks (0) before an interrupt (1) stamped alike.
    events: list[tuple[int, int, int]] = []
    for i, (slot, q, t) in enumerate(zip(reqs["slot"], reqs["value"], reqs["time_ns"])):
        kind = queues.get((slot, int(q)))
        if slot is None:
            status[i] = UNKNOWN_DEVICE
        elif kind == ARRIVAL:
            status[i] = RX_REFILL
        elif kind != COMPLETION and slot not in shared:
            status[i] = NO_VECTOR
        else:
            events.append((int(t), 0, i))
    # the columns read per event, as lists (an element of a list is far cheaper to read than
    # one of a pandas column)
    e_vcpu, e_icount, e_time, e_vector = (ents[c].tolist() for c in
                                          ("vcpu", "icount", "time_ns", "vector"))
    r_slot, r_value, r_vcpu, r_icount, r_time = (reqs[c].tolist() for c in
                                                 ("slot", "value", "vcpu", "icount", "time_ns"))
    for j in np.flatnonzero(known).tolist():
        events.append((int(e_time[j]), 1, j))
    events.sort()

    pending: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    seen_kick: set[tuple[Any, Any]] = set()
    links: list[dict[str, Any]] = []
    for _, what, i in events:
        if what == 0:
            slot, q = r_slot[i], int(r_value[i])
            key = (slot, q) if (slot, q) in queues else (slot, None)
            pending[key].append(i)
            seen_kick.add(key)
            continue
        line = line_of[keys[i]]
        base = {"vcpu": int(e_vcpu[i]), "icount": int(e_icount[i]),
                "time_ns": int(e_time[i]), "vector": int(e_vector[i]),
                "irq": line.irq, "name": line.name, "slot": line.slot, "driver": line.driver,
                "queue": line.queue, "kind": line.kind}
        key = (line.slot, line.queue)
        answered = pending.pop(key, []) if line.kind == COMPLETION else []
        if not answered:
            why = (line.kind if line.kind != COMPLETION
                   else NONE_PENDING if key in seen_kick else BEFORE_FIRST)
            links.append({**base, "status": why, "batch": 0})
        for k in answered:
            status[k] = LINKED
            kv, ki, kt = int(r_vcpu[k]), int(r_icount[k]), int(r_time[k])
            links.append({**base, "status": LINKED, "batch": len(answered), "kick_vcpu": kv,
                          "kick_icount": ki, "kick_time_ns": kt,
                          "latency_ns": base["time_ns"] - kt,
                          "same_vcpu_insns": base["icount"] - ki if kv == base["vcpu"]
                          else None})
    cols = ["vcpu", "icount", "time_ns", "vector", "irq", "name", "slot", "driver", "queue",
            "kind", "status", "batch", "kick_vcpu", "kick_icount", "kick_time_ns",
            "latency_ns", "same_vcpu_insns"]
    table = pd.DataFrame(links, columns=cols)
    for key, left in pending.items():  # unanswered: hidden among refused vectors, or not
        if refused and key in hidden:
            status[left] = NO_VECTOR
    for col in cols[12:]:
        table[col] = table[col].astype("Int64")
    reqs["status"] = status
    return Completions(vectors, table, reqs, unmapped)


__all__ = ["AFTER_LAST", "AMBIGUOUS", "ARRIVAL", "BEFORE_FIRST", "COMPLETION", "CONFIG",
           "Completions", "IrqLine", "LINKED", "MAPPED", "NONE_PENDING", "NO_LINE",
           "NO_SNAPSHOTS", "NO_VECTOR", "RX_REFILL", "UNKNOWN_DEVICE", "irq_lines",
           "link_completions", "map_vectors"]
