"""Workloads traced end to end on the Debian guest: ``find`` in every run of the test suite (about
half a minute), the others with ``make test-all`` (slow)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pysched.capture.guest import GuestNotBuiltError, locate_debian_guest
from pysched.capture.manifest import missing_keys
from pysched.capture.qemu import default_plugin_path
from pysched.capture.workloads import WORKLOADS
from pysched.trace import open_trace

pytestmark = pytest.mark.skipif(
    not default_plugin_path().is_file(), reason="plugin not built (make plugin)"
)


def pysched(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pysched.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def trace_workload(out: Path, name: str, *extra: str) -> dict:
    try:
        locate_debian_guest()
    except GuestNotBuiltError as e:
        pytest.skip(str(e))
    r = pysched("trace", name, "--out", str(out), *extra)
    assert r.returncode == 0, r.stderr
    check = pysched("check", str(out))
    assert check.returncode == 0, check.stdout
    m = json.loads((out / "manifest.json").read_text())
    assert missing_keys(m) == []
    assert m["workload"] == name and m["guest"] == "debian"
    assert m["parameters"] == dict(WORKLOADS[name].params)
    assert m["guest_exit_status"] == 0
    return m


def irq_delta(m: dict, pattern: str) -> int:
    """Interrupts the guest counted over the region on lines whose name contains pattern."""
    before, after = m["interrupts"]["before"]["raw"], m["interrupts"]["after"]["raw"]

    def total(raw: str) -> int:
        n = 0
        for line in raw.splitlines()[1:]:
            if pattern in line:
                n += sum(int(t) for t in line.split(":", 1)[1].split()[:m["vcpus"]])
        return n

    return total(after) - total(before)


def test_find_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "find"
    m = trace_workload(out, "find", "--roi-insns", "20M")
    assert "every vCPU" in m["host_stop"]["reason"]
    assert all(n >= 20_000_000 for n in m["insns_per_vcpu"].values())
    # Directories come from the virtio disk (virtio-blk's queues are named req.N).
    assert irq_delta(m, "-req.") > 0
    # find's getdents64 (217) calls are in the trace. How far find gets in its region depends on
    # when the host completes the guest's disk reads, so the count is bounded by find's own
    # pattern rather than a constant: every directory it opens (openat, 257, with O_DIRECTORY)
    # is read with getdents64 until it returns 0, except the one each find loop (one per vCPU)
    # may still have open when the region ends.
    sc = open_trace(out).df("syscalls")
    entries = sc[sc.kind == 0]
    getdents = int((entries.nr == 217).sum())
    opened_dirs = int(((entries.nr == 257) & (entries.arg2 & 0o200000 != 0)).sum())
    assert getdents > 0
    assert getdents >= opened_dirs - m["vcpus"], (getdents, opened_dirs)


# What each slow workload must show beyond a clean trace: a /proc/interrupts line pattern
# that must have counted over the region, and a console line.
EVIDENCE = {
    "iscp": ("-input.", "bytes received"),
    "oscp": ("-output.", "oscp: done"),
    "apache": ("-input.", "requests served"),
    "dss": (None, "dss: 4 streams ran"),
    "oltp": (None, "Threads started"),
    "filesrv": ("-req.", "fsbench fileserver: 50 threads"),
    "mailsrv": ("-req.", "fsbench varmail: 32 threads"),
    "barrier": (None, None),
    "netserver": ("-input.", None),
    "chase-large": (None, None),
    "chase-small": (None, None),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EVIDENCE))
def test_workload_end_to_end(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    m = trace_workload(out, name, "--roi-seconds", "2")
    irq, line = EVIDENCE[name]
    if irq is not None:
        assert irq_delta(m, irq) > 0, irq
    if line is not None:
        assert line in (out / "console.log").read_text()
    if WORKLOADS[name].peer is not None:
        assert m["peer"]["started"] and m["peer"]["started_after_seconds"] is not None
    assert all(n > 0 for n in m["insns_per_vcpu"].values())


def test_every_workload_has_a_slow_test() -> None:
    assert set(EVIDENCE) | {"find"} == set(WORKLOADS)


def _debian_guest_or_skip() -> None:
    try:
        locate_debian_guest()
    except GuestNotBuiltError as e:
        pytest.skip(str(e))


@pytest.mark.slow
def test_failing_workload_fails_the_run(tmp_path: Path) -> None:
    _debian_guest_or_skip()
    r = pysched("trace", "filesrv", "--out", str(tmp_path / "f"), "--param", "threads=0")
    assert r.returncode == 1
    assert "fsbench: bad value '0' for -t" in r.stderr
    assert "ended before the region did" in r.stderr
    assert "the workload exited with status 1" in r.stderr


@pytest.mark.slow
def test_unmet_success_criterion_fails_the_run(tmp_path: Path) -> None:
    _debian_guest_or_skip()
    out = tmp_path / "a"
    r = pysched("trace", "apache", "--out", str(out), "--param", "path=/nonexistent",
                "--roi-seconds", "3")
    assert r.returncode == 1
    assert "requests got an answer other than 2xx" in r.stderr
    outcome = json.loads((out / "manifest.json").read_text())["outcome"]
    assert outcome["status"] == "failed" and outcome["criterion_met"] is False
    assert "other than 2xx" in outcome["failure"]
