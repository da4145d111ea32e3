"""The QEMU command line for a traced run, and running it.

The guest is booted straight from ``-kernel``/``-initrd`` on a q35 machine under multi-threaded
TCG, with the serial console on QEMU's stdout. The kernel options ``nokaslr`` and ``pti=off``
are required by the plugin (it calibrates guest-physical addresses from the fixed kernel
mapping and reads per-CPU data through the kernel's GS base).
"""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pysched.capture.guest import REPO_ROOT

#: The QEMU system emulator.
QEMU = "qemu-system-x86_64"

#: Kernel command line; ``nokaslr`` and ``pti=off`` are required by the plugin, ``panic=-1``
#: with ``-no-reboot`` makes a guest crash end QEMU instead of hanging the run.
KERNEL_APPEND = "console=ttyS0 nokaslr pti=off quiet panic=-1 loglevel=3"

#: Largest guest RAM the plugin supports (q35 keeps up to 2 GiB in one block below the PCI
#: hole; see qemu-plugin/README.md).
MAX_RAM_MIB = 2048

# After SIGTERM (on timeout) QEMU gets this long to shut down, which lets the plugin flush its
# tables, before it is killed.
_TERM_GRACE_SECONDS = 15.0
_BOOT_POLL_SECONDS = 0.5


def default_plugin_path() -> Path:
    """The plugin built by ``make -C qemu-plugin``.

    Returns
    -------
    Path
        ``<repo>/qemu-plugin/build/libpysched-trace.so`` (it may not exist).
    """
    return REPO_ROOT / "qemu-plugin" / "build" / "libpysched-trace.so"


def parse_ram(text: str) -> int:
    """Parse a RAM size such as ``512M``, ``1G`` or ``512`` (MiB, as QEMU's ``-m``).

    Parameters
    ----------
    text : str
        The size.

    Returns
    -------
    int
        The size in MiB.

    Raises
    ------
    ValueError
        When malformed, zero, or above :data:`MAX_RAM_MIB`.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([MmGg]?)(?:i?[Bb])?\s*", text)
    if not m:
        raise ValueError(f"bad RAM size {text!r}: use e.g. 512M or 1G")
    mib = int(m.group(1)) * (1024 if m.group(2).lower() == "g" else 1)
    if mib <= 0:
        raise ValueError(f"bad RAM size {text!r}: must be positive")
    if mib > MAX_RAM_MIB:
        raise ValueError(
            f"RAM {text!r} is above {MAX_RAM_MIB}M, the most the plugin supports "
            f"(guest RAM must be one block below the PCI hole)"
        )
    return mib


def plugin_options(
    out_dir: Path,
    system_map: Path,
    ram_mib: int,
    data_accesses: bool = False,
    roi: str = "marker",
) -> str:
    """The plugin's option string (everything after ``<so>,`` in ``-plugin``).

    Parameters
    ----------
    out_dir : Path
        The trace directory (``out=``).
    system_map : Path
        The guest kernel's ``System.map`` (``sysmap=``).
    ram_mib : int
        Guest RAM in MiB (``ram=``), so that frames beyond it are flagged.
    data_accesses : bool
        Record data loads and stores (``data=on``).
    roi : {"marker", "all"}
        Region of interest; ``marker`` is the plugin's default and is not spelled out.

    Returns
    -------
    str
        For example ``out=/t,sysmap=/b/System.map,ram=512M``.

    Raises
    ------
    ValueError
        When a path holds a comma (QEMU's option separator) or ``roi`` is unknown.
    """
    for p in (out_dir, system_map):
        if "," in str(p):
            raise ValueError(f"path {str(p)!r} contains a comma, which QEMU's -plugin cannot take")
    if roi not in ("marker", "all"):
        raise ValueError(f"bad roi {roi!r}: use marker or all")
    opts = [f"out={out_dir}", f"sysmap={system_map}", f"ram={ram_mib}M"]
    if data_accesses:
        opts.append("data=on")
    if roi == "all":
        opts.append("roi=all")
    return ",".join(opts)


def qemu_argv(
    kernel: Path,
    initrd: Path,
    ram_mib: int,
    vcpus: int,
    plugin: Path | None = None,
    options: str | None = None,
    qemu: str = QEMU,
) -> list[str]:
    """The full QEMU command line.

    Parameters
    ----------
    kernel, initrd : Path
        The guest kernel and the run's initrd.
    ram_mib : int
        Guest RAM in MiB.
    vcpus : int
        Number of vCPUs.
    plugin : Path, optional
        The plugin shared object; without it the guest runs untraced.
    options : str, optional
        The plugin's options (see :func:`plugin_options`).
    qemu : str
        The QEMU executable.

    Returns
    -------
    list of str
        The argument vector.
    """
    argv = [
        qemu,
        "-M", "q35",
        "-m", f"{ram_mib}M",
        "-smp", str(vcpus),
        "-nographic",
        "-no-reboot",
        "-accel", "tcg,thread=multi",
        "-kernel", str(kernel),
        "-initrd", str(initrd),
        "-append", KERNEL_APPEND,
    ]  # fmt: skip
    if plugin is not None:
        argv += ["-plugin", f"{plugin},{options}" if options else str(plugin)]
    return argv


def qemu_version(qemu: str = QEMU) -> str:
    """The first line of ``qemu --version``.

    Parameters
    ----------
    qemu : str
        The QEMU executable.

    Returns
    -------
    str
        For example ``QEMU emulator version 10.0.2 (Debian ...)``; ``"unknown"`` when QEMU
        cannot be run.
    """
    try:
        out = subprocess.run([qemu, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = out.stdout.splitlines()
    return lines[0].strip() if lines else "unknown"


def find_qemu(qemu: str = QEMU) -> str:
    """The path of the QEMU executable.

    Raises
    ------
    FileNotFoundError
        When it is not on ``PATH``.
    """
    path = shutil.which(qemu)
    if path is None:
        raise FileNotFoundError(f"{qemu} not found on PATH; run `make setup`")
    return path


@dataclass(frozen=True)
class QemuResult:
    """How a QEMU run ended.

    Attributes
    ----------
    returncode : int
        QEMU's exit status (negative: killed by that signal).
    timed_out : bool
        QEMU was stopped because the run exceeded its timeout.
    wall_seconds : float
        Wall-clock time from start to exit.
    stderr : str
        What QEMU wrote to stderr.
    boot_hung : bool
        QEMU was stopped because the console did not show the boot marker in time.
    """

    returncode: int
    timed_out: bool
    wall_seconds: float
    stderr: str
    boot_hung: bool = False


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (QEMU exits cleanly and the plugin flushes), SIGKILL after a grace period."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=_TERM_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _console_has(console: Path, marker: bytes) -> bool:
    try:
        return marker in console.read_bytes()
    except OSError:
        return False


def run_qemu(
    argv: Sequence[str],
    console: Path,
    stderr_log: Path,
    timeout: float,
    boot_marker: bytes | None = None,
    boot_timeout: float | None = None,
) -> QemuResult:
    """Run QEMU with its stdout (the serial console) going to a file.

    Parameters
    ----------
    argv : sequence of str
        The command line (:func:`qemu_argv`).
    console : Path
        File that receives QEMU's stdout.
    stderr_log : Path
        File that receives QEMU's stderr.
    timeout : float
        Seconds before QEMU is stopped: SIGTERM first (QEMU then exits cleanly and the plugin
        flushes), SIGKILL if it is still there after a grace period.
    boot_marker : bytes, optional
        Text the console shows once the guest has booted (the ``/init`` banner).
    boot_timeout : float, optional
        With ``boot_marker``: stop QEMU the same way when the marker has not appeared after
        this many seconds (the result then has ``boot_hung``), so that a caller can retry.

    Returns
    -------
    QemuResult
        Exit status, whether it timed out or hung while booting, wall time and stderr.
    """
    start = time.monotonic()
    timed_out = boot_hung = False
    booted = boot_marker is None or boot_timeout is None
    # Files, not pipes: nothing has to drain them while QEMU runs. stdin is /dev/null so that
    # QEMU neither reads the terminal nor puts it in raw mode.
    with open(console, "wb") as out, open(stderr_log, "wb") as err:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
        )
        try:
            while True:
                remaining = timeout - (time.monotonic() - start)
                # Until the banner shows, wake up twice a second to look for it (the console
                # is a few kB by then); afterwards just wait for the end.
                wait = remaining if booted else min(remaining, _BOOT_POLL_SECONDS)
                try:
                    proc.wait(timeout=max(0.0, wait))
                    break
                except subprocess.TimeoutExpired:
                    pass
                elapsed = time.monotonic() - start
                if not booted:
                    assert boot_marker is not None and boot_timeout is not None
                    booted = _console_has(console, boot_marker)
                    if not booted and elapsed >= boot_timeout:
                        boot_hung = True
                        _stop(proc)
                        break
                if elapsed >= timeout:
                    timed_out = True
                    _stop(proc)
                    break
        except BaseException:
            # Interrupted (Ctrl-C): do not leave a guest running behind us.
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
    wall = time.monotonic() - start
    stderr = stderr_log.read_text(errors="replace") if stderr_log.exists() else ""
    return QemuResult(proc.returncode, timed_out, wall, stderr, boot_hung)


def qemu_failed_message(result: QemuResult) -> str:
    """A one-paragraph description of a failed QEMU run, with its stderr."""
    if result.boot_hung:
        head = f"the guest did not boot; QEMU was stopped after {result.wall_seconds:.0f} s"
    elif result.timed_out:
        head = f"QEMU was stopped after the timeout ({result.wall_seconds:.0f} s)"
    elif result.returncode < 0:
        head = f"QEMU was killed by signal {-result.returncode}"
    else:
        head = f"QEMU exited with status {result.returncode}"
    err = result.stderr.strip()
    return head + (":\n" + err if err else " (nothing on stderr)")


__all__ = [
    "QEMU",
    "KERNEL_APPEND",
    "MAX_RAM_MIB",
    "QemuResult",
    "default_plugin_path",
    "find_qemu",
    "parse_ram",
    "plugin_options",
    "qemu_argv",
    "qemu_failed_message",
    "qemu_version",
    "run_qemu",
]
