"""Linking virtio completion interrupts to the kicks they answer (pysched.trace.completions):
the vector map from the manifest's /proc/interrupts snapshots, the linking rule, and
``pysched devices``; synthetic traces from tracefactory, and invariants on a shipped trace."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracefactory as tf
from pysched.capture.console import parse_interrupts
from pysched.capture.devices import manifest_devices
from pysched.cli import main
from pysched.trace import open_trace
from pysched.trace.completions import (AFTER_LAST, AMBIGUOUS, ARRIVAL, BEFORE_FIRST, LINKED,
                                       MAPPED, NO_LINE, NO_SNAPSHOTS, NO_VECTOR, NONE_PENDING,
                                       RX_REFILL, irq_lines, link_completions)
from test_device_requests import BLK_NOTIFY, IOMEM, IOPORTS, IOWRITE16, NET_NOTIFY, PCI, REGIONS

ROOT = Path(__file__).resolve().parents[1]
HANDLER = tf.KBASE + 0x1300000
# The guests' lines: virtio1 is virtio-blk at 00:03.0, virtio0 virtio-net at 00:02.0 (MSI
# numbers (devfn << 11) | MSI-X index).
LINES = [("24", 49152, "virtio1-config"), ("25", 49153, "virtio1-req.0"),
         ("26", 49154, "virtio1-req.1"), ("27", 32768, "virtio0-config"),
         ("28", 32769, "virtio0-input.0"), ("29", 32770, "virtio0-output.0")]
BLK_SLOT, NET_SLOT = "0000:00:03.0", "0000:00:02.0"


def proc_interrupts(counts: dict[str, tuple[int, int]]) -> str:
    """A two-CPU /proc/interrupts with the virtio lines (counts by label, else 0) and ttyS0."""
    out = ["           CPU0       CPU1       "]
    for label, hwirq, name in LINES:
        c0, c1 = counts.get(label, (0, 0))
        out.append(f" {label}: {c0:10d} {c1:10d}   PCI-MSI {hwirq}-edge      {name}")
    c0, c1 = counts.get("4", (0, 0))
    out.append(f"  4: {c0:10d} {c1:10d}   IO-APIC   4-edge      ttyS0")
    out.append(f"LOC: {100:10d} {100:10d}   Local timer interrupts")
    return "\n".join(out) + "\n"


class Scene:
    """A two-vCPU trace of kicks and device interrupts, in the order they are made (the
    factory's clock rises by 100 ns an event, across vCPUs)."""

    def __init__(self) -> None:
        self.f = tf.sample()
        self.io_a = self.f.block(IOWRITE16, [4, 3])
        self.io_b = self.f.block(IOWRITE16 + 9, [3, 1, 1])
        self.work = self.f.block(tf.KBASE + 0x1400000, [2, 2])
        self.handler = self.f.block(HANDLER, [5, 3])
        self.f.plugin_info.update(vcpus=2, device_regions=list(REGIONS))

    def kick(self, v: int, queue: int, net: bool = False) -> int:
        """A kick of ``queue``; returns its time_ns."""
        self.f.run(v, self.io_a, self.io_b)
        self.f.device_request(v, 0, (NET_NOTIFY if net else BLK_NOTIFY) + 4 * queue, queue,
                              region=int(net))
        return self.f.clock

    def irq(self, v: int, vector: int) -> int:
        """A device interrupt entry on ``v``; returns its time_ns."""
        self.f.run(v, self.work)
        self.f.interrupt(v, vector, HANDLER, user=0)
        self.f.run(v, self.handler)
        return self.f.clock

    def write(self, root: Path, counts: dict[str, tuple[int, int]] | None,
              devices: bool = True) -> Path:
        """The trace, with a manifest whose snapshots counted ``counts`` in between (None:
        no snapshots)."""
        self.f.write(root)
        manifest: dict = {}
        if devices:
            manifest["devices"] = manifest_devices(
                {"iomem_before": IOMEM, "ioports_before": IOPORTS, "pci_before": PCI})
        if counts is not None:
            snaps = {}
            for when, c in (("before", {}), ("after", counts)):
                raw = proc_interrupts(c)
                snaps[when] = {"raw": raw, "counts": parse_interrupts(raw)}
            manifest["interrupts"] = snaps
        (root / "manifest.json").write_text(json.dumps(manifest))
        return root


def test_irq_lines_name_slot_queue_and_kind() -> None:
    lines = irq_lines(proc_interrupts({}), manifest_devices({"pci_before": PCI}))
    assert set(lines) == {"24", "25", "26", "27", "28", "29", "4"}
    req1, rx, tx = lines["26"], lines["28"], lines["29"]
    assert (req1.slot, req1.driver, req1.queue, req1.kind) == (BLK_SLOT, "virtio_blk", 1,
                                                               "completion")
    assert (rx.slot, rx.driver, rx.queue, rx.kind) == (NET_SLOT, "virtio_net", 0, "arrival")
    assert (tx.queue, tx.kind) == (1, "completion")
    assert (lines["24"].queue, lines["24"].kind) == (None, "config")
    assert (lines["4"].slot, lines["4"].kind, lines["4"].name) == (None, None, "ttyS0")


def test_a_completion_answers_its_queues_kick_across_vcpus(tmp_path: Path) -> None:
    s = Scene()
    k0 = s.kick(0, 0)
    i0 = s.irq(0, 35)                 # queue 0's interrupt, on CPU 0
    k1 = s.kick(1, 1)
    k2 = s.kick(1, 0)                 # vCPU 1 kicks queue 0 ...
    i1 = s.irq(1, 36)                 # ... queue 1's interrupt does not answer it
    i2 = s.irq(0, 35)                 # queue 0's does, on the other vCPU
    found = link_completions(open_trace(s.write(tmp_path / "t", {"25": (5, 0), "26": (0, 3)})))
    vec = found.vectors
    assert list(vec.status) == [MAPPED, MAPPED]
    assert list(vec.name) == ["virtio1-req.0", "virtio1-req.1"]
    links = found.links
    assert list(links.status) == [LINKED] * 3
    assert list(links.time_ns) == [i0, i1, i2]
    assert list(links.kick_time_ns) == [k0, k1, k2]
    assert list(links.latency_ns) == [i0 - k0, i1 - k1, i2 - k2]
    assert list(links.queue) == [0, 1, 0]
    assert links.same_vcpu_insns.isna().tolist() == [False, False, True]
    assert list(found.kicks.status) == [LINKED] * 3
    rep = found.report().iloc[0]
    assert (rep.slot, rep.driver, rep.completions, rep.linked, rep.kicks_linked) == (
        BLK_SLOT, "virtio_blk", 3, 3, 3)


def test_coalesced_interrupts_and_those_answering_no_kick(tmp_path: Path) -> None:
    s = Scene()
    s.irq(0, 35)                      # a request of before the region
    ka, kb = s.kick(0, 0), s.kick(0, 0)
    both = s.irq(0, 35)               # one interrupt for two requests
    s.irq(0, 35)                      # nothing pending: polled, or added without a kick
    found = link_completions(open_trace(s.write(tmp_path / "t", {"25": (3, 0)})))
    links = found.links
    assert list(links.status) == [BEFORE_FIRST, LINKED, LINKED, NONE_PENDING]
    assert list(links.batch) == [0, 2, 2, 0]
    assert list(links.kick_time_ns[1:3]) == [ka, kb]
    assert list(links.latency_ns[1:3]) == [both - ka, both - kb]
    rep = found.report().iloc[0]
    assert (rep.interrupts, rep.completions, rep.linked, rep.before_first_kick,
            rep.no_kick_pending, rep.kicks_per_completion) == (3, 3, 1, 1, 1, 2.0)


def test_kicks_no_interrupt_answered(tmp_path: Path) -> None:
    s = Scene()
    s.kick(0, 0)
    s.irq(0, 35)
    s.kick(0, 0)                      # after the queue's last interrupt
    s.kick(1, 1)                      # queue 1 took no interrupt in the region
    found = link_completions(open_trace(s.write(tmp_path / "t", {"25": (1, 0), "26": (0, 4)})))
    assert list(found.kicks.status) == [LINKED, AFTER_LAST, AFTER_LAST]
    rep = found.report().iloc[0]
    assert (rep.kicks, rep.kicks_linked, rep.kicks_after_last) == (3, 1, 2)


def test_receive_interrupts_are_arrivals_and_transmits_complete(tmp_path: Path) -> None:
    s = Scene()
    s.irq(0, 37)                      # a packet arrives
    s.kick(0, 0, net=True)            # receive buffers handed back: no request
    kt = s.kick(1, 1, net=True)       # a transmit
    it = s.irq(1, 38)
    found = link_completions(open_trace(s.write(tmp_path / "t", {"28": (1, 0), "29": (0, 1)})))
    links = found.links
    assert list(links.status) == [ARRIVAL, LINKED]
    assert links.latency_ns.iat[1] == it - kt
    assert list(found.kicks.status) == [RX_REFILL, LINKED]
    rep = found.report().iloc[0]
    assert (rep.driver, rep.arrivals, rep.completions, rep.rx_refills) == ("virtio_net", 1, 1, 1)


def test_an_ambiguous_vector_is_refused_not_guessed(tmp_path: Path) -> None:
    s = Scene()
    s.kick(0, 0)
    s.irq(0, 35)
    s.irq(0, 35)
    s.irq(1, 36)
    # CPU 0: req.0 and input.0 both counted 2 or more: vector 35 could be either.
    # CPU 1: no line counted 1 (ttyS0 only on CPU 0).
    counts = {"25": (2, 0), "28": (9, 0), "4": (1, 0)}
    found = link_completions(open_trace(s.write(tmp_path / "t", counts)))
    vec = found.vectors.set_index("vector")
    assert vec.at[35, "status"] == AMBIGUOUS and vec.at[36, "status"] == NO_LINE
    assert vec.at[35, "candidates"] == "virtio1-req.0 (25), virtio0-input.0 (28)"
    assert vec.name.isna().all()
    assert found.links.empty and len(found.unmapped) == 3
    assert list(found.kicks.status) == [NO_VECTOR]  # its interrupts may be among the refused
    rep = found.report()
    assert rep.iloc[-1].slot == "?" and rep.iloc[-1].interrupts == 3


def test_a_line_taken_by_one_vector_is_no_candidate_of_another(tmp_path: Path) -> None:
    """oscp's CPU 0: only input.0 counted the 3 entries of vector 37, which leaves req.0 the
    one line for vector 35."""
    s = Scene()
    s.irq(0, 35)
    for _ in range(3):
        s.irq(0, 37)
    found = link_completions(open_trace(s.write(tmp_path / "t", {"25": (2, 0), "28": (5, 0)})))
    assert dict(zip(found.vectors.vector, found.vectors.name)) == {35: "virtio1-req.0",
                                                                   37: "virtio0-input.0"}


def test_without_snapshots_or_devices_nothing_is_linked(tmp_path: Path) -> None:
    s = Scene()
    s.kick(0, 0)
    s.irq(0, 35)
    found = link_completions(open_trace(s.write(tmp_path / "a", None)))
    assert list(found.vectors.status) == [NO_SNAPSHOTS]
    assert list(found.kicks.status) == [NO_VECTOR] and found.links.empty
    found = link_completions(open_trace(s.write(tmp_path / "b", {"25": (1, 0)}, devices=False)))
    assert list(found.kicks.status) == ["unknown device"]


@pytest.mark.parametrize("name", ["iscp", "oscp"])  # small, with kicks of both devices
def test_invariants_on_a_shipped_trace(name: str) -> None:
    found = link_completions(open_trace(ROOT / "data" / name))
    assert (found.vectors.status == MAPPED).all()
    linked = found.links[found.links.status == LINKED]
    assert len(linked) > 0 and (linked.latency_ns > 0).all()
    assert not linked.duplicated(["kick_vcpu", "kick_icount"]).any()  # a kick answered once
    kicks = found.kicks
    assert (kicks.status == LINKED).sum() == len(linked)
    # every interrupt of a device vector is in the links or among the refused
    per_irq = found.links.drop_duplicates(["vcpu", "icount", "vector"])
    assert len(per_irq) + len(found.unmapped) == int(found.vectors.entries.sum())


def test_devices_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = Scene()
    s.kick(0, 0)
    s.irq(0, 35)
    root = s.write(tmp_path / "t", {"25": (1, 0)})
    assert main(["devices", str(root)]) == 0
    out = capsys.readouterr().out
    assert "vCPU 0 vector 35: 1 entries -> virtio1-req.0 (IRQ 25" in out
    assert f"{BLK_SLOT} virtio_blk: 1 interrupts: 1 completions (1 linked to a kick" in out
    assert main(["devices", str(tmp_path / "nothing")]) == 1
    assert f"{tmp_path / 'nothing'}: not a directory" in capsys.readouterr().err
