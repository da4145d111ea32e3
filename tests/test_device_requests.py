"""The ``device_requests`` table: reading, ``pysched check`` and naming the device written to
(synthetic traces from tracefactory; the plugin's side is tests/test_plugin*.py's)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracefactory as tf
from pysched.capture import console as con
from pysched.capture.devices import manifest_devices, parse_pci, parse_ranges
from pysched.trace import open_trace
from pysched.trace.checker import check_trace
from pysched.trace.devices import device_requests, locate
from pysched.trace.schema import REGION_NONE, SPACE_MMIO, SPACE_PORT

BLK_NOTIFY, NET_NOTIFY = 0xFE004000, 0xFE003000
IOWRITE16 = tf.KBASE + 0x1544680
REGIONS = ["virtio-pci-notify-virtio-blk", "virtio-pci-notify-virtio-net"]

IOMEM = """\
00000000-00000fff : Reserved
00100000-1ffdbfff : System RAM
  11400000-12201d31 : Kernel code
fe000000-fe003fff : 0000:00:02.0
  fe000000-fe003fff : virtio-pci-modern
fe004000-fe007fff : 0000:00:03.0
  fe004000-fe007fff : virtio-pci-modern
"""
IOPORTS = """\
0000-0cf7 : PCI Bus 0000:00
  0060-0060 : keyboard
c000-c01f : 0000:00:03.0
  c000-c01f : virtio-pci-legacy
"""
PCI = """\
0000:00:00.0 0x8086 0x29c0 0x060000 - -
0000:00:02.0 0x1af4 0x1000 0x020000 virtio-pci virtio_net
0000:00:03.0 0x1af4 0x1001 0x010000 virtio-pci virtio_blk
"""


def kick_factory() -> tf.TraceFactory:
    """Two vCPUs, each kicking a queue from iowrite16 (its store is instruction 1 of the
    function's second block); vCPU 1 also writes a legacy port."""
    f = tf.sample()
    io_a = f.block(IOWRITE16, [4, 3])
    io_b = f.block(IOWRITE16 + 9, [3, 1, 1])
    f.run(0, io_a, io_b)
    f.device_request(0, 0, BLK_NOTIFY, 0, region=0)
    f.run(0, io_a, io_b)
    f.device_request(0, 0, NET_NOTIFY + 4, 1, region=1)
    f.run(1, io_a, io_b)
    f.device_request(1, 0, BLK_NOTIFY + 4, 1, region=0)
    f.device_request(1, 1, 0xC010, 0, space=SPACE_PORT, region=REGION_NONE)
    f.plugin_info.update(vcpus=2, device_regions=list(REGIONS))
    return f


def write_manifest(root: Path) -> None:
    sections = {"iomem_before": IOMEM, "ioports_before": IOPORTS, "pci_before": PCI}
    (root / "manifest.json").write_text(json.dumps({"devices": manifest_devices(sections)}))


def test_kicks_read_check_and_name_their_device(tmp_path: Path) -> None:
    root = kick_factory().write(tmp_path / "t")
    write_manifest(root)
    t = open_trace(root)
    report = check_trace(t)
    assert report.ok, report.format()
    assert "check devices: ok" in report.format()
    df = device_requests(t)
    assert list(df.vcpu) == [0, 0, 1, 1]
    assert list(df.value) == [0, 1, 1, 0]
    assert list(df.region_name[:3]) == [REGIONS[0], REGIONS[1], REGIONS[0]]
    assert df.region_name.isna().tolist() == [False, False, False, True]  # a port write
    assert list(df.driver) == ["virtio_blk", "virtio_net", "virtio_blk", "virtio_blk"]
    assert list(df.slot) == ["0000:00:03.0", "0000:00:02.0", "0000:00:03.0", "0000:00:03.0"]
    assert list(df.offset) == [0, 0x3004, 4, 0x10]
    # a port write to offset 16 of a legacy virtio BAR is a kick too
    assert df.kick.all()


def test_trace_without_the_table_opens_and_passes(tmp_path: Path) -> None:
    """Traces recorded before the plugin wrote device_requests have none."""
    t = open_trace(tf.sample().write(tmp_path / "t"))
    assert not (tmp_path / "t" / "device_requests").exists()
    assert t.df("device_requests").empty
    assert list(t.df("device_requests").columns[-2:]) == ["region", "pc"]
    report = check_trace(t)
    assert report.ok, report.format()
    assert device_requests(t).empty


@pytest.mark.parametrize("damage, message", [
    ("unsorted", "icount decreases"),
    ("beyond", "exec_row beyond the exec stream"),
    ("pc", "but the instruction at icount-1 is at"),
    ("other_insn", "but the instruction at icount-1 is at"),
    ("unknown_vcpu", "rows of vCPU 2, which has no exec stream and is not one of the 2 vCPUs of plugin.json"),
    ("region", "region 5 but plugin.json names 2 device regions"),
    ("port_region", "a port write names region 0"),
    ("space", "space 3 is neither"),
    ("size", "size 3 is not"),
])
def test_device_request_violations(tmp_path: Path, damage: str, message: str) -> None:
    f = kick_factory()
    rows0, rows1 = f.rows["device_requests"][0], f.rows["device_requests"][1]
    if damage == "unsorted":
        rows0[0]["icount"], rows0[1]["icount"] = rows0[1]["icount"], rows0[0]["icount"]
    elif damage == "beyond":
        rows1[-1]["exec_row"] = len(f.exec[1]) + 5
    elif damage == "pc":
        rows0[0]["pc"] += 1
    elif damage == "other_insn":  # the icount of the instruction before the store
        rows0[0]["icount"] -= 1
        rows0[0]["exec_row"] -= 1
    elif damage == "unknown_vcpu":
        row = dict(rows1[0], vcpu=2)
        tf.write_part(tf.part_path(tmp_path / "t", "device_requests", 0, 2), "device_requests",
                      {c: [row[c]] for c, _ in tf.COLUMNS["device_requests"]}, 2)
    elif damage == "region":
        rows0[0]["region"] = 5
    elif damage == "port_region":
        rows1[1]["region"] = 0
    elif damage == "space":
        rows0[0]["space"] = 3
    elif damage == "size":
        rows0[0]["size"] = 3
    report = check_trace(open_trace(f.write(tmp_path / "t")))
    assert not report.ok and message in report.format(), report.format()


def test_device_snapshot_parsing() -> None:
    ranges = parse_ranges(IOMEM)
    assert ranges[2] == {"start": 0x11400000, "end": 0x12201D31, "name": "Kernel code",
                         "depth": 1}
    assert parse_pci(PCI)[0]["driver"] is None
    devices = manifest_devices({"iomem_before": IOMEM, "ioports_before": IOPORTS,
                                "pci_before": PCI})
    assert locate(devices, SPACE_MMIO, BLK_NOTIFY + 4)["driver"] == "virtio_blk"
    assert locate(devices, SPACE_MMIO, 0x200)["slot"] is None
    assert locate(None, SPACE_MMIO, BLK_NOTIFY)["driver"] is None
    assert manifest_devices({"iomem_before": None}) is None


def test_console_device_sections() -> None:
    """The guest prints the device snapshot before the /proc ones; the command's output keeps
    none of them."""
    text = ("=== PYSCHED BEGIN ===\nhello\n"
            f"=== /proc/iomem before ===\n{IOMEM}=== /proc/ioports before ===\n{IOPORTS}"
            f"=== /sys/bus/pci before ===\n{PCI}"
            "=== /proc/interrupts before ===\n           CPU0\n  0:   4   IO-APIC  timer\n"
            "=== /proc/stat before ===\nctxt 5\nsoftirq 1 0\n"
            "=== /proc/interrupts after ===\n           CPU0\n  0:   5   IO-APIC  timer\n"
            "=== /proc/stat after ===\nctxt 9\nsoftirq 2 0\n=== PYSCHED EXIT 0 ===\n")
    s = con.proc_sections(text)
    assert s["iomem_before"] == IOMEM and s["ioports_before"] == IOPORTS
    assert s["pci_before"] == PCI
    assert s["stat_after"] == "ctxt 9\nsoftirq 2 0\n"
    assert con.command_output(text) == "hello\n"
