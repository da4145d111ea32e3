"""Issue 19 item 3: a guest with 8 GiB of RAM, whose pages lie above 4 GiB guest-physical (q35
keeps 2 GiB below the PCI hole and puts the other 6 GiB at 4 GiB), traced with data accesses
(busybox guest, 2 vCPUs, KASLR on; about 30 s).

The instruction frames the plugin computes from QEMU's host pointers are checked against the
guest-physical addresses QEMU itself gives for data accesses: the command copies the ``spin``
binary to tmpfs (the kernel's stores fill page-cache pages, recorded with QEMU's physical
addresses) and runs the copy, whose code is those same pages. So every frame of the copy's
code must be a frame the copy stored into, and most of them are above 4 GiB.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from guest_capture import capture
from pysched.capture.guest import locate_guest
from pysched.capture.qemu import default_plugin_path
from pysched.trace import open_trace

pytestmark = pytest.mark.skipif(
    not default_plugin_path().is_file(), reason="plugin not built (make plugin)"
)

GIB = 1 << 30
CMD = "cp /bin/spin /tmp/spin2; roi mark 5; /tmp/spin2 3"


@pytest.fixture(scope="module")
def highmem(tmp_path_factory) -> Path:
    return capture(tmp_path_factory, "highmem", locate_guest, "--guest", "busybox", "--cmd",
                   CMD, "--vcpus", "2", "--ram", "8G", "--data-accesses")


def test_check_passes(highmem: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "pysched.cli", "check", str(highmem)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "check health: ok" in r.stdout, r.stdout[-3000:]


def test_frames_lie_in_q35_ram_ranges(highmem: Path) -> None:
    t = open_trace(highmem)
    info = t.plugin_info
    assert info["lowmem"] == 2 * GIB and info["options"]["ram"] == 8 * GIB
    pa = t.df("insns").paddr.to_numpy()
    known = pa[pa != np.uint64(2**64 - 1)]
    assert len(known) == len(pa)  # every frame known
    below = known < np.uint64(2 * GIB)
    above = (known >= np.uint64(4 * GIB)) & (known < np.uint64(4 * GIB + 6 * GIB))
    assert (below | above).all()  # nothing in the PCI hole or beyond RAM
    assert above.sum() > 1000     # user code above 4 GiB


def test_code_frames_are_the_pages_the_copy_stored(highmem: Path) -> None:
    t = open_trace(highmem)
    insns = t.df("insns")
    mem = t.df("mem")
    stores = mem[(mem.store == 1) & (mem.paddr != np.uint64(2**64 - 1))]
    stored_frames = set((stores.paddr.to_numpy() >> np.uint64(12)).tolist())
    assert any(f >= (4 * GIB) >> 12 for f in stored_frames)  # QEMU says: stores above 4 GiB
    # spin's hot loop: the user blocks that ran most often (the copy, /tmp/spin2)
    counts: dict[int, int] = {}
    for v in t.all_vcpus():
        ids, n = np.unique(t.table("exec", v).column("block").to_numpy(), return_counts=True)
        for b, k in zip(ids.tolist(), n.tolist()):
            counts[b] = counts.get(b, 0) + k
    user_blocks = set(insns[insns.vaddr < 0x800000000000].block.tolist())
    hot = [b for b, n in counts.items() if n > 100_000 and b in user_blocks]
    assert hot, "spin's loop is missing"
    frames = set((insns[insns.block.isin(hot)].paddr.to_numpy() >> np.uint64(12)).tolist())
    assert frames and frames <= stored_frames, sorted(hex(f) for f in frames)
    assert any(f >= (4 * GIB) >> 12 for f in frames)
    # Beyond the loop: the copy's start-up code (libc's, spin's main) ran from many pages the
    # copy stored; the shell and cp (busybox) ran from pages stored before the region.
    user = insns[insns.vaddr < 0x800000000000]
    code = set((user.paddr.to_numpy() >> np.uint64(12)).tolist())
    assert len(code & stored_frames) >= 20
