"""``pysched trace`` under faults and bad input, without a guest: numeric arguments, the output
directory, temporary directories, signals, manifests, workload success criteria."""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pysched.capture import command as cmdmod
from pysched.capture import plan
from pysched.capture import manifest as mf
from pysched.capture import peers as prs
from pysched.capture import runfiles as rf
from pysched.capture import workloads as wl


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cmdmod.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("argv, message", [
    (("--cmd", "true", "--timeout", "nan"), "--timeout must be a finite number"),
    (("--cmd", "true", "--timeout", "inf"), "--timeout must be a finite number"),
    (("--cmd", "true", "--timeout", "-1"), "--timeout must be positive"),
    (("--cmd", "true", "--boot-timeout", "nan"), "--boot-timeout must be a finite number"),
    (("--cmd", "true", "--vcpus", "999"), "--vcpus must be 1-255"),
    (("--cmd", "true", "--vcpus", "0"), "--vcpus must be 1-255"),
    (("--cmd", "true", "--boot-retries", "1000"), "--boot-retries must be 0-20"),
    (("find", "--warmup", "nan"), "--warmup must be a finite number"),
    (("find", "--warmup", "-1"), "--warmup must be at least 0"),
    (("find", "--roi-seconds", "inf"), "--roi-seconds must be a finite number"),
    (("find", "--warmup", "500", "--roi-seconds", "200"), "do not fit in --timeout 600"),
    (("find", "--warmup", "400", "--roi-insns", "5M"), "leaves no time for the region"),
    (("--cmd", "true", "--kernel-args", "rdinit=/bin/sh"), "--kernel-args: 'rdinit=/bin/sh'"),
    (("--cmd", "true", "--kernel-args", "a\tb"), "--kernel-args: only printable ASCII"),
    (("--cmd", "true", "--kernel-args", "x" * 3000), "--kernel-args: the kernel command line"),
    (("--cmd", "true", "--insn-rate", "nan"), "--insn-rate 'nan': not a positive finite number"),
    (("--cmd", "true", "--insn-rate", "inf"), "--insn-rate 'inf': not a positive finite number"),
    (("--cmd", "true", "--insn-rate", "0"), "--insn-rate '0': not a positive finite number"),
    (("--cmd", "true", "--insn-rate=-5M"), "--insn-rate '-5M': not a positive finite number"),
    (("--cmd", "true", "--insn-rate", "1e999"), "not a positive finite number"),
    (("--cmd", "true", "--insn-rate", "fast"), "--insn-rate 'fast': not a positive finite"),
    (("--cmd", "true", "--insn-rate", "2G"),
     "--insn-rate 2G: above the fastest QEMU's -icount gives with --vcpus 2: 500M, 250M, 125M"),
    (("--cmd", "true", "--insn-rate", "300M"), "--insn-rate 300M: not one of the rates"),
    (("--cmd", "true", "--insn-rate", "1K", "--vcpus", "1"), "not one of the rates"),
    (("--cmd", "true", "--clock", "host", "--insn-rate", "500M"),
     "--insn-rate sets the guest clock of --clock insns"),
])
def test_bad_numbers_exit_2_naming_the_argument(tmp_path: Path, capsys, argv, message) -> None:
    out = tmp_path / "o"
    rc = cmdmod.run(_args(*argv, "--out", str(out)))
    assert rc == cmdmod.EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()  # nothing was created, nothing booted


def test_huge_count_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="at most"):
        plan.parse_count("99999999999G")


def test_cli_bad_arguments_give_one_line_and_exit_2(tmp_path: Path) -> None:
    for argv in (["--roi-insns", "99999999999G"], ["--timeout", "nan"], ["--vcpus", "x"]):
        r = subprocess.run([sys.executable, "-m", "pysched.cli", "trace", "--cmd", "true",
                            "--out", str(tmp_path / "o"), *argv], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2, (argv, r.stderr)
        assert "Traceback" not in r.stderr and r.stderr.strip(), r.stderr


def test_out_under_a_file_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "f").write_text("x")
    rc = cmdmod.run(_args("--cmd", "true", "--out", str(tmp_path / "f" / "t")))
    assert rc == cmdmod.EXIT_USAGE
    err = capsys.readouterr().err
    assert "cannot create the output directory" in err and err.count("\n") == 1


def test_claim_out_dir_is_exclusive(tmp_path: Path) -> None:
    out = tmp_path / "new" / "t"
    lock = rf.claim_out_dir(out)
    assert lock.read_text().startswith(f"{os.getpid()}:")
    with pytest.raises(rf.OutDirError, match="being written by another pysched trace"):
        rf.claim_out_dir(out)
    rf.release_out_dir(lock)
    (out / "exec").mkdir()
    with pytest.raises(rf.OutDirError, match="not empty"):
        rf.claim_out_dir(out)
    assert not lock.exists()


def test_claim_unwritable_out_dir() -> None:
    with pytest.raises(rf.OutDirError, match="cannot create the output directory /proc/"):
        rf.claim_out_dir(Path("/proc/pysched-no/t"))


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_stale_tmpdirs_are_removed(tmp_path: Path) -> None:
    stale = rf.RunTmpDir(tmp_path)
    (stale.path / rf.OWNER_FILE).write_text(f"{_dead_pid()}:1\n")
    (stale.path / "run.img").write_bytes(b"x")
    live = rf.RunTmpDir(tmp_path)  # owned by this process
    reused = rf.RunTmpDir(tmp_path)  # our pid, but another start time: a reused pid
    (reused.path / rf.OWNER_FILE).write_text(f"{os.getpid()}:1\n")
    other = tmp_path / f"{rf.TMP_PREFIX}old"  # no owner file: not ours to judge
    other.mkdir()
    assert sorted(rf.remove_stale_tmpdirs(tmp_path)) == sorted([stale.path, reused.path])
    assert live.path.is_dir() and other.is_dir()
    # A directory is kept while any of its processes lives (QEMU after pysched was killed).
    live.add_process(_dead_pid())
    assert rf.remove_stale_tmpdirs(tmp_path) == []
    live.remove()
    assert not live.path.exists()


def test_sigterm_raises_run_interrupted() -> None:
    with pytest.raises(rf.RunInterrupted) as e:
        with rf.signals_raise():
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 1)  # let Python run the handler
    assert e.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_write_manifest_is_atomic(tmp_path: Path) -> None:
    mf.write_manifest(tmp_path, {"a": 1})
    assert json.loads((tmp_path / mf.MANIFEST).read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == [mf.MANIFEST]


def test_incomplete_reason() -> None:
    done = {"final": True, "recording": False, "windows": 1}
    assert mf.incomplete_reason(done, "marker", None) is None
    assert "no plugin.json" in mf.incomplete_reason(None, "marker", None)
    assert "not final" in mf.incomplete_reason({**done, "final": False}, "marker", None)
    assert "still open" in mf.incomplete_reason({**done, "recording": True}, "marker", None)
    assert "no region" in mf.incomplete_reason({**done, "windows": 0}, "marker", None)


def test_upgrade_manifest_drops_absolute_paths(tmp_path: Path) -> None:
    trace = tmp_path / "t"
    trace.mkdir()
    (trace / "System.map.gz").write_bytes(gzip.compress(b"ffffffff81000000 T _stext\n"))
    (trace / "plugin.json").write_text(json.dumps({"final": True, "recording": False,
                                                   "windows": 1}))
    old = {
        "manifest_version": 2, "kernel": "/home/u/p/build/guest/vmlinuz",
        "system_map": "/home/u/p/build/guest/System.map",
        "plugin": "/home/u/p/qemu-plugin/build/libpysched-trace.so",
        "plugin_options": "out=/home/u/p/data/find,sysmap=/home/u/p/build/guest/System.map,"
                          "ram=512M",
        "qemu_argv": ["qemu-system-x86_64", "-initrd", "/tmp/pysched-trace-x1/run.img",
                      "-plugin", "/home/u/p/qemu-plugin/build/libpysched-trace.so,"
                      "out=/home/u/p/data/find,sysmap=/home/u/p/build/guest/System.map"],
        "image": {"disk": "/home/u/p/build/guest/debian/root.img", "recipe_sha": "abc"},
        "kernel_symbols": {"system_map": "System.map.gz", "modules": None},
        "roi": "marker", "guest_exit_status": 0, "qemu_exit_status": 0, "timed_out": False,
    }
    (trace / "manifest.json").write_text(json.dumps(old))
    assert mf.upgrade_manifest(trace) is True
    m = json.loads((trace / "manifest.json").read_text())
    assert "/home/" not in json.dumps(m) and "/tmp/" not in json.dumps(m)
    assert m["manifest_version"] == mf.MANIFEST_VERSION
    assert m["plugin_options"] == "out=.,sysmap=System.map,ram=512M"
    assert m["qemu_argv"][-1] == "libpysched-trace.so,out=.,sysmap=System.map"
    assert m["image"]["disk"] == "root.img"
    assert m["inputs"]["system_map"]["sha256"] == \
        hashlib.sha256(b"ffffffff81000000 T _stext\n").hexdigest()
    assert m["inputs"]["kernel"] == {"name": "vmlinuz", "sha256": None}
    assert m["complete"] is True and m["outcome"]["status"] == "ok"
    assert mf.upgrade_manifest(trace) is False  # already the new layout


def test_portable_plugin_info(tmp_path: Path) -> None:
    info = {"final": True, "options": {"out": str(tmp_path), "sysmap": "/h/u/System.map",
                                       "roi": "marker", "rows": 4}}
    (tmp_path / "plugin.json").write_text(json.dumps(info))
    assert mf.portable_plugin_info(tmp_path) is True
    opts = json.loads((tmp_path / "plugin.json").read_text())["options"]
    assert opts == {"out": ".", "sysmap": "System.map", "roi": "marker", "rows": 4}
    assert mf.portable_plugin_info(tmp_path) is False


AB_REPORT = """Concurrency Level:      16
Complete requests:      1200
Failed requests:        {failed}
{non2xx}Total transferred:      1234 bytes
"""


@pytest.mark.parametrize("failed, non2xx, verdict", [
    (0, "", None),
    (3, "", None),  # in flight when ab was stopped
    (140, "", None),  # transport errors of the emulated network, under a quarter
    (400, "", "400 of 1200 requests failed"),
    (0, "Non-2xx responses:      1200\n", "1200 of 1200 requests got an answer other than 2xx"),
])
def test_ab_success_criterion(failed: int, non2xx: str, verdict: str | None) -> None:
    summary = {"kind": "ab", "started": True}
    log = AB_REPORT.format(failed=failed, non2xx=non2xx)
    got = prs.peer_failure(summary, log, {"concurrency": "16"})
    assert got == verdict if verdict is None else verdict in got


def test_peer_criteria() -> None:
    assert "no report" in prs.peer_failure({"kind": "ab", "started": True},
                                           "apr_socket_recv: Connection refused (111)\n", {})
    scp = {"kind": "scp-in", "started": True, "exit_status": 1, "stopped_by_pysched": False}
    assert "status 1: lost connection" in prs.peer_failure(scp, "lost connection\n", {})
    assert prs.peer_failure({**scp, "stopped_by_pysched": True, "exit_status": -15}, "", {}) \
        is None
    net = {"kind": "netclient", "started": True, "requests": 5, "errors": []}
    assert prs.peer_failure(net, "", {}) is None
    # a summary without errors_mid_run (older client): every error counts
    assert "errors" in prs.peer_failure({**net, "errors": ["OSError: reset"]}, "", {})
    # errors after every thread's last answer: the guest stopped its server at the region's end
    closed = ["ConnectionError: the server closed the connection"] * 8
    assert prs.peer_failure({**net, "errors": closed, "errors_mid_run": 0}, "", {}) is None
    # an answer after an error: the connection failed during the run
    assert "during the run" in prs.peer_failure(
        {**net, "errors": closed[:1], "errors_mid_run": 1}, "", {})
    assert "never started" in prs.peer_failure({"kind": "ab", "started": False}, "", {})


def test_every_workload_states_its_criterion() -> None:
    for w in wl.WORKLOADS.values():
        assert w.criterion and w.criterion != wl.Workload.criterion, w.name
        assert f"success: {w.criterion[:30]}" in " ".join(wl.describe(200).split())


def test_clock_option_qemu_refuses_is_one_line_before_boot(tmp_path: Path, capsys,
                                                           monkeypatch) -> None:
    """A QEMU that refuses the clock's options (here one that knows no -icount) is reported with
    its words, naming --clock, before anything boots."""
    from pysched.capture import clock as gclock
    from pysched.capture import qemu as qm

    fake = tmp_path / "qemu-system-x86_64"
    fake.write_text("#!/bin/sh\necho 'qemu-system-x86_64: -icount: invalid option' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(ValueError, match=r"--clock insns: QEMU refuses -icount shift=0,sleep=on"
                                         r" \(-accel tcg,thread=single -icount shift=0,sleep=on\):"
                                         r" qemu-system-x86_64: -icount: invalid option"):
        gclock.check_qemu_accepts(str(fake), gclock.guest_clock("insns", None, 2))
    gclock.check_qemu_accepts(str(fake), gclock.guest_clock("host", None, 2))  # not asked
    try:
        from pysched.capture import guest as gst
        gst.locate("busybox")
    except gst.GuestNotBuiltError:
        return
    monkeypatch.setattr(qm, "find_qemu", lambda qemu=qm.QEMU: str(fake))
    out = tmp_path / "o"
    rc = cmdmod.run(_args("--cmd", "true", "--guest", "busybox", "--out", str(out)))
    assert rc == cmdmod.EXIT_USAGE
    err = capsys.readouterr().err
    assert "QEMU refuses -icount shift=0,sleep=on" in err and err.count("\n") == 1, err
    assert not out.exists()
