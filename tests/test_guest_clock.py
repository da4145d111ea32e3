"""The guest clock of ``pysched trace`` (issue 32, item 1): ``--clock`` and ``--insn-rate`` to
QEMU's options, the manifest's ``guest_clock``, and what QEMU itself accepts."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pysched.capture import clock as gclock
from pysched.capture import qemu as qm


def test_default_is_the_instruction_clock_at_the_fastest_rate() -> None:
    c = gclock.guest_clock(gclock.DEFAULT_CLOCK, None, 2)
    assert (c.source, c.shift, c.machine_rate, c.insn_rate) == ("insns", 0, 1e9, 5e8)
    assert c.qemu_args() == ["-accel", "tcg,thread=single", "-icount", "shift=0,sleep=on"]
    assert c.manifest(250) == {"source": "insns", "icount": "shift=0,sleep=on",
                               "machine_insn_rate": 1e9, "insn_rate_per_vcpu": 5e8, "hz": 250}


@pytest.mark.parametrize("rate, vcpus, shift", [
    ("500M", 2, 0), ("250M", 2, 1), ("1G", 1, 0), ("250M", 4, 0), ("62.5M", 2, 3),
    ("2.5e8", 2, 1), ("333M", 3, 0), ("976.5625K", 1, 10),
])
def test_rates_map_to_icount_shifts(rate: str, vcpus: int, shift: int) -> None:
    assert gclock.guest_clock("insns", rate, vcpus).shift == shift


def test_host_clock_keeps_multi_threaded_tcg() -> None:
    c = gclock.guest_clock("host", None, 4)
    assert c.shift is None and c.insn_rate is None
    assert c.qemu_args() == ["-accel", "tcg,thread=multi"]
    assert c.manifest(None)["source"] == "host"


def test_rates_and_their_spelling() -> None:
    assert [gclock.format_rate(r) for r in gclock.rates(2)[:4]] == ["500M", "250M", "125M",
                                                                   "62.5M"]
    assert len(gclock.rates(1)) == gclock.MAX_SHIFT + 1


def test_qemu_argv_puts_the_clock_where_the_accelerator_was() -> None:
    c = gclock.guest_clock("insns", None, 2)
    argv = qm.qemu_argv(Path("k"), Path("i"), 512, 2, clock=c.qemu_args())
    i = argv.index("-accel")
    assert argv[i:i + 4] == ["-accel", "tcg,thread=single", "-icount", "shift=0,sleep=on"]
    assert "tcg,thread=multi" in qm.qemu_argv(Path("k"), Path("i"), 512, 2)


def test_kernel_hz(tmp_path: Path) -> None:
    (tmp_path / "config").write_text("# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n")
    assert gclock.kernel_hz(tmp_path / "config") == 250
    assert gclock.kernel_hz(tmp_path / "missing") is None


@pytest.mark.skipif(shutil.which(qm.QEMU) is None, reason="QEMU not installed")
def test_the_installed_qemu_accepts_the_default_and_refuses_a_bad_shift() -> None:
    gclock.check_qemu_accepts(qm.QEMU, gclock.guest_clock("insns", None, 2))
    with pytest.raises(ValueError, match="QEMU refuses -icount shift=11,sleep=on.*shift"):
        gclock.check_qemu_accepts(qm.QEMU, gclock.GuestClock("insns", 2, 11))


def test_host_deadline_only_for_a_debian_region_bounded_by_instructions_on_the_insns_clock(
        ) -> None:
    import argparse

    from pysched.capture import plan

    insns, host = gclock.guest_clock("insns", None, 2), gclock.guest_clock("host", None, 2)
    args = argparse.Namespace(roi_insns=20_000_000, timeout=600.0)
    assert plan._region_deadline(args, insns, "debian") == 300.0
    assert plan._region_deadline(args, host, "debian") is None
    assert plan._region_deadline(args, insns, "busybox") is None
    args.roi_insns = None
    assert plan._region_deadline(args, insns, "debian") is None
