"""Unit tests of pysched.capture that need no QEMU and no built guest."""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from pysched.capture import command as cmdmod
from pysched.capture import manifest as mf
from pysched.capture import plan, sysmap
from pysched.capture import console as con
from pysched.capture import guest as gst
from pysched.capture import qemu as qm

needs_cpio = pytest.mark.skipif(shutil.which("cpio") is None, reason="GNU cpio not installed")

INTERRUPTS = """\
           CPU0       CPU1       
  0:         43          0   IO-APIC   2-edge      timer
  4:          0        156   IO-APIC   4-edge      ttyS0
NMI:          0          0   Non-maskable interrupts
LOC:        579        648   Local timer interrupts
RES:         17         19   Rescheduling interrupts
ERR:          0
MIS:          0
PIN:          0          0   Posted-interrupt notification event
"""

STAT = """\
cpu  8 0 388 160 0 0 10 0 0 0
cpu0 2 0 185 91 0 0 4 0 0 0
cpu1 6 0 203 68 0 0 5 0 0 0
intr 1925 103 9 0
ctxt 1217
btime 1795313780
processes 94
procs_running 2
procs_blocked 0
softirq 1035 0 146 0 0 0 0 1 532 0 356
"""


def _console(rc: int = 0, output: str = "hello\nnumbers 12 13\n", old: bool = False) -> str:
    """A console log as QEMU writes it: CRLF line ends, firmware escapes on the first line.
    The snapshots follow the command's output; ``old``: the "before" ones precede it (the
    layout of traces made before the snapshots moved out of the region)."""
    after_irq = INTERRUPTS.replace("579", "600")
    after_stat = STAT.replace("ctxt 1217", "ctxt 1300")
    before = "=== /proc/interrupts before ===\n" + INTERRUPTS + "=== /proc/stat before ===\n" + STAT
    text = (
        "SeaBIOS (version 1.16.3)\n"
        "Booting from ROM..\x1bc\x1b[?7l\x1b[2J\x1b[0m.=== PYSCHED BEGIN ===\n"
        + (before + output if old else output + before)
        + "=== /proc/interrupts after ===\n" + after_irq
        + "=== /proc/stat after ===\n" + after_stat
        + f"=== PYSCHED EXIT {rc} ===\n"
        "[    4.003876] reboot: Power down\n"
    )
    return text.replace("\n", "\r\n")


# --- cpio ------------------------------------------------------------------------------------


def _cpio_list(archive: Path) -> list[str]:
    out = subprocess.run(["cpio", "-itv", "--quiet", "-F", str(archive)],
                         capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


@needs_cpio
def test_cpio_newc_listed_by_gnu_cpio(tmp_path: Path) -> None:
    entries = [
        gst.CpioEntry("etc", gst.S_IFDIR | 0o755),
        gst.CpioEntry("etc/a.txt", gst.S_IFREG | 0o644, b"abc"),  # odd sizes exercise padding
        gst.CpioEntry("cmd.sh", gst.S_IFREG | 0o755, b"echo hi\n"),
    ]
    archive = tmp_path / "a.cpio"
    archive.write_bytes(gst.cpio_newc(entries))
    lines = _cpio_list(archive)
    assert [ln.split()[-1] for ln in lines] == ["etc", "etc/a.txt", "cmd.sh"]
    modes = {ln.split()[-1]: ln.split()[0] for ln in lines}
    assert modes == {"etc": "drwxr-xr-x", "etc/a.txt": "-rw-r--r--", "cmd.sh": "-rwxr-xr-x"}
    # And it extracts to the same bytes and mode.
    dest = tmp_path / "x"
    dest.mkdir()
    subprocess.run(["cpio", "-idm", "--quiet", "--no-absolute-filenames", "-F", str(archive)],
                   cwd=dest, check=True)
    assert (dest / "etc/a.txt").read_bytes() == b"abc"
    assert (dest / "cmd.sh").read_bytes() == b"echo hi\n"
    assert stat.S_IMODE((dest / "cmd.sh").stat().st_mode) == 0o755


def test_cpio_newc_layout() -> None:
    data = gst.cpio_newc([gst.CpioEntry("cmd.sh", gst.S_IFREG | 0o755, b"x")])
    assert data.startswith(b"070701")
    assert len(data) % 4 == 0
    # newc header: magic + 13 fields of 8 hex digits; mode is the second field.
    assert int(data[14:22], 16) == 0o100755
    assert b"TRAILER!!!\0" in data


@needs_cpio
def test_cmd_archive_holds_executable_cmd_sh(tmp_path: Path) -> None:
    raw = gzip.decompress(gst.cmd_archive("echo one\necho two"))
    archive = tmp_path / "cmd.cpio"
    archive.write_bytes(raw)
    modes = {ln.split()[-1]: ln.split()[0] for ln in _cpio_list(archive)}
    assert modes == {"cmd.sh": "-rwxr-xr-x", "run": "drwxr-xr-x", "run/pysched": "drwxr-xr-x",
                     "run/pysched/lib.sh": "-rw-r--r--"}
    dest = tmp_path / "x"
    dest.mkdir()
    subprocess.run(["cpio", "-id", "--quiet", "-F", str(archive)], cwd=dest, check=True)
    script = (dest / "cmd.sh").read_text()
    assert script.endswith("echo one\necho two\n")
    # The run brings the current roi_start/roi_stop, whatever the base image holds.
    assert (dest / "run/pysched/lib.sh").read_bytes() == \
        (gst.GUEST_SRC_DIR / "workloads/lib.sh").read_bytes()


def test_cmd_archive_is_reproducible() -> None:
    assert gst.cmd_archive("true") == gst.cmd_archive("true")


def test_write_run_initrd_appends_after_base(tmp_path: Path) -> None:
    base = tmp_path / "base.cpio.gz"
    base.write_bytes(b"x" * 10)  # the base is copied as is, whatever it holds
    dest = gst.write_run_initrd(base, "echo hi", tmp_path / "run.img")
    data = dest.read_bytes()
    assert data[:10] == b"x" * 10
    assert data[10:12] == b"\0\0"  # padded to 4 bytes before the second archive
    assert data[12:] == gst.cmd_archive("echo hi")


def test_locate_guest_missing_says_make_setup(tmp_path: Path) -> None:
    with pytest.raises(gst.GuestNotBuiltError, match="make setup") as e:
        gst.locate_guest(tmp_path)
    assert "vmlinuz" in str(e.value)


def test_locate_guest_found(tmp_path: Path) -> None:
    for name in ["vmlinuz", "System.map", "initramfs.cpio.gz"]:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "kernel-version").write_text("6.1.0-56-amd64\n")
    g = gst.locate_guest(tmp_path)
    assert g.kernel_version == "6.1.0-56-amd64"
    assert g.kernel_package_version is None
    assert g.system_map == tmp_path / "System.map"


# --- console parsing ---------------------------------------------------------------------------


def test_parse_interrupts() -> None:
    counts = con.parse_interrupts(INTERRUPTS)
    assert counts["0"] == [43, 0]
    assert counts["4"] == [0, 156]
    assert counts["NMI"] == [0, 0]
    assert counts["LOC"] == [579, 648]
    assert counts["ERR"] == [0]  # one system-wide count
    assert counts["PIN"] == [0, 0]
    assert list(counts)[:3] == ["0", "4", "NMI"]


def test_parse_stat() -> None:
    fields = con.parse_stat(STAT)
    assert fields["cpu"][:3] == [8, 0, 388]
    assert fields["ctxt"] == [1217]
    assert fields["softirq"][0] == 1035


@pytest.mark.parametrize("old", [False, True], ids=["snapshots-after", "old-layout"])
def test_proc_sections_and_exit_status(old: bool) -> None:
    text = con.console_text(_console(rc=0, old=old).encode())
    assert "\r" not in text
    s = con.proc_sections(text)
    assert s["interrupts_before"] == INTERRUPTS  # raw text, trailing blanks included
    assert con.parse_interrupts(s["interrupts_after"])["LOC"] == [600, 648]
    # The command's output ("numbers 12 13" looks like a stat line) is not in the snapshot.
    assert s["stat_before"] == STAT
    assert s["stat_after"].splitlines()[4] == "ctxt 1300"
    assert con.guest_exit_status(text) == 0
    assert con.command_output(text) == "hello\nnumbers 12 13\n"
    assert con.guest_messages(text) == "hello\nnumbers 12 13\n=== PYSCHED EXIT 0 ===\n" \
        "[    4.003876] reboot: Power down\n"


def test_exit_status_missing_or_nonzero() -> None:
    assert con.guest_exit_status("=== PYSCHED BEGIN ===\nKernel panic\n") is None
    assert con.guest_exit_status(con.console_text(_console(rc=127).encode())) == 127


def test_tail_lines_strips_escapes() -> None:
    tail = con.tail_lines(con.console_text(_console().encode()), 200)
    assert "\x1b" not in tail
    assert con.tail_lines("a\nb\nc\n", 2) == "b\nc"


# --- QEMU command line ----------------------------------------------------------------------


def test_parse_ram() -> None:
    assert qm.parse_ram("512M") == 512
    assert qm.parse_ram("512") == 512
    assert qm.parse_ram("1G") == 1024
    assert qm.parse_ram("8G") == 8192
    for bad in ["", "12X", "0M", "9G"]:
        with pytest.raises(ValueError):
            qm.parse_ram(bad)


def test_plugin_options_and_argv(tmp_path: Path) -> None:
    opts = qm.plugin_options(Path("/t/out"), Path("/g/System.map"), 512, True, "all")
    assert opts == "out=/t/out,sysmap=/g/System.map,ram=512M,data=on,roi=all"
    assert qm.plugin_options(Path("/o"), Path("/m"), 256) == "out=/o,sysmap=/m,ram=256M"
    with pytest.raises(ValueError, match="comma"):
        qm.plugin_options(Path("/a,b"), Path("/m"), 256)
    argv = qm.qemu_argv(Path("/g/vmlinuz"), Path("/tmp/run.img"), 512, 2,
                        Path("/p/lib.so"), opts)
    assert argv[0] == qm.QEMU
    append = argv[argv.index("-append") + 1].split()
    assert {"console=ttyS0", "panic=-1"} <= set(append)
    assert "nokaslr" not in append and "pti=off" not in append  # the default needs neither
    assert argv[argv.index("-plugin") + 1] == "/p/lib.so," + opts
    assert argv[argv.index("-smp") + 1] == "2"
    assert argv[argv.index("-m") + 1] == "512M"
    assert "-no-reboot" in argv and "-nographic" in argv
    assert "-plugin" not in qm.qemu_argv(Path("/k"), Path("/i"), 512, 1)


def test_kernel_args() -> None:
    assert qm.kernel_append() == qm.KERNEL_APPEND
    line = qm.kernel_append("  mitigations=auto  console=tty0 panic=10 ")
    # The harness's console and panic come last, so they win; the user's words are kept.
    assert line.split() == ["mitigations=auto", "console=tty0", "panic=10",
                            *qm.HARNESS_KERNEL_ARGS.split()]
    assert qm.kernel_append("").split() == qm.HARNESS_KERNEL_ARGS.split()
    argv = qm.qemu_argv(Path("/k"), Path("/i"), 512, 1, append=line)
    assert argv[argv.index("-append") + 1] == line
    for bad in ("init=/bin/sh", "rdinit=/x", "a\nb", "é"):
        with pytest.raises(ValueError, match="--kernel-args"):
            qm.kernel_append(bad)


# --- pysched trace ------------------------------------------------------------------------------


def _fake_guest(tmp_path: Path) -> gst.GuestImage:
    return gst.GuestImage(tmp_path, tmp_path / "vmlinuz", tmp_path / "System.map",
                          tmp_path / "initramfs.cpio.gz", "6.1.0-56-amd64", "6.1.192-2")


def test_manifest_fields(tmp_path: Path) -> None:
    out = tmp_path / "my trace"
    argv = ["qemu-system-x86_64", "-M", "q35", "-kernel", "/b/guest/vmlinuz",
            "-drive", "file=/b/guest/debian/root.img,if=virtio,format=raw,snapshot=on",
            "-serial", "file:/tmp/pysched-trace-ab/modules.txt",
            "-plugin", f"/p/lib.so,out={out},sysmap=/b/guest/System.map,ram=512M"]
    result = qm.QemuResult(returncode=0, timed_out=False, wall_seconds=12.3456, stderr="")
    plugin = tmp_path / "lib.so"
    plugin.write_bytes(b"plugin")
    (tmp_path / "vmlinuz").write_bytes(b"kernel")
    m = mf.build_manifest(
        command="echo hi", date="2025-01-02T03:04:05Z", guest=_fake_guest(tmp_path),
        qemu_version="QEMU emulator version 10.0.2", plugin=plugin,
        plugin_options=f"out={out},sysmap=/b/guest/System.map,ram=512M", vcpus=2, ram_mib=512,
        roi="marker", data_accesses=False, timeout=600.0, argv=argv, result=result,
        console_text=con.console_text(_console(rc=0).encode()), out_dir=out,
        kernel_append="pti=on " + qm.HARNESS_KERNEL_ARGS, kernel_args="pti=on",
    )
    json.dumps(m)  # JSON-ready
    assert m["kernel_args"] == "pti=on"
    assert m["kernel_append"] == "pti=on " + qm.HARNESS_KERNEL_ARGS
    assert m["command"] == "echo hi"
    assert m["date"] == "2025-01-02T03:04:05Z"
    assert m["kernel_version"] == "6.1.0-56-amd64"
    assert m["qemu_version"].startswith("QEMU emulator version")
    # No path of the capturing machine: names, "." for the trace, and content hashes.
    assert m["plugin"] == "lib.so"
    assert m["plugin_options"] == "out=.,sysmap=System.map,ram=512M"
    assert m["qemu_argv"] == ["qemu-system-x86_64", "-M", "q35", "-kernel", "vmlinuz", "-drive",
                              "file=root.img,if=virtio,format=raw,snapshot=on", "-serial",
                              "file:modules.txt", "-plugin",
                              "lib.so,out=.,sysmap=System.map,ram=512M"]
    assert str(tmp_path) not in json.dumps(m)
    assert m["inputs"]["plugin"] == {"name": "lib.so",
                                     "sha256": hashlib.sha256(b"plugin").hexdigest()}
    assert m["inputs"]["kernel"]["name"] == "vmlinuz" and len(m["inputs"]["kernel"]["sha256"]) == 64
    assert m["complete"] is True and m["outcome"]["status"] == "ok"
    assert (m["vcpus"], m["ram"]) == (2, "512M")
    assert m["guest_exit_status"] == 0
    assert m["qemu_exit_status"] == 0 and m["timed_out"] is False
    assert m["wall_seconds"] == pytest.approx(12.346)
    assert m["interrupts"]["before"]["counts"]["LOC"] == [579, 648]
    assert m["interrupts"]["after"]["counts"]["LOC"] == [600, 648]
    assert "Local timer interrupts" in m["interrupts"]["before"]["raw"]
    assert m["stat"]["before"]["raw"] == STAT
    assert m["stat"]["after"]["fields"]["ctxt"] == [1300]


def test_manifest_of_crashed_guest(tmp_path: Path) -> None:
    result = qm.QemuResult(returncode=0, timed_out=True, wall_seconds=600.0, stderr="")
    m = mf.build_manifest(
        command="x", date="d", guest=_fake_guest(tmp_path), qemu_version="v", plugin=None,
        plugin_options=None, vcpus=1, ram_mib=256, roi="all", data_accesses=True,
        timeout=600.0, argv=[], result=result, console_text="=== PYSCHED BEGIN ===\n",
    )
    assert m["guest_exit_status"] is None
    assert m["timed_out"] is True
    assert m["interrupts"] == {"before": None, "after": None}


def _args(out: Path, **kw) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cmdmod.add_arguments(parser)
    argv = ["--cmd", "true", "--out", str(out)]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return parser.parse_args(argv)


def test_trace_defaults(tmp_path: Path) -> None:
    a = _args(tmp_path / "o")
    assert (a.vcpus, a.ram, a.timeout, a.roi, a.data_accesses) == (2, "512M", 600.0,
                                                                   "marker", False)
    assert a.plugin is None and a.no_plugin is False


def test_trace_refuses_non_empty_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "busy-dir"
    out.mkdir()
    (out / "something").write_text("x")
    rc = cmdmod.run(_args(out))
    assert rc == cmdmod.EXIT_USAGE
    err = capsys.readouterr().err
    assert str(out) in err and "not empty" in err
    assert (out / "something").read_text() == "x"  # left alone


def test_trace_refuses_out_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "a-file"
    out.write_text("x")
    assert cmdmod.run(_args(out)) == cmdmod.EXIT_USAGE
    assert str(out) in capsys.readouterr().err


def test_trace_missing_guest(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = cmdmod.run(_args(tmp_path / "o", guest_dir=tmp_path / "no-guest"))
    assert rc == cmdmod.EXIT_USAGE
    assert "make setup" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing created before the checks pass


def test_resolve_plugin_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qm, "default_plugin_path", lambda: tmp_path / "libpysched-trace.so")
    with pytest.raises(plan.TraceUsageError, match="plugin not built: run make -C qemu-plugin"):
        plan.resolve_plugin(None)
    with pytest.raises(plan.TraceUsageError, match="not found"):
        plan.resolve_plugin(tmp_path / "other.so")


def test_run_qemu_boot_watchdog(tmp_path: Path) -> None:
    # A stand-in for QEMU that never prints the banner.
    r = qm.run_qemu(["sh", "-c", "echo firmware; exec sleep 30"], tmp_path / "c.log",
                    tmp_path / "e.log", timeout=20, boot_marker=b"=== PYSCHED BEGIN ===",
                    boot_timeout=1)
    assert r.boot_hung and not r.timed_out
    assert r.wall_seconds < 10
    assert (tmp_path / "c.log").read_text() == "firmware\n"


def test_run_qemu_timeout_after_boot(tmp_path: Path) -> None:
    r = qm.run_qemu(["sh", "-c", "echo '=== PYSCHED BEGIN ==='; exec sleep 30"],
                    tmp_path / "c.log", tmp_path / "e.log", timeout=2,
                    boot_marker=b"=== PYSCHED BEGIN ===", boot_timeout=1.5)
    assert r.timed_out and not r.boot_hung


def test_run_qemu_exit_status_and_stderr(tmp_path: Path) -> None:
    r = qm.run_qemu(["sh", "-c", "echo out; echo bad option >&2; exit 1"], tmp_path / "c.log",
                    tmp_path / "e.log", timeout=20)
    assert (r.returncode, r.timed_out, r.boot_hung) == (1, False, False)
    assert r.stderr == "bad option\n"
    assert "status 1" in qm.qemu_failed_message(r) and "bad option" in qm.qemu_failed_message(r)


def test_running_map_moves_kernel_image_symbols_only(tmp_path: Path) -> None:
    import gzip as _gz
    src = tmp_path / "kallsyms.txt"
    src.write_text("000000000001fb80 A current_task\n"
                   "ffffffff81000000 T _stext\n"
                   "ffffffff81c00010 T entry_SYSCALL_64\n"
                   "ffffffffc0200000 t virtio_init\t[virtio]\n")
    d = tmp_path / "t"
    d.mkdir()
    (d / "plugin.json").write_text(json.dumps({"kaslr": {"found": True,
                                                         "virtual_slide": 0x2c600000}}))
    out = sysmap.write_running_map(src, d)
    lines = _gz.decompress(out.read_bytes()).decode().splitlines()
    assert lines == ["000000000001fb80 A current_task", "ffffffffad600000 T _stext",
                     "ffffffffae200010 T entry_SYSCALL_64"]
    (d / "plugin.json").write_text(json.dumps({"kaslr": {"found": False, "reason": "x"}}))
    with pytest.raises(ValueError, match=r"plugin.json: the plugin did not find.*\(x\)"):
        sysmap.write_running_map(src, d)
    # a plugin.json without the record (plugins before it: nokaslr boots) reads as slide 0,
    # as it does for every reader of the slide
    (d / "plugin.json").write_text(json.dumps({"vcpus": 1}))
    out = sysmap.write_running_map(src, d)
    assert _gz.decompress(out.read_bytes()).decode().splitlines()[1] == \
        "ffffffff81000000 T _stext"
    from pysched.trace.symbol_files import traced_slide
    assert [traced_slide(i) for i in (None, {}, {"kaslr": {"found": False}},
                                      {"kaslr": {"found": True, "virtual_slide": 4096}})] == \
        [0, 0, None, 4096]
