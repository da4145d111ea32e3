"""The harness on the busybox test guest, end to end: entropy is there before the region, the
harness's /proc snapshots stay out of it, and a killed ``pysched trace`` leaves no QEMU."""
from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pysched.capture import console as con
from pysched.capture import runfiles as rf
from pysched.capture.guest import GuestNotBuiltError, locate_guest
from pysched.capture.qemu import CPU_MODEL, default_plugin_path
from pysched.trace import open_trace

LOCAL_TIMER_VECTOR = 0xEC  # LOC in /proc/interrupts

pytestmark = pytest.mark.skipif(
    not default_plugin_path().is_file(), reason="plugin not built (make plugin)"
)

# getrandom(buf, 16, GRND_NONBLOCK); exit 0 when it returned 16 bytes, 1 on -EAGAIN (the
# kernel's generator not ready yet), 2 otherwise. Without libc: a few hundred bytes, which the
# command carries as base64.
GETRANDOM_C = r"""
static long sys3(long n, long a, long b, long c)
{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return r;
}
void _start(void)
{
    char buf[16];
    long r = sys3(318, (long)buf, sizeof buf, 1);
    sys3(60, r == 16 ? 0 : r == -11 ? 1 : 2, 0, 0);
}
"""


def pysched(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pysched.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def _guest() -> None:
    try:
        locate_guest()
    except GuestNotBuiltError as e:
        pytest.skip(str(e))


def _getrandom_binary(tmp: Path) -> bytes:
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    (tmp / "g.c").write_text(GETRANDOM_C)
    subprocess.run(["gcc", "-static", "-nostdlib", "-Os", "-fno-stack-protector",
                    "-fno-asynchronous-unwind-tables", "-Wl,-n", "-Wl,--build-id=none", "-s",
                    "-o", str(tmp / "g"), str(tmp / "g.c")], check=True)
    return (tmp / "g").read_bytes()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    _guest()
    tmp = tmp_path_factory.mktemp("busybox")
    blob = base64.b64encode(_getrandom_binary(tmp)).decode()
    cmd = (f"echo {blob} | base64 -d > /tmp/getrandom; chmod +x /tmp/getrandom\n"
           "/tmp/getrandom; echo \"GETRANDOM $?\"\n"
           "spin 5 & spin 5 & wait\n")
    out = tmp / "t"
    r = pysched("trace", "--guest", "busybox", "--cmd", cmd, "--out", str(out), "--vcpus", "2")
    assert r.returncode == 0, r.stderr
    return out


def test_entropy_is_ready_before_the_region(run: Path) -> None:
    # The command runs first thing in the region: a non-blocking getrandom succeeds there, so
    # the generator was initialised before (from RDRAND, see pysched/capture/qemu.py).
    console = (run / "console.log").read_text()
    assert "GETRANDOM 0" in console, con.guest_messages(con.console_text(console.encode()))
    argv = json.loads((run / "manifest.json").read_text())["qemu_argv"]
    assert argv[argv.index("-cpu") + 1] == CPU_MODEL


def test_proc_snapshots_are_outside_the_region(run: Path) -> None:
    text = con.console_text((run / "console.log").read_bytes())
    # Printed after the command's output, i.e. after the region closed.
    assert text.index("SPIN done") < text.index("=== /proc/interrupts before ===")
    m = json.loads((run / "manifest.json").read_text())
    before, after = (m["interrupts"][w]["counts"] for w in ("before", "after"))
    # The snapshots bracket the region: it holds at most the timer interrupts counted between.
    trace = open_trace(run)
    it = trace.df("interrupts")
    loc = it[(it.kind == 0) & (it.vector == LOCAL_TIMER_VECTOR)]
    for v in trace.vcpus:
        n = int((loc.vcpu == v).sum())
        assert 0 < n <= after["LOC"][v] - before["LOC"][v], (v, n, before["LOC"], after["LOC"])
    # The serial console interrupted only for the command's few lines (about 40 bytes). With the
    # snapshots printed inside the region (about 4 kB), this was 55-570.
    serial = next(k for k, line in _irq_names(m).items() if "ttyS0" in line)
    assert sum(after[serial]) - sum(before[serial]) <= 10, (before[serial], after[serial])


def test_finished_trace_is_marked_complete(run: Path) -> None:
    m = json.loads((run / "manifest.json").read_text())
    assert m["complete"] is True and m["incomplete_reason"] is None
    assert m["outcome"] == {"status": "ok", "failure": None, "criterion": None,
                            "criterion_met": None}
    assert str(run) not in json.dumps(m) and "/work/" not in json.dumps(m)
    assert not (run / "mem").exists()  # no data accesses asked for: no empty table folder
    assert not (run / rf.OUT_LOCK).exists()


def _irq_names(manifest: dict) -> dict[str, str]:
    """``{irq name: its /proc/interrupts line}`` of the "after" snapshot."""
    lines = manifest["interrupts"]["after"]["raw"].splitlines()[1:]
    return {ln.partition(":")[0].strip(): ln for ln in lines if ":" in ln}


def _wait_for(cond, seconds: float, what: str) -> None:
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.2)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_stopped_trace_leaves_no_qemu(tmp_path: Path, sig: int) -> None:
    _guest()
    tmpdirs = tmp_path / "tmp"
    tmpdirs.mkdir()
    out = tmp_path / "t"
    # A command that would run for many minutes, in the region.
    p = subprocess.Popen([sys.executable, "-m", "pysched.cli", "trace", "--guest", "busybox",
                          "--cmd", "echo SPINNING; spin 1000000", "--out", str(out), "--vcpus", "2"],
                         env={**os.environ, "TMPDIR": str(tmpdirs)}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (out / "console.log").is_file()
                  and b"SPINNING" in (out / "console.log").read_bytes(), 120, "the command")
        (run_dir,) = tmpdirs.glob(rf.TMP_PREFIX + "*")
        owners = (run_dir / rf.OWNER_FILE).read_text().split()
        assert len(owners) == 2  # pysched and QEMU
        p.send_signal(sig)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # QEMU goes too (SIGKILL: the kernel's parent-death signal; SIGTERM: pysched stops it).
    _wait_for(lambda: not any(rf._alive(o) for o in owners), 60, "QEMU to exit")
    assert not (out / "manifest.json").exists()  # an incomplete trace
    info = json.loads((out / "plugin.json").read_text())
    assert info["final"] and info["recording"]  # tables closed; the region was open
    # ... that check names as such and analyse refuses unless asked for its complete prefix.
    report = subprocess.run([sys.executable, "-m", "pysched.cli", "check", str(out)],
                            capture_output=True, text=True)
    assert report.returncode == 1 and "incomplete trace: no manifest.json" in report.stdout
    res = tmp_path / "res"
    refused = subprocess.run([sys.executable, "-m", "pysched.cli", "analyse", str(out),
                              "--out", str(res)], capture_output=True, text=True)
    assert refused.returncode == 1 and "--allow-incomplete" in refused.stderr
    assert not res.exists()
    if sig == signal.SIGTERM:
        assert p.returncode == 128 + signal.SIGTERM
        assert "incomplete trace" in p.stderr.read()
        assert not run_dir.exists() and not (out / rf.OUT_LOCK).exists()
    else:
        assert rf.remove_stale_tmpdirs(tmpdirs) == [run_dir]
