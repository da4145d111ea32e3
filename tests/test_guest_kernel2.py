"""Issue 19 item 5: the checks of tests/test_guest_kaslr_pti.py on a second kernel (`make
test-kernel2`: Debian trixie's 6.12 by default, built by `make -C guest kernel2-guest` into
build/guest-trixie). Skipped unless PYSCHED_GUEST2 names that build directory.

The same command runs on the busybox guest with the second kernel, KASLR on, page-table
isolation off (qemu64's default) and forced on; each capture is checked as the first kernel's:
check passes, slide and frames, threads equal the last switch's next, sysloop's system calls,
timer interrupts, the manifest's kernel arguments. 6.12 has no ttwu_do_wakeup (kind-3
wake-up rows are absent, as qemu-plugin/README.md says of a function the map lacks).
`make test-kernel2 KERNEL_SUITE=bullseye` runs the same on bullseye's 5.10, which has it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pysched.capture.guest import locate_guest
from pysched.capture.qemu import default_plugin_path
from pysched.trace import open_trace
from test_guest_kaslr_pti import (CMD, test_check_passes, test_manifest_records_the_kernel_args,
                                  test_pti_reads_through_the_kernel_page_table,
                                  test_slide_and_frames, test_sysloop_syscalls_and_timer_interrupts,
                                  test_threads_are_those_switched_in)

GUEST2 = os.environ.get("PYSCHED_GUEST2")
pytestmark = [
    pytest.mark.skipif(not GUEST2, reason="PYSCHED_GUEST2 not set (make test-kernel2)"),
    pytest.mark.skipif(not default_plugin_path().is_file(), reason="plugin not built"),
]
__all__ = ["test_check_passes", "test_manifest_records_the_kernel_args",
           "test_pti_reads_through_the_kernel_page_table", "test_slide_and_frames",
           "test_sysloop_syscalls_and_timer_interrupts", "test_threads_are_those_switched_in"]


@pytest.fixture(scope="module", params=["pti=off", "pti=on"])
def capture(request, tmp_path_factory) -> tuple[str, Path]:
    guest = locate_guest(Path(GUEST2))  # a clear error when the second kernel is not built
    out = tmp_path_factory.mktemp("kernel2") / "t"
    r = subprocess.run([sys.executable, "-m", "pysched.cli", "trace", "--guest", "busybox",
                        "--guest-dir", str(guest.vmlinuz.parent), "--cmd", CMD, "--out",
                        str(out), "--vcpus", "2", "--kernel-args", request.param],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = open_trace(out).manifest
    assert m["kernel_version"] == (guest.vmlinuz.parent / "kernel-version").read_text().strip()
    return request.param, out


def test_the_second_kernel_is_another_kernel() -> None:
    first, second = locate_guest(), locate_guest(Path(GUEST2))
    assert first.kernel_version != second.kernel_version, (first.kernel_version,)
