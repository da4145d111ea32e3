"""The Debian guest: its image recipe is cached, it boots to our init, runs a command inside
the region and reports a failing one, and the host can end a command's region by its
instruction count."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pysched.capture.guest import GUEST_BUILD_DIR, GuestNotBuiltError, locate_debian_guest
from pysched.capture.manifest import missing_keys
from pysched.capture.qemu import default_plugin_path

REPO = Path(__file__).resolve().parents[1]
DEBIAN_SRC = REPO / "guest" / "debian"


def _debian_guest():
    try:
        return locate_debian_guest()
    except GuestNotBuiltError as e:
        pytest.skip(f"{e}")


pytestmark = pytest.mark.skipif(
    not default_plugin_path().is_file(), reason="plugin not built (make plugin)"
)


def pysched(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pysched.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def _recipe_sha(src: Path, build: Path) -> str:
    r = subprocess.run(["make", "-s", "-C", str(src), "print-recipe-sha", f"G={build}"],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip()


def test_image_is_built_from_the_current_recipe_and_cached() -> None:
    guest = _debian_guest()
    assert guest.disk is not None
    built = (GUEST_BUILD_DIR / "debian" / "recipe.sha").read_text().strip()
    assert _recipe_sha(DEBIAN_SRC, GUEST_BUILD_DIR) == built, \
        "the image is older than its recipe: run make guest"
    mtime = guest.disk.stat().st_mtime_ns
    r = subprocess.run(["make", "-C", str(DEBIAN_SRC), "debian-guest"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "recipe hash" not in r.stdout and "debootstrap" not in r.stdout
    assert guest.disk.stat().st_mtime_ns == mtime  # not rebuilt
    pkgs = guest.packages()
    for p in ("strace", "procps", "openssh-server", "apache2", "sqlite3", "mariadb-server",
              "sysbench"):
        assert p in pkgs, p
    assert "systemd" not in pkgs  # our own init, no systemd


def test_recipe_hash_follows_the_recipe(tmp_path: Path) -> None:
    _debian_guest()
    src = tmp_path / "guest"
    shutil.copytree(REPO / "guest", src, ignore=shutil.ignore_patterns("__pycache__"))
    build = tmp_path / "build"
    build.mkdir()
    shutil.copy(GUEST_BUILD_DIR / "kernel-version", build / "kernel-version")
    before = _recipe_sha(src / "debian", build)
    assert before == _recipe_sha(DEBIAN_SRC, GUEST_BUILD_DIR)
    (src / "debian" / "init.sh").write_text("# not part of the image\n")
    assert _recipe_sha(src / "debian", build) == before
    with open(src / "debian" / "packages.txt", "a") as f:
        f.write("fio\n")
    assert _recipe_sha(src / "debian", build) != before


@pytest.fixture(scope="module")
def cmd_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    _debian_guest()
    out = tmp_path_factory.mktemp("debian") / "t"
    cmd = ("cat /etc/debian_version; strace -V | head -n 1; ps --version; "
           "test -s /srv/dss/tpch.db && echo have-dss-db; "
           "sysloop 50; echo pysched-cmd-marker; exit 3")
    r = pysched("trace", "--cmd", cmd, "--out", str(out), "--vcpus", "2")
    return out, r


def test_failing_command_fails_the_run_and_shows_its_output(cmd_run) -> None:
    out, r = cmd_run
    assert r.returncode == 1
    assert "pysched-cmd-marker" in r.stderr
    assert "the command exited with status 3 in the guest" in r.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["guest_exit_status"] == 3


def test_debian_guest_runs_the_command_in_the_region(cmd_run) -> None:
    out, _ = cmd_run
    console = (out / "console.log").read_text()
    assert "\n12." in console  # /etc/debian_version of bookworm
    assert "strace -- version" in console and "procps-ng" in console
    assert "have-dss-db" in console and "SYSLOOP syscr0=" in console
    m = json.loads((out / "manifest.json").read_text())
    assert missing_keys(m) == []
    assert (m["guest"], m["workload"], m["vcpus"]) == ("debian", None, 2)
    assert m["image"]["recipe_sha"] and m["image"]["packages"]["sqlite3"]
    assert m["kernel_version"] and m["qemu_version"].startswith("QEMU")
    for when in ("before", "after"):
        assert m["interrupts"][when]["counts"]["LOC"]
        assert m["stat"][when]["fields"]["ctxt"]
    # Disk and NIC are virtio devices with their own interrupt lines.
    names = m["interrupts"]["after"]["raw"]
    assert "virtio" in names
    r = pysched("check", str(out))
    assert r.returncode == 0, r.stdout


def test_kernel_symbols_travel_with_the_trace(cmd_run) -> None:
    out, _ = cmd_run
    guest = _debian_guest()
    # The running kernel's symbols: the map moved by the KASLR slide the plugin found, which
    # the guest's own /proc/kallsyms (its _stext line) confirms.
    m = json.loads((out / "manifest.json").read_text())
    slide = json.loads((out / "plugin.json").read_text())["kaslr"]["virtual_slide"]
    assert m["kernel_symbols"]["slide"] == m["kernel_symbols"]["slide_kallsyms"] == slide
    moved = gzip.decompress((out / "System.map.gz").read_bytes()).decode().splitlines()
    orig = guest.system_map.read_text().splitlines()
    assert len(moved) == len(orig)
    for a, b in zip(orig, moved):
        x, y = int(a.split()[0], 16), int(b.split()[0], 16)
        assert y == ((x + slide) % 2**64 if x >= 0xFFFFFFFF80000000 else x), (a, b)
        assert a.split()[1:] == b.split()[1:]
    mods = gzip.decompress((out / "modules.map.gz").read_bytes()).decode()
    lines = mods.splitlines()
    assert all(ln.split()[-1].startswith("[") for ln in lines)
    modules = {ln.split()[-1] for ln in lines}
    assert {"[ext4]", "[virtio_blk]", "[virtio_net]"} <= modules
    # Modules' code lives in the module area above the kernel image (KASLR moves it within).
    text = [ln.split() for ln in lines if ln.split()[1] in ("t", "T")]
    assert len(text) > 1000
    assert all(int(f[0], 16) >= 0xFFFFFFFFC0000000 for f in text)
    assert m["kernel_symbols"]["system_map"] == "System.map.gz"
    assert m["kernel_symbols"]["modules"] == "modules.map.gz"


def test_roi_insns_ends_a_long_command(tmp_path: Path) -> None:
    _debian_guest()
    out = tmp_path / "t"
    # spin 100000 would run for many minutes; the host ends the region at 40 M per vCPU.
    r = pysched("trace", "--cmd", "spin 100000", "--out", str(out), "--vcpus", "1",
                "--roi-insns", "40M", "--timeout", "400")
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert "every vCPU" in m["host_stop"]["reason"]
    assert m["insns_per_vcpu"]["0"] >= 40_000_000
    assert "the command was stopped when the region ended" in (out / "console.log").read_text()
    assert m["roi_bound"]["insns_per_vcpu"] == 40_000_000
