"""The test guest's build outputs: the kernel's System.map made from its own /proc/kallsyms
(guest/system-map.sh) and the reproducible initramfs archives (guest/cpio-gz.sh)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pysched.capture.guest import GUEST_BUILD_DIR
from pysched.superfunctions.symbols import SCHEDULER_FUNCTIONS, SOFTIRQ_DISPATCHERS

REPO = Path(__file__).resolve().parents[1]
GUEST_SRC = REPO / "guest"
SYSTEM_MAP = GUEST_BUILD_DIR / "System.map"


def test_system_map_is_the_kernels() -> None:
    if not SYSTEM_MAP.is_file():
        pytest.skip("test guest not built (make -C guest busybox-guest)")
    rows = []
    for lineno, line in enumerate(SYSTEM_MAP.read_text().splitlines(), 1):
        fields = line.split()
        # "ADDRESS TYPE NAME": no module lines ("... [module]").
        assert len(fields) == 3 and len(fields[0]) == 16, (lineno, line)
        rows.append((int(fields[0], 16), fields[2], fields[1]))
    # nm -n's order: by address, aliases by name.
    keys = [(a, n) for a, n, _ in rows]
    assert keys == sorted(keys)
    by_name = {n: (a, t) for a, n, t in rows}
    # nokaslr: the kernel image starts at its link address.
    assert by_name["_text"] == (0xFFFFFFFF81000000, "T")
    for sym in ("idt_table", "__switch_to", "entry_SYSCALL_64", "_etext", "schedule"):
        assert sym in by_name, sym
    assert "current_task" in by_name or "pcpu_hot" in by_name
    # Per-CPU symbols are offsets into the per-CPU area.
    assert by_name.get("current_task", by_name.get("pcpu_hot"))[0] < 0x100000
    assert any(s in by_name for s in SOFTIRQ_DISPATCHERS)
    assert sum(s in by_name for s in SCHEDULER_FUNCTIONS) > len(SCHEDULER_FUNCTIONS) // 2
    text = sum(t in "tTwW" for _, _, t in rows)
    assert text > 20_000


def _system_map_script(tmp_path: Path, vmlinuz: Path, append: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(GUEST_SRC / "system-map.sh"), str(vmlinuz),
                           str(tmp_path / "System.map"), "6.1.0-0-amd64", append],
                          capture_output=True, text=True, timeout=60)


def test_system_map_script_needs_nokaslr(tmp_path: Path) -> None:
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(b"not a kernel")
    r = _system_map_script(tmp_path, kernel, "console=ttyS0 pti=off")
    assert r.returncode != 0 and "lacks nokaslr" in r.stderr
    r = _system_map_script(tmp_path, tmp_path / "missing", "console=ttyS0 nokaslr")
    assert r.returncode != 0 and f"{tmp_path / 'missing'} is missing" in r.stderr
    assert not (tmp_path / "System.map").exists()


@pytest.mark.skipif(shutil.which("cpio") is None, reason="GNU cpio not installed")
def test_cpio_archives_are_reproducible(tmp_path: Path) -> None:
    outs = []
    for k, mtime in enumerate((1_000_000, 2_000_000)):
        tree = tmp_path / f"tree{k}"
        (tree / "bin").mkdir(parents=True)
        (tree / "init").write_text("#!/bin/sh\necho hi\n")
        (tree / "bin" / "tool").write_text("x\n")
        for p in (tree / "init", tree / "bin" / "tool", tree / "bin"):
            os.utime(p, (mtime, mtime))
        out = tmp_path / f"a{k}.cpio.gz"
        r = subprocess.run([str(GUEST_SRC / "cpio-gz.sh"), str(tree), str(out)],
                           capture_output=True, text=True, timeout=60, check=True)
        assert str(out) in r.stdout and not (tmp_path / f"a{k}.cpio.gz.tmp").exists()
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    listing = subprocess.run(["sh", "-c", f"zcat {tmp_path / 'a0.cpio.gz'} | cpio -t --quiet"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert listing == ["bin", "bin/tool", "init"]


def test_cpio_failure_fails_the_archive(tmp_path: Path) -> None:
    # A cpio that fails (here: a stand-in on PATH) must fail the script and leave no archive,
    # not a valid gzip of nothing that the guest would only reject at boot.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "cpio").write_text("#!/bin/sh\nexit 3\n")
    (fake / "cpio").chmod(0o755)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "init").write_text("#!/bin/sh\n")
    out = tmp_path / "a.cpio.gz"
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    r = subprocess.run([str(GUEST_SRC / "cpio-gz.sh"), str(tree), str(out)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "cpio failed" in r.stderr
    assert not out.exists() and not list(tmp_path.glob("a.cpio*"))
