"""The workload suite without QEMU: the registry, the per-run archive, the host-side pieces
(peers, monitor, the plugin's ROI bound seen from the host, exec re-encoding) and the guest
programs, which are static Linux binaries and run on the host as well."""
from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import tracefactory as tf
from pysched.capture import command as cmdmod
from pysched.capture import plan
from pysched.capture import guest as gst
from pysched.capture import manifest as mf
from pysched.capture import peers as prs
from pysched.capture import qemu as qm
from pysched.capture import workloads as wl
from pysched.capture.compact import compact_trace
from pysched.capture.monitor import PEER_START_MARK, RunMonitor
from pysched.capture.roiwatch import RoiBoundWatch, bound_shortfall
from pysched.trace import block_sizes, check_trace, open_trace

REPO = Path(__file__).resolve().parents[1]
GUEST_SRC = REPO / "guest"
needs_cpio = pytest.mark.skipif(shutil.which("cpio") is None, reason="GNU cpio not installed")
needs_cc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler")


# --- the registry ------------------------------------------------------------------------------


def _with_lib_functions(text: str) -> str:
    """A workload script's text followed by the bodies of the lib.sh functions it calls, and
    of those they call, so that checks see what the script runs."""
    lib = (GUEST_SRC / "workloads" / "lib.sh").read_text()
    bodies = dict(re.findall(r"^([a-z_]+)\(\) \{\n(.*?)^\}", lib, re.M | re.S))
    assert {"roi_start", "roi_over_work", "fsbench_workload"} <= set(bodies)
    seen: set[str] = set()
    todo = [text]
    while todo:
        part = todo.pop()
        for name in set(re.findall(r"\b[a-z_]+\b", part)) & set(bodies) - seen:
            seen.add(name)
            todo.append(bodies[name])
    return text + "".join(bodies[name] for name in sorted(seen))


def test_every_workload_has_its_script_and_documents_its_parameters() -> None:
    assert {"find", "iscp", "oscp", "apache", "dss", "oltp", "filesrv", "mailsrv", "barrier",
            "netserver", "chase-large", "chase-small"} <= set(wl.WORKLOADS)
    for w in wl.WORKLOADS.values():
        script = GUEST_SRC / "workloads" / w.script_name
        assert script.is_file(), script
        assert ". /run/pysched/lib.sh" in script.read_text()
        text = _with_lib_functions(script.read_text())
        # The script (itself or through the shared functions) brackets its steady state.
        assert "roi_region" in text
        used = set(re.findall(r"\$\{?P_([A-Z0-9_]+)", text))
        declared = {k.upper() for k in w.params}
        # Host-side parameters (ab's, the client's) need not appear in the script, but every
        # P_ variable the script reads must be a parameter of the workload.
        assert used <= declared, (w.name, used - declared)
        assert w.peer is None or w.peer in prs.PEERS
        assert w.runs and w.summary and w.analogue and w.roi_seconds > 0
        if w.peer is not None:
            assert "peer_start" in text and w.guest_ports


def _run_lib(tmp_path: Path, shell: list[str], body: str) -> subprocess.CompletedProcess:
    """Run ``body`` after sourcing the workloads' lib.sh in ``shell`` on the host, with stubs
    for the guest's ``roi``, ``roi-wait`` (returns at once) and ``renice`` that log their
    arguments to ``tmp_path / "calls"``."""
    if shutil.which(shell[0]) is None:
        pytest.skip(f"{shell[0]} not installed")
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    for name in ("roi", "roi-wait", "renice"):
        (stubs / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {tmp_path / "calls"}\n')
        (stubs / name).chmod(0o755)
    script = (f". {GUEST_SRC / 'workloads' / 'lib.sh'}\n"
              f"PYSCHED_ROI_FLAG={tmp_path / 'roi-open'} PYSCHED_WARMUP=0\n"
              f"PYSCHED_PROC_DIR={tmp_path / 'proc'}\n"
              f"WORK_LOG={tmp_path / 'work.log'}\n" + body)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "PYSCHED_ROI_SECONDS": "3"}
    return subprocess.run(shell + ["-c", script], capture_output=True, text=True, env=env,
                          timeout=60)


SHELLS = [pytest.param(["dash"], id="dash"), pytest.param(["busybox", "sh"], id="busybox")]


@pytest.mark.parametrize("shell", SHELLS)
def test_lib_region_over_background_copies(tmp_path: Path, shell: list[str]) -> None:
    r = _run_lib(tmp_path, shell, (
        'copy() { echo "copy $1 started"; exec sleep 30; }\n'
        "start_copies 3 copy\n"
        'echo "pids:$pids"\n'
        "roi_over_work $pids\n"
        'for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p still runs"; done\n'
        "echo finished\n"))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout.splitlines()
    pids = out[0].split(":")[1].split()
    assert len(pids) == 3
    # The region: raised priority, then roi-wait opens the region, waits on every copy and
    # closes it; then the copies are stopped. The /proc snapshots are read outside it and
    # printed after it.
    calls = (tmp_path / "calls").read_text().splitlines()
    if shell[0] == "dash":  # busybox sh runs its own renice applet, not the stub
        assert calls.pop(0).startswith("renice -n -15 -p ")
    assert calls == [f"roi-wait -t 3 -r {' '.join(pids)}"]
    heads = [ln for ln in out if ln.startswith("=== ")]
    # the devices once, before the region; interrupts and stat on both sides of it
    assert heads == [f"=== {f} before ===" for f in ("/proc/iomem", "/proc/ioports",
                                                     "/sys/bus/pci")] + \
        [f"=== {f} {w} ===" for w in ("before", "after")
         for f in ("/proc/interrupts", "/proc/stat")]
    for w in ("before", "after"):
        assert (tmp_path / "proc" / f"interrupts.{w}").read_text().split()[0] == "CPU0"
        assert "ctxt" in (tmp_path / "proc" / f"stat.{w}").read_text()
    assert out[-1] == "finished"
    assert not any("still runs" in ln for ln in out)
    assert not (tmp_path / "roi-open").exists()
    log = (tmp_path / "work.log").read_text().splitlines()
    assert sorted(log) == [f"copy {i} started" for i in range(3)]


@pytest.mark.parametrize("shell", SHELLS)
def test_lib_work_that_ends_early_fails_the_workload(tmp_path: Path, shell: list[str]) -> None:
    r = _run_lib(tmp_path, shell, "short() { echo 'short work gave up'; exit 3; }\n"
                 "start_copies 1 short; sleep 0.5; roi_over_work $pids; echo not-reached\n")
    assert r.returncode == 1
    assert (tmp_path / "calls").read_text().splitlines()[-1].startswith("roi-wait -t 3 -r ")
    assert "not-reached" not in r.stdout
    assert "short work gave up" in r.stdout
    assert "ended before the region did" in r.stdout


def test_describe_lists_every_workload() -> None:
    text = wl.describe()
    for name in wl.WORKLOADS:
        assert re.search(rf"^{re.escape(name)}\s", text, re.M), name


def test_unknown_workload_lists_the_known_ones() -> None:
    with pytest.raises(wl.UnknownWorkloadError) as e:
        wl.get("nosuch")
    assert "nosuch" in str(e.value)
    for name in wl.WORKLOADS:
        assert name in str(e.value)


def test_parse_params() -> None:
    w = wl.get("filesrv")
    p = wl.parse_params(w, ["threads=8", "size=4096"])
    assert p == {"threads": "8", "files": "2000", "size": "4096"}
    assert wl.parse_params(w, None) == dict(w.params)
    with pytest.raises(ValueError, match="no parameter 'colour'.*threads, files, size"):
        wl.parse_params(w, ["colour=red"])
    with pytest.raises(ValueError, match="name=value"):
        wl.parse_params(w, ["threads"])
    with pytest.raises(ValueError, match="printable"):
        wl.parse_params(w, ["threads=1\n2"])
    assert wl.param_env({"table_size": "10"}) == {"P_TABLE_SIZE": "10"}


# --- the command line ----------------------------------------------------------------------------


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cmdmod.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_trace_unknown_workload_lists_known(tmp_path: Path, capsys) -> None:
    rc = cmdmod.run(_args("nosuch", "--out", str(tmp_path / "o")))
    assert rc == cmdmod.EXIT_USAGE
    err = capsys.readouterr().err
    assert "unknown workload 'nosuch'" in err and "find" in err and "apache" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, message", [
    ((), "name a workload or give --cmd"),
    (("find", "--cmd", "true"), "either a workload or --cmd"),
    (("find", "--guest", "busybox"), "Debian guest"),
    (("--cmd", "true", "--param", "a=b"), "--cmd runs take none"),
    (("--cmd", "true", "--roi-seconds", "3"), "bound it with --roi-insns"),
    (("find", "--roi-seconds", "0"), "must be positive"),
    (("find", "--param", "nosuch=1"), "has no parameter 'nosuch'"),
    (("find", "--roi-insns", "5M", "--roi", "all"), "--roi marker"),
    (("find", "--compact", "30"), "1-22"),
])
def test_trace_usage_errors(tmp_path: Path, capsys, argv, message) -> None:
    rc = cmdmod.run(_args(*argv, "--out", str(tmp_path / "o")))
    assert rc == cmdmod.EXIT_USAGE
    assert message in capsys.readouterr().err


def test_trace_list(capsys) -> None:
    assert cmdmod.run(_args("--list")) == 0
    assert "filesrv" in capsys.readouterr().out


def test_parse_count() -> None:
    assert plan.parse_count("125M") == 125_000_000
    assert plan.parse_count("1.5G") == 1_500_000_000
    assert plan.parse_count("6000000") == 6_000_000
    for bad in ("", "0", "-5", "12X"):
        with pytest.raises(argparse.ArgumentTypeError):
            plan.parse_count(bad)


def test_missing_debian_image_says_how_to_build(tmp_path: Path, capsys) -> None:
    for name in ["vmlinuz", "System.map", "kernel-version"]:
        (tmp_path / name).write_text("6.1.0-56-amd64\n")
    rc = cmdmod.run(_args("find", "--out", str(tmp_path / "o"), "--guest-dir", str(tmp_path)))
    assert rc == cmdmod.EXIT_USAGE
    err = capsys.readouterr().err
    assert "Debian guest is not built" in err and "root.img" in err and "make guest" in err


def test_full_disk_is_reported_before_the_run(tmp_path: Path, monkeypatch) -> None:
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(plan.shutil, "disk_usage",
                        lambda p: usage._replace(free=10 << 20))
    with pytest.raises(plan.TraceUsageError, match="not enough free disk space.*10 MB free"):
        plan.check_free_space(tmp_path / "out", 256, "the trace")


# --- the Debian guest's per-run archive and QEMU devices -------------------------------------


def test_run_env_quotes_values() -> None:
    text = gst.run_env_text({"P_PATH": "/a b'c", "PYSCHED_MODE": "workload"})
    assert "export P_PATH='/a b'\"'\"'c'" in text
    out = subprocess.run(["sh", "-c", text + 'printf %s "$P_PATH"'], capture_output=True,
                         text=True, check=True).stdout
    assert out == "/a b'c"
    with pytest.raises(ValueError, match="variable name"):
        gst.run_env_text({"lower": "x"})


@needs_cpio
def test_debian_run_archive(tmp_path: Path) -> None:
    env = {"PYSCHED_MODE": "cmd", "PYSCHED_CONTROL": "/dev/ttyS2"}
    raw = gzip.decompress(gst.debian_run_archive(env, "echo hi"))
    (tmp_path / "a.cpio").write_bytes(raw)
    subprocess.run(["cpio", "-idm", "--quiet", "-F", str(tmp_path / "a.cpio")], cwd=tmp_path,
                   check=True)
    root = tmp_path / "pysched"
    assert (root / "init").read_bytes() == (GUEST_SRC / "debian" / "init.sh").read_bytes()
    assert (root / "init").stat().st_mode & 0o111
    assert (root / "lib.sh").is_file()
    assert "export PYSCHED_MODE=cmd" in (root / "run.env").read_text()
    assert (root / "cmd.sh").read_text().endswith("echo hi\n")
    scripts = {p.name for p in (root / "workloads").iterdir()}
    assert {w.script_name for w in wl.WORKLOADS.values()} <= scripts


def test_debian_devices() -> None:
    dev = qm.debian_devices(Path("/b/root.img"), [(4022, 22)], Path("/t/syms"),
                            Path("/t/ctl.sock"))
    assert "file=/b/root.img,if=virtio,format=raw,snapshot=on" in dev
    net = dev[dev.index("-netdev") + 1]
    assert "restrict=on" in net and "hostfwd=tcp:127.0.0.1:4022-:22" in net
    serials = [dev[i + 1] for i, a in enumerate(dev) if a == "-serial"]
    assert serials == ["mon:stdio", "file:/t/syms", "unix:/t/ctl.sock,server=on,wait=off"]
    with pytest.raises(ValueError, match="comma"):
        qm.debian_devices(Path("/a,b/root.img"))
    argv = qm.qemu_argv(Path("/k"), Path("/i"), 512, 2, devices=dev)
    assert argv[-len(dev):] == dev


# --- manifest -------------------------------------------------------------------------------------


def test_manifest_has_every_required_key(tmp_path: Path) -> None:
    guest = gst.GuestImage(tmp_path, tmp_path / "vmlinuz", tmp_path / "System.map",
                           tmp_path / "initrd", "6.1.0-56-amd64", "6.1.192-2", kind="debian",
                           disk=tmp_path / "root.img", recipe_sha="abc",
                           packages_lock=tmp_path / "packages.lock")
    (tmp_path / "packages.lock").write_text("apache2 2.4.71-1~deb12u1\nsqlite3 3.40.1-2\n")
    result = qm.QemuResult(returncode=0, timed_out=False, wall_seconds=1.0, stderr="")
    m = mf.build_manifest(
        command="workload dss", date="d", guest=guest, qemu_version="v", plugin=None,
        plugin_options=None, vcpus=2, ram_mib=512, roi="marker", data_accesses=False,
        timeout=1.0, argv=[], result=result, console_text="", workload="dss",
        parameters={"streams": "4"}, roi_bound={"seconds": 8},
        kernel_symbols={"system_map": "System.map.gz", "modules": None})
    json.dumps(m)
    assert mf.missing_keys(m) == []
    assert m["image"]["packages"]["sqlite3"] == "3.40.1-2"
    assert (m["guest"], m["workload"], m["parameters"]) == ("debian", "dss", {"streams": "4"})
    assert mf.missing_keys({"guest": "x"})[:2] == ["manifest_version", "workload"]


# --- the ROI bound, monitor, compaction on synthetic traces -------------------------------------


def _sample_trace(tmp_path: Path) -> Path:
    f = tf.sample()
    f.rows_per_part = 3  # several exec parts per vCPU
    return f.write(tmp_path / "t")


def _plugin_json(root: Path, ends: int, window: list[int], recording: bool = True) -> None:
    """Write plugin.json as the plugin does: a new file renamed over the old one."""
    info = {"final": False, "windows": 1, "recording": recording, "roi_insns_ends": ends,
            "icount": window, "window_icount": window, "options": {"roi_insns": 100}}
    tmp = root / ".plugin.json.tmp"
    tmp.write_text(json.dumps(info))
    tmp.replace(root / "plugin.json")


def test_roi_bound_watch_sees_the_plugins_end(tmp_path: Path) -> None:
    watch = RoiBoundWatch(tmp_path)
    assert not watch.poll()  # no plugin.json yet
    _plugin_json(tmp_path, 0, [0, 0])
    assert not watch.poll() and watch.info is not None
    _plugin_json(tmp_path, 1, [100, 130], recording=False)
    assert watch.poll() and watch.ended
    assert watch.window_icount == {"0": 100, "1": 130}


def test_bound_shortfall_names_the_short_vcpus() -> None:
    info = {"windows": 1, "window_icount": [150, 99, 100]}
    assert bound_shortfall(info, 100) == {"1": 99}
    assert bound_shortfall(info, 99) == {}
    assert bound_shortfall({"windows": 0, "window_icount": [0, 0]}, 100) is None
    assert bound_shortfall({"windows": 1, "icount": [5]}, 100) is None  # an older plugin
    assert bound_shortfall(None, 100) is None


def test_plugin_options_pass_roi_insns() -> None:
    opts = qm.plugin_options(Path("/o"), Path("/m"), 256, roi_insns=20_000_000)
    assert opts.endswith(",roi_insns=20000000")
    assert "roi_insns" not in qm.plugin_options(Path("/o"), Path("/m"), 256)
    with pytest.raises(ValueError, match="roi_insns"):
        qm.plugin_options(Path("/o"), Path("/m"), 256, roi="all", roi_insns=5)
    with pytest.raises(ValueError, match="roi_insns"):
        qm.plugin_options(Path("/o"), Path("/m"), 256, roi_insns=0)


def test_compact_keeps_the_trace(tmp_path: Path) -> None:
    root = _sample_trace(tmp_path)
    before = {v: block_sizes(open_trace(root), v).tolist() for v in (0, 1)}
    summary = compact_trace(root, level=3)
    assert summary["parts"] == len(list((root / "exec").glob("*.parquet"))) > 2
    trace = open_trace(root)
    assert {v: block_sizes(trace, v).tolist() for v in (0, 1)} == before
    assert check_trace(trace).ok
    import pyarrow.parquet as pq
    meta = pq.ParquetFile(next((root / "exec").glob("*.parquet"))).metadata
    assert meta.num_row_groups == 1
    assert "BYTE_STREAM_SPLIT" in meta.row_group(0).column(0).encodings
    with pytest.raises(ValueError, match="not an exec part"):
        from pysched.capture.compact import compact_part
        compact_part(next((root / "syscalls").glob("*.parquet")))


class _FakePeer(prs.Peer):
    kind = "fake"

    def __init__(self) -> None:
        self.started = self.done = False
        self.stops = 0

    def start(self) -> None:
        self.started = True

    def finished(self) -> bool:
        return self.done

    def stop(self) -> dict:
        self.stops += 1
        return {"kind": "fake", "started": self.started}


def _assert_stop_sent(srv, got: list) -> None:
    """The control server received the host's ``stop`` (within 5 s), then closes."""
    deadline = time.monotonic() + 5
    while b"".join(got) != b"stop\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    srv.close()
    assert b"".join(got) == b"stop\n"


def _control_server(path: Path) -> tuple[socket.socket, list[bytes]]:
    """A unix socket standing in for QEMU's control chardev; collects what arrives."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            while data := conn.recv(100):
                got.append(data)

    threading.Thread(target=serve, daemon=True).start()
    return srv, got


def test_monitor_starts_the_peer_and_stops_the_region(tmp_path: Path) -> None:
    console = tmp_path / "console.log"
    console.write_bytes(b"booting\n=== PYSCHED BEGIN ===\n=== PYSCHED PE")
    srv, got = _control_server(tmp_path / "c.sock")
    peer = _FakePeer()
    mon = RunMonitor(console, tmp_path / "c.sock", peer)
    mon.poll(1.0)
    assert not peer.started
    with open(console, "ab") as f:  # the marker completes across two reads
        f.write(PEER_START_MARK[len(b"=== PYSCHED PE"):] + b"\n")
    mon.poll(1.5)
    assert peer.started and mon.stop_reason is None
    peer.done = True
    mon.poll(2.0)
    assert peer.stops == 0
    with open(console, "ab") as f:  # the guest is done: the peer is stopped at once
        f.write(b"=== PYSCHED EXIT 0 ===\n")
    mon.poll(2.5)
    assert peer.stops == 1
    summary = mon.finish()
    assert peer.stops == 1  # not stopped twice
    _assert_stop_sent(srv, got)
    assert summary["host_stop"]["reason"] == "the host's peer ended"
    assert summary["peer"]["started_after_seconds"] == 1.5


def test_monitor_stops_the_guest_when_the_plugin_ends_the_region(tmp_path: Path) -> None:
    srv, got = _control_server(tmp_path / "c.sock")
    mon = RunMonitor(tmp_path / "none.log", tmp_path / "c.sock", None, tmp_path, 100)
    mon.poll(1.0)  # no plugin.json yet
    _plugin_json(tmp_path, 0, [120, 40])  # vCPU 1 is still short: the region is open
    mon.poll(1.5)
    assert mon.stop_reason is None
    _plugin_json(tmp_path, 1, [120, 100], recording=False)
    mon.poll(2.0)
    assert mon.stop_reason is not None and "every vCPU" in mon.stop_reason
    summary = mon.finish()
    _assert_stop_sent(srv, got)
    assert summary["host_stop"]["after_seconds"] == 2.0
    assert summary["host_stop"]["insns_recorded"] == {"0": 120, "1": 100}
    with pytest.raises(ValueError, match="control port"):
        RunMonitor(tmp_path / "none.log", None, None, tmp_path, 100)


def test_monitor_ends_a_region_still_open_at_its_deadline(tmp_path: Path) -> None:
    # On the instruction clock the guest's own backstop counts guest seconds, which pass
    # slowly while the guest is busy: the host ends a region still open at the deadline.
    srv, got = _control_server(tmp_path / "c.sock")
    mon = RunMonitor(tmp_path / "none.log", tmp_path / "c.sock", None, tmp_path, 100,
                     region_deadline=300.0)
    _plugin_json(tmp_path, 0, [120, 40])  # vCPU 1 is still short: the region is open
    mon.poll(299.5)
    assert mon.stop_reason is None
    mon.poll(300.0)
    assert "still open after 300 s" in mon.stop_reason
    summary = mon.finish()
    _assert_stop_sent(srv, got)
    assert summary["host_stop"]["after_seconds"] == 300.0
    # without --roi-insns there is no deadline
    assert RunMonitor(tmp_path / "none.log", region_deadline=300.0).region_deadline is None


def test_monitor_stops_the_peer_when_the_plugin_ends_the_region(tmp_path: Path) -> None:
    # A peer still working when the region ends at the bound is stopped then, before the
    # guest's shutdown can cut its connection (an scp that "lost connection" read as failed).
    console = tmp_path / "console.log"
    console.write_bytes(PEER_START_MARK + b"\n")
    srv, got = _control_server(tmp_path / "c.sock")
    peer = _FakePeer()
    mon = RunMonitor(console, tmp_path / "c.sock", peer, tmp_path, 100)
    mon.poll(1.0)
    assert peer.started and peer.stops == 0
    _plugin_json(tmp_path, 1, [120, 100], recording=False)
    mon.poll(1.5)
    assert mon.stop_reason is not None and peer.stops == 1
    mon.finish()
    deadline = time.monotonic() + 5
    while b"".join(got) != b"stop\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    srv.close()
    assert peer.stops == 1


# --- the guest programs, run on the host -----------------------------------------------------


@pytest.fixture(scope="module")
def progs(tmp_path_factory) -> Path:
    """The workload programs, compiled as the image build compiles them."""
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("bin")
    for src in (GUEST_SRC / "workloads").glob("*.c"):
        subprocess.run(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread",
                        "-o", str(out / src.stem), str(src)], check=True, capture_output=True)
    return out


def test_fsbench_personalities(progs: Path, tmp_path: Path) -> None:
    for pers in ("fileserver", "varmail"):
        d = tmp_path / pers
        r = subprocess.run([progs / "fsbench", "prepare", pers, "-d", str(d), "-f", "50",
                            "-s", "2048"], capture_output=True, text=True, check=True)
        assert f"of 50 files in {d}" in r.stdout
        made = int(r.stdout.split()[2])
        assert 0 < made <= 50
        r = subprocess.run([progs / "fsbench", "run", pers, "-d", str(d), "-f", "50", "-s",
                            "2048", "-t", "4", "-n", "20"], capture_output=True, text=True,
                           check=True, timeout=60)
        assert "4 threads, 80 loops" in r.stdout
    r = subprocess.run([progs / "fsbench", "run", "fileserver", "-d", str(tmp_path / "none")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "fsbench prepare first" in r.stderr
    r = subprocess.run([progs / "fsbench", "run", "bogus"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown personality" in r.stderr


def test_fsbench_stops_on_sigterm_with_totals(progs: Path, tmp_path: Path) -> None:
    d = tmp_path / "v"
    subprocess.run([progs / "fsbench", "prepare", "varmail", "-d", str(d), "-f", "20"],
                   check=True, capture_output=True)
    p = subprocess.Popen([progs / "fsbench", "run", "varmail", "-d", str(d), "-f", "20",
                          "-t", "2"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    p.terminate()
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0 and "fsbench varmail: 2 threads" in out


def test_ptrchase_and_barrier(progs: Path) -> None:
    r = subprocess.run([progs / "ptrchase", "-k", "64", "-n", "65536"], capture_output=True,
                       text=True, check=True, timeout=60)
    assert re.match(r"ptrchase: 64 KiB, 65536 loads", r.stdout)
    r = subprocess.run([progs / "barrier", "-t", "3", "-g", "64", "-i", "5", "-b", "50"],
                       capture_output=True, text=True, check=True, timeout=60)
    assert "3 threads, grid 64, 5 sweeps" in r.stdout
    r = subprocess.run([progs / "barrier", "-t", "100", "-g", "16"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "more threads" in r.stderr


def test_roi_wait_bounds(progs: Path) -> None:
    t0 = time.monotonic()
    subprocess.run([progs / "roi-wait", "-t", "0.3"], check=True)
    assert time.monotonic() - t0 >= 0.3
    sleeper = subprocess.Popen(["sleep", "0.3"])
    t0 = time.monotonic()
    subprocess.run([progs / "roi-wait", "-t", "30", str(sleeper.pid)], check=True, timeout=20)
    assert time.monotonic() - t0 < 10  # returned when the process ended, not after 30 s
    sleeper.wait()
    assert subprocess.run([progs / "roi-wait", "-t", "x"]).returncode == 2


def test_roi_wait_runs_a_command_inside_its_region(progs: Path, tmp_path: Path) -> None:
    """-r -x: the command's status once the region closes; a command still running when the
    bound ends the wait is stopped. (On the host the marker instruction is a no-op.)"""
    status = tmp_path / "status"
    r = subprocess.run([progs / "roi-wait", "-r", "-t", "inf", "-x", "-n", "3", "-s", status,
                        "sh", "-c", "nice; exit 7"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == "3"  # the command's nice value
    assert status.read_text() == "exit 7\n"
    t0 = time.monotonic()
    subprocess.run([progs / "roi-wait", "-r", "-t", "0.3", "-x", "-s", status, "sleep", "30"],
                   check=True, timeout=20)
    assert time.monotonic() - t0 < 10
    assert status.read_text() == "stopped\n"
    r = subprocess.run([progs / "roi-wait", "-r", "-x", "-s", status,
                        tmp_path / "no-such-program"], capture_output=True, text=True)
    assert "cannot run" in r.stderr and status.read_text() == "exit 127\n"
    for bad in (["-x"], ["-s", status, "1"], ["-n", "3"]):
        assert subprocess.run([progs / "roi-wait", *bad], capture_output=True).returncode == 2


def test_net_client_against_netserver(progs: Path) -> None:
    port = prs.free_ports(1)[0]
    server = subprocess.Popen([progs / "netserver", "-p", str(port)], stdout=subprocess.PIPE)
    try:
        assert server.stdout.readline().startswith(b"netserver: listening")
        client = prs.NetClientPeer(port, [10, 100_000], connections=3, per_connection=4,
                                   requests=20, log=Path("/dev/null"))
        client.start()
        deadline = time.monotonic() + 60
        while not client.finished() and time.monotonic() < deadline:
            time.sleep(0.05)
        summary = client.stop()
    finally:
        server.kill()
        server.wait()
    assert summary["requests"] == 20 and summary["errors"] == []
    assert summary["requests_by_size"] == {"10": 10, "100000": 10}
    assert summary["bytes"] == 10 * 10 + 10 * 100_000
    assert summary["connections"] >= 20 // 4


def test_net_client_when_the_server_goes_away(progs: Path) -> None:
    # The guest stops its netserver at the end of the region while the client still asks:
    # every thread ends on errors after its last answer, which is no failure; a server that
    # is back and answers after an error is one (the connection failed during the run).
    port = prs.free_ports(1)[0]

    def serve():
        p = subprocess.Popen([progs / "netserver", "-p", str(port)], stdout=subprocess.PIPE)
        assert p.stdout.readline().startswith(b"netserver: listening")
        return p

    server = serve()
    client = prs.NetClientPeer(port, [100_000], connections=2, per_connection=1000,
                               requests=10**9, log=Path("/dev/null"))
    try:
        client.start()
        deadline = time.monotonic() + 30
        while client.stats.requests < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.kill()
        server.wait()
        time.sleep(1.2)  # the threads reconnect every 0.5 s to a server that is gone
        with client._lock:
            assert client.stats.errors and client.stats.errors_mid_run == 0
        assert prs.peer_failure({"kind": "netclient", "started": True,
                                 "requests": client.stats.requests,
                                 "errors": client.stats.errors, "errors_mid_run": 0}, "",
                                {}) is None
        server = serve()  # back: the threads get answers after their errors
        done = client.stats.requests
        while client.stats.requests < done + 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        summary = client.stop()
    finally:
        client._quit.set()
        server.kill()
        server.wait()
    assert summary["errors_mid_run"] >= 1
    assert "during the run" in prs.peer_failure(summary, "", {})


def test_peer_setup_errors(tmp_path: Path) -> None:
    ctx = prs.PeerContext({"sizes": "10,x", "connections": "1", "per_connection": "1",
                           "requests": "1"}, {7000: 1}, tmp_path, tmp_path / "peer.log")
    with pytest.raises(prs.PeerError, match="comma-separated"):
        prs.make_peer("netclient", ctx)
    ctx = prs.PeerContext({"size_mb": "1"}, {22: 1}, tmp_path, tmp_path / "peer.log")
    with pytest.raises(prs.PeerError, match="no ssh keys"):
        prs.make_peer("scp-in", ctx)
    with pytest.raises(prs.PeerError, match="unknown peer"):
        prs.make_peer("telnet", ctx)


# --- the image's generated data ----------------------------------------------------------------


def _gen(name: str):
    sys.path.insert(0, str(GUEST_SRC / "debian"))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


def test_gen_tree(tmp_path: Path) -> None:
    gen = _gen("gen_tree")
    assert gen.make_tree(tmp_path / "t", depth=2, fanout=3, files=4) == (3 + 9, 9 * 4)
    assert len([p for p in (tmp_path / "t").rglob("*") if p.is_file()]) == 36
    with pytest.raises(ValueError):
        gen.make_tree(tmp_path / "u", depth=0, fanout=3, files=1)


def test_gen_tpch_answers_query_2(tmp_path: Path) -> None:
    gen = _gen("gen_tpch")
    db = tmp_path / "t.db"
    counts = gen.generate(db, scale=0.01, seed=3)
    assert counts == {"region": 5, "nation": 25, "supplier": 100, "part": 2000,
                      "partsupp": 8000}
    assert gen.generate(tmp_path / "u.db", scale=0.01, seed=3) == counts
    con = sqlite3.connect(db)
    # Every part has four distinct suppliers, as in TPC-H.
    assert con.execute("SELECT count(DISTINCT ps_suppkey) FROM partsupp "
                       "WHERE ps_partkey = 7").fetchone()[0] == 4
    q2 = """SELECT p_partkey, s_name, ps_supplycost FROM part, supplier, partsupp, nation, region
            WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = ?
              AND p_type LIKE ? AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
              AND r_name = ? AND ps_supplycost = (
                SELECT min(ps_supplycost) FROM partsupp, supplier, nation, region
                WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey
                  AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = ?)"""
    rows = [r for size in range(1, 51) for r in
            con.execute(q2, (size, "%BRASS", "EUROPE", "EUROPE")).fetchall()]
    assert rows  # the parameters select something at this scale
    for partkey, _, cost in rows:
        best = con.execute(
            "SELECT min(ps_supplycost) FROM partsupp JOIN supplier ON s_suppkey = ps_suppkey "
            "JOIN nation ON n_nationkey = s_nationkey JOIN region ON r_regionkey = n_regionkey "
            "WHERE ps_partkey = ? AND r_name = 'EUROPE'", (partkey,)).fetchone()[0]
        assert cost == best


def test_run_qemu_stops_a_guest_that_does_not_power_off(tmp_path: Path) -> None:
    # A stand-in for QEMU whose guest prints its exit line and then hangs.
    script = "echo '=== PYSCHED BEGIN ==='; echo '=== PYSCHED EXIT 0 ==='; exec sleep 60"
    r = qm.run_qemu(["sh", "-c", script], tmp_path / "c.log", tmp_path / "e.log", timeout=50,
                    boot_marker=b"=== PYSCHED BEGIN ===", boot_timeout=20,
                    exit_marker=b"=== PYSCHED EXIT", shutdown_timeout=1)
    assert r.shutdown_hung and not r.timed_out and not r.boot_hung
