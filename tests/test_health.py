"""Check ``health`` (issue 19, item 6): a degraded trace fails ``pysched check`` with the
probable cause, and ``analyse``/``evaluate`` refuse it (through the preflight).

Degraded traces are made two ways: the synthetic recording of :mod:`tests.tracefactory` given
a symbol map and then stripped of what a broken capture lacks, and copies of a shipped trace
whose ``plugin.json`` or event parts are rewritten the way a broken capture writes them.
"""
from __future__ import annotations

import argparse
import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tracefactory as tf
from pysched.cli import main
from pysched.trace import TraceRejected, preflight
from pysched.trace import checker as check_cli

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "data" / "dss-mem"
T1, T2 = 0xFFFF888000100000, 0xFFFF888000200000


def _check(path: Path) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    check_cli.add_arguments(parser)
    out = io.StringIO()
    return check_cli.run(parser.parse_args([str(path), "--limit", "3"]), out=out), out.getvalue()


def _healthy() -> tf.TraceFactory:
    """The sample recording as the plugin writes it with a symbol map."""
    f = tf.sample()
    f.plugin_info = {"schema_version": 1, "final": True,
                     "options": {"roi": "marker", "sysmap": "System.map"},
                     "ram_base_calibrated": True, "ram_base_mismatches": 0, "idt_reads": 1}
    return f


def _fails(path: Path, *words: str) -> str:
    """``check`` exits 1 with a ``health`` violation naming ``words``; preflight refuses."""
    status, out = _check(path)
    assert status == 1, out
    assert "check health: ok" not in out, out
    with pytest.raises(TraceRejected) as err:
        preflight(path)
    for w in words:
        assert w in out, (w, out)
        assert w in str(err.value), (w, str(err.value))
    return out


def test_healthy_synthetic_trace_passes(tmp_path: Path) -> None:
    status, out = _check(_healthy().write(tmp_path / "t"))
    assert status == 0 and "check health: ok" in out, out


def test_no_idt_read(tmp_path: Path) -> None:
    f = _healthy()
    f.plugin_info["idt_reads"] = 0
    _fails(f.write(tmp_path / "t"), "never read the IDT", "idt_table")


def test_unresolved_vcpus_under_round_robin_tcg(tmp_path: Path) -> None:
    f = _healthy()
    f.plugin_info.update(round_robin=True, vcpu_unresolved=3)
    _fails(f.write(tmp_path / "t"), "3 recording callbacks could not tell which vCPU",
           "__per_cpu_offset")


def test_round_robin_tcg_with_every_vcpu_resolved_passes(tmp_path: Path) -> None:
    f = _healthy()
    f.plugin_info.update(round_robin=True, vcpu_unresolved=0)
    status, out = _check(f.write(tmp_path / "t"))
    assert status == 0 and "check health: ok" in out, out


def test_calibration_mismatch(tmp_path: Path) -> None:
    f = _healthy()
    f.plugin_info["ram_base_mismatches"] = 7
    _fails(f.write(tmp_path / "t"), "7 kernel-text blocks disagreed with the RAM calibration")


def test_calibration_missing(tmp_path: Path) -> None:
    f = _healthy()
    f.plugin_info["ram_base_calibrated"] = False
    _fails(f.write(tmp_path / "t"), "RAM calibration never happened")


def test_slide_not_found(tmp_path: Path) -> None:
    f = _healthy()
    f.plugin_info["kaslr"] = {"found": False, "reason": "no system call in the region"}
    _fails(f.write(tmp_path / "t"), "slide was not found", "no system call in the region")


def test_no_switch_while_threads_changed(tmp_path: Path) -> None:
    f = _healthy()
    f.rows["switches"][1] = []
    f.rows["markers"][1][0]["thread"] = T2  # vCPU 1 ran T1 and T2 but recorded no switch
    _fails(f.write(tmp_path / "t"), "no context switch although 2 threads ran", "__switch_to")


def test_one_thread_without_switch_is_fine(tmp_path: Path) -> None:
    f = _healthy()
    f.rows["switches"][1] = []  # vCPU 1's events all name T1: no switch is needed
    status, out = _check(f.write(tmp_path / "t"))
    assert "check health: ok" in out, out


def test_unknown_threads(tmp_path: Path) -> None:
    f = _healthy()
    for r in f.rows["interrupts"][0]:
        r["thread"] = 0
    out = _fails(f.write(tmp_path / "t"), "unknown thread", "page-table isolation")
    assert "interrupts v0" in out


def test_unknown_frames_over_one_percent(tmp_path: Path) -> None:
    f = _healthy()
    b = next(iter(f.blocks.values()))  # the user loop, run three times
    b.paddrs = [2**64 - 1] * len(b.paddrs)
    _fails(f.write(tmp_path / "t"), "executed instructions have an unknown frame")


def test_without_a_map_threads_are_not_required(tmp_path: Path) -> None:
    f = _healthy()
    f.plugin_info["options"].pop("sysmap")
    for r in f.rows["syscalls"][0]:
        r["thread"] = 0
    status, out = _check(f.write(tmp_path / "t"))
    assert "check health: ok" in out and "no symbol map" in out, out


def _copy(tmp_path: Path) -> Path:
    if not (SMALL / "manifest.json").is_file():
        pytest.fail(f"the shipped trace {SMALL} is missing")
    return Path(shutil.copytree(SMALL, tmp_path / "t"))


def test_shipped_trace_without_idt_is_refused_by_analyse_and_evaluate(tmp_path: Path,
                                                                      capsys) -> None:
    t = _copy(tmp_path)
    info = json.loads((t / "plugin.json").read_text())
    info["idt_reads"] = 0
    (t / "plugin.json").write_text(json.dumps(info))
    _fails(t, "never read the IDT")
    out = tmp_path / "res"
    assert main(["analyse", str(t), "--out", str(out)]) == 1
    assert "never read the IDT" in capsys.readouterr().err and not out.exists()
    assert main(["evaluate", str(t), "--policies", "linux", "--out", str(out)]) == 1
    assert "never read the IDT" in capsys.readouterr().err and not out.exists()


def test_shipped_trace_with_unknown_syscall_threads(tmp_path: Path) -> None:
    # What pti=on gave before the plugin read the thread through the kernel's page table.
    t = _copy(tmp_path)
    for part in sorted((t / "syscalls").glob("v000-*.parquet")):
        table = pq.read_table(part)
        i = table.schema.get_field_index("thread")
        zero = pa.array([0] * table.num_rows, type=pa.uint64())
        table = table.set_column(i, "thread", zero)
        pq.write_table(table, part, compression="zstd", write_page_checksum=True)
    _fails(t, "unknown thread", "syscalls v0")


def test_slide_not_confirmed_by_the_idt(tmp_path: Path) -> None:
    f = _healthy()
    f.plugin_info["kaslr"] = {"found": True, "virtual_slide": 0x200000,
                              "verified_by_idt": False, "idt_handlers_outside_text": 40}
    _fails(f.write(tmp_path / "t"), "not confirmed by the IDT (40 handlers")


def test_slide_differs_from_kallsyms(tmp_path: Path) -> None:
    f = _healthy()
    f.plugin_info["kaslr"] = {"found": True, "virtual_slide": 0x200000, "verified_by_idt": True}
    t = f.write(tmp_path / "t")
    (t / "manifest.json").write_text(json.dumps({"complete": True, "kernel_symbols": {
        "slide": 0x200000, "slide_kallsyms": 0x400000}}))
    _fails(t, "/proc/kallsyms gives the slide 0x400000, the plugin found 0x200000")


def test_frames_follow_phys_base(tmp_path: Path) -> None:
    # A KASLR kernel loaded 16 MiB below its link address: kernel text at va - KBASE + base.
    base = -0x1000000
    f = _healthy()
    f.plugin_info.update(phys_base=base % 2**64, phys_base_found=True,
                         kaslr={"found": True, "virtual_slide": 0, "verified_by_idt": True})
    for b in f.blocks.values():
        if b.vaddr >= tf.KBASE:
            b.paddrs = [p + base for p in b.paddrs]
    status, out = _check(f.write(tmp_path / "t"))
    assert status == 0 and "check frames: ok" in out, out
    f.plugin_info["phys_base"] = 0  # the nokaslr rule no longer fits these frames
    status, out = _check(f.write(tmp_path / "u"))
    assert status == 1 and "kernel text at" in out and "(nokaslr)" in out, out
