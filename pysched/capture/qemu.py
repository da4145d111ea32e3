"""The QEMU command line for a traced run, and running it.

The guest is booted straight from ``-kernel``/``-initrd`` on a q35 machine under TCG (on the
guest clock of :mod:`pysched.capture.clock`: single-threaded with ``-icount`` by default,
multi-threaded on the host's clock), with the serial console on QEMU's stdout. The kernel's optional arguments are
``--kernel-args`` (:func:`kernel_append`); the harness adds what it needs after them.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from pysched.capture.guest import REPO_ROOT

#: The QEMU system emulator.
QEMU = "qemu-system-x86_64"

#: What the harness needs on the kernel command line, put after the optional arguments so
#: that it wins (for these options the kernel keeps the last value; the last ``console=`` is
#: ``/dev/console``): the serial console on ttyS0 (the console log, the guest's printing),
#: kernel messages kept off it (``quiet loglevel=3``: the console log is parsed), and
#: ``panic=-1`` with ``-no-reboot``, which makes a guest crash end QEMU instead of hanging.
HARNESS_KERNEL_ARGS = "quiet loglevel=3 console=ttyS0 panic=-1"

#: The guest kernel's optional arguments when ``--kernel-args`` is not given: none, so the
#: kernel boots as a distribution's does (KASLR on, page-table isolation as the CPU calls for;
#: the plugin finds the slide and reads through the kernel's page table, qemu-plugin/README.md).
DEFAULT_KERNEL_ARGS = ""

#: The default kernel command line.
KERNEL_APPEND = " ".join([*DEFAULT_KERNEL_ARGS.split(), HARNESS_KERNEL_ARGS])

#: Options of the harness's own boot that ``--kernel-args`` may not change: the guest's
#: ``/init`` (busybox) or the initrd's init (Debian) must run for the command and the markers.
_FORBIDDEN_KERNEL_ARGS = ("init", "rdinit")

#: x86's COMMAND_LINE_SIZE less the terminating zero.
_MAX_CMDLINE = 2047


def kernel_append(kernel_args: str | None = None) -> str:
    """The kernel command line for ``kernel_args`` (None: :data:`DEFAULT_KERNEL_ARGS`).

    Raises
    ------
    ValueError
        For an argument the harness cannot honour (``init=``, ``rdinit=``), a character that
        is not printable ASCII, or a line longer than the kernel accepts; the message names
        ``--kernel-args``.
    """
    args = DEFAULT_KERNEL_ARGS if kernel_args is None else kernel_args
    if any(not (0x20 <= ord(c) < 0x7F) for c in args):
        raise ValueError("--kernel-args: only printable ASCII characters are accepted")
    for word in args.split():
        key = word.split("=", 1)[0]
        if key in _FORBIDDEN_KERNEL_ARGS:
            raise ValueError(f"--kernel-args: {word!r} is not accepted: the harness's init "
                             "runs the command and the region markers")
    line = " ".join([*args.split(), HARNESS_KERNEL_ARGS])
    if len(line) > _MAX_CMDLINE:
        raise ValueError(f"--kernel-args: the kernel command line would be {len(line)} "
                         f"characters, more than the kernel's {_MAX_CMDLINE}")
    return line

#: The guest CPU: QEMU's default for TCG (qemu64) plus RDRAND, which TCG emulates (from the
#: host's random source). The Debian kernel trusts RDRAND (CONFIG_RANDOM_TRUST_CPU=y) and so
#: initialises its random-number generator from it early in boot: no ``getrandom`` or
#: ``/dev/urandom`` reader waits or makes entropy by jitter inside the region (without it the
#: first reader spent about 100 M instructions in one read). Chosen over a virtio-rng device,
#: whose driver is a module in this kernel: no module to load in either guest, no device
#: interrupts or ``hwrng`` kernel thread in the trace, and every other CPU feature as before.
CPU_MODEL = "qemu64,+rdrand"

#: Most vCPUs: q35 under TCG with this CPU model (no x2APIC) gives APIC IDs 0-254; QEMU
#: refuses 256 and more ("APIC ID 255 requires x2APIC feature in CPU").
MAX_VCPUS = 255

#: Largest guest RAM accepted: the largest tested (tests/test_guest_highmem.py). The plugin
#: follows q35's layout for any size (RAM from 0xb0000000 bytes on is 2 GiB below 4 GiB and
#: the rest above it; qemu-plugin/README.md), so the limit is what was tried, not a known
#: failure (QEMU maps guest RAM lazily: the host provides what the guest touches).
MAX_RAM_MIB = 8192

# After SIGTERM (on timeout) QEMU gets this long to shut down, which lets the plugin flush its
# tables, before it is killed.
_TERM_GRACE_SECONDS = 15.0
_BOOT_POLL_SECONDS = 0.5
_RENICE_WAIT_SECONDS = 5.0


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
            f"RAM {text!r} is above {MAX_RAM_MIB}M, the largest size tested with the plugin"
        )
    return mib


def plugin_options(
    out_dir: Path,
    system_map: Path,
    ram_mib: int,
    data_accesses: bool = False,
    roi: str = "marker",
    roi_insns: int | None = None,
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
    roi_insns : int, optional
        End the region once every vCPU has retired this many instructions in it
        (``roi_insns=``; needs ``roi="marker"``).

    Returns
    -------
    str
        For example ``out=/t,sysmap=/b/System.map,ram=512M``.

    Raises
    ------
    ValueError
        When a path holds a comma (QEMU's option separator), ``roi`` is unknown, or
        ``roi_insns`` is not positive or comes with ``roi="all"``.
    """
    for p in (out_dir, system_map):
        if "," in str(p):
            raise ValueError(f"path {str(p)!r} contains a comma, which QEMU's -plugin cannot take")
    if roi not in ("marker", "all"):
        raise ValueError(f"bad roi {roi!r}: use marker or all")
    if roi_insns is not None and (roi_insns <= 0 or roi != "marker"):
        raise ValueError(f"bad roi_insns {roi_insns!r}: a positive count, with roi=marker")
    opts = [f"out={out_dir}", f"sysmap={system_map}", f"ram={ram_mib}M"]
    if data_accesses:
        opts.append("data=on")
    if roi == "all":
        opts.append("roi=all")
    if roi_insns is not None:
        opts.append(f"roi_insns={int(roi_insns)}")
    return ",".join(opts)


def _no_comma(what: str, p: Path) -> str:
    if "," in str(p):
        raise ValueError(f"{what} path {str(p)!r} contains a comma, which QEMU's options cannot take")
    return str(p)


def debian_devices(
    disk: Path,
    hostfwd: Sequence[tuple[int, int]] = (),
    symbols: Path | None = None,
    control: Path | None = None,
) -> list[str]:
    """The Debian guest's devices: its disk, its NIC and three serial ports.

    Parameters
    ----------
    disk : Path
        The root file system image, attached as a virtio disk with ``snapshot=on``: the run's
        writes go to a temporary overlay (in ``$TMPDIR``) and the image stays as built.
    hostfwd : sequence of (host_port, guest_port)
        TCP ports of 127.0.0.1 forwarded to the guest. The NIC is a virtio-net on QEMU user
        networking with ``restrict=on``: the guest reaches nothing outside, and only the host's
        own 127.0.0.1 reaches it.
    symbols : Path, optional
        File that receives what the guest writes to its second serial port (ttyS1): the loaded
        modules' symbols. Without it the port goes nowhere (``null``).
    control : Path, optional
        Unix socket (QEMU listens) on the guest's third serial port (ttyS2), on which the host
        tells the guest to end its region of interest.

    Returns
    -------
    list of str
        Arguments to add to :func:`qemu_argv`'s command line; ttyS0 (the console) stays on
        QEMU's stdio.

    Raises
    ------
    ValueError
        When a path holds a comma.
    """
    net = "user,id=n0,restrict=on" + "".join(
        f",hostfwd=tcp:127.0.0.1:{h}-:{g}" for h, g in hostfwd)
    return [
        "-drive", f"file={_no_comma('disk', disk)},if=virtio,format=raw,snapshot=on",
        "-netdev", net,
        # romfile= (empty): no iPXE option ROM, the guest boots from -kernel.
        "-device", "virtio-net-pci,netdev=n0,romfile=",
        "-serial", "mon:stdio",
        "-serial", f"file:{_no_comma('symbols', symbols)}" if symbols else "null",
        "-serial", (f"unix:{_no_comma('control socket', control)},server=on,wait=off"
                    if control else "null"),
    ]  # fmt: skip


def qemu_argv(
    kernel: Path,
    initrd: Path,
    ram_mib: int,
    vcpus: int,
    plugin: Path | None = None,
    options: str | None = None,
    qemu: str = QEMU,
    devices: Sequence[str] = (),
    append: str = KERNEL_APPEND,
    clock: Sequence[str] = ("-accel", "tcg,thread=multi"),
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
    devices : sequence of str
        More arguments (e.g. :func:`debian_devices`).
    append : str
        The kernel command line (:func:`kernel_append`).
    clock : sequence of str
        The accelerator and clock options
        (:meth:`pysched.capture.clock.GuestClock.qemu_args`; default: multi-threaded TCG on
        the host's clock).

    Returns
    -------
    list of str
        The argument vector.
    """
    argv = [
        qemu,
        # debug-threads names the vCPU threads "CPU n/TCG", so that run_qemu can find them.
        "-name", "pysched,debug-threads=on",
        "-M", "q35",
        "-m", f"{ram_mib}M",
        "-smp", str(vcpus),
        "-nographic",
        "-no-reboot",
        *clock,
        "-cpu", CPU_MODEL,
        "-kernel", str(kernel),
        "-initrd", str(initrd),
        "-append", append,
    ]  # fmt: skip
    argv += list(devices)
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
    shutdown_hung : bool
        QEMU was stopped because the guest did not power off in time after the console showed
        its exit marker (the guest's work was done by then).
    """

    returncode: int
    timed_out: bool
    wall_seconds: float
    stderr: str
    boot_hung: bool = False
    shutdown_hung: bool = False


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (QEMU exits cleanly and the plugin flushes), SIGKILL after a grace period."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=_TERM_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


#: Niceness given to QEMU's vCPU threads: on a host with as many cores as vCPUs they would
#: otherwise starve the plugin's writer thread (which then lags behind the guest by seconds,
#: and the end of a region waits for it) and QEMU's I/O thread (user networking, the peers'
#: traffic).
VCPU_NICE = 10


def renice_vcpu_threads(pid: int, nice: int = VCPU_NICE) -> int:
    """Lower the priority of QEMU's vCPU threads (named ``CPU n/TCG``; under single-threaded
    TCG the one ``ALL CPUs/TCG``).

    Parameters
    ----------
    pid : int
        QEMU's process id.
    nice : int
        The niceness to set (raising it needs no privilege).

    Returns
    -------
    int
        How many threads were changed (0 when none is there yet, or QEMU is gone).
    """
    changed = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0
    for t in tasks:
        try:
            if (t / "comm").read_text().startswith(("CPU ", "ALL CPUs/")):
                os.setpriority(os.PRIO_PROCESS, int(t.name), nice)
                changed += 1
        except (OSError, ValueError):
            continue
    return changed


_PR_SET_PDEATHSIG = 1
# Loaded before any fork: the child between fork and exec must not load libraries.
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _die_with(parent: int) -> Callable[[], None]:
    """A ``preexec_fn`` that has the kernel send QEMU ``SIGTERM`` when its parent (pysched)
    dies, however it dies (``SIGKILL`` included), so that no QEMU outlives a run; SIGTERM, not
    SIGKILL, so that the plugin still closes its tables."""

    def preexec() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl took effect
            os._exit(1)

    return preexec


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
    poll: Callable[[float], None] | None = None,
    env: Mapping[str, str] | None = None,
    vcpus: int = 0,
    exit_marker: bytes | None = None,
    shutdown_timeout: float = 60.0,
    started: Callable[[int], None] | None = None,
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
    poll : callable, optional
        Called with the seconds elapsed about twice a second while QEMU runs (host-side peers
        and the ROI watcher use it). An exception it raises stops QEMU and propagates.
    env : mapping, optional
        QEMU's environment (default: ours).
    exit_marker : bytes, optional
        Text the console shows when the guest is done and about to power off. Should QEMU
        still run ``shutdown_timeout`` seconds after it appeared, it is stopped like on a
        timeout (the result then has ``shutdown_hung``, not ``timed_out``).
    shutdown_timeout : float
        See ``exit_marker``.
    vcpus : int
        The number of vCPU threads to renice (:func:`renice_vcpu_threads`) once QEMU has
        created them; 0 leaves them alone.
    started : callable, optional
        Called with QEMU's pid once it runs.

    Returns
    -------
    QemuResult
        Exit status, whether it timed out or hung while booting, wall time and stderr.

    Notes
    -----
    QEMU runs in its own session (a Ctrl-C on the terminal reaches pysched only) and gets
    ``SIGTERM`` from the kernel when pysched dies. An exception in pysched while QEMU runs
    (``KeyboardInterrupt``, :class:`pysched.capture.runfiles.RunInterrupted`) stops QEMU as a
    timeout does, then propagates.
    """
    start = time.monotonic()
    # Files, not pipes: nothing has to drain them while QEMU runs. stdin is /dev/null so that
    # QEMU neither reads the terminal nor puts it in raw mode.
    with open(console, "wb") as out, open(stderr_log, "wb") as err:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
            env=dict(env) if env is not None else None, preexec_fn=_die_with(os.getpid()),
        )
        try:
            if started is not None:
                started(proc.pid)
            return _watch(proc, start, console, timeout, boot_marker, boot_timeout, poll,
                          vcpus, exit_marker, shutdown_timeout, stderr_log)
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM, a failing poll): do not leave a guest running
            # behind us, but let the plugin close its tables first.
            if proc.poll() is None:
                try:
                    _stop(proc)
                except BaseException:
                    proc.kill()
                    proc.wait()
                    raise
            raise


def _watch(proc: subprocess.Popen, start: float, console: Path, timeout: float,
           boot_marker: bytes | None, boot_timeout: float | None,
           poll: Callable[[float], None] | None, vcpus: int, exit_marker: bytes | None,
           shutdown_timeout: float, stderr_log: Path) -> QemuResult:
    """:func:`run_qemu`'s loop, from QEMU's start to its end."""
    timed_out = boot_hung = shutdown_hung = False
    exit_seen_at: float | None = None
    booted = boot_marker is None or boot_timeout is None
    # The vCPU threads exist once the machine is set up, a moment after start.
    reniced = 0
    while vcpus and reniced < vcpus and proc.poll() is None \
            and time.monotonic() - start < _RENICE_WAIT_SECONDS:
        time.sleep(0.02)
        reniced = renice_vcpu_threads(proc.pid)
    while True:
        remaining = timeout - (time.monotonic() - start)
        # Until the banner shows, wake up twice a second to look for it (the console is a few
        # kB by then); afterwards just wait for the end, unless a poll callback wants to be
        # called.
        idle = booted and poll is None and exit_marker is None
        wait = remaining if idle else min(remaining, _BOOT_POLL_SECONDS)
        try:
            proc.wait(timeout=max(0.0, wait))
            break
        except subprocess.TimeoutExpired:
            pass
        elapsed = time.monotonic() - start
        if poll is not None:
            poll(elapsed)
        if not booted:
            assert boot_marker is not None and boot_timeout is not None
            booted = _console_has(console, boot_marker)
            if not booted and elapsed >= boot_timeout:
                boot_hung = True
                _stop(proc)
                break
        if exit_marker is not None and booted:
            if exit_seen_at is None and _console_has(console, exit_marker):
                exit_seen_at = elapsed
            if exit_seen_at is not None and elapsed - exit_seen_at >= shutdown_timeout:
                shutdown_hung = True
                _stop(proc)
                break
        if elapsed >= timeout:
            timed_out = True
            _stop(proc)
            break
    wall = time.monotonic() - start
    stderr = stderr_log.read_text(errors="replace") if stderr_log.exists() else ""
    return QemuResult(proc.returncode, timed_out, wall, stderr, boot_hung, shutdown_hung)


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
    "DEFAULT_KERNEL_ARGS",
    "HARNESS_KERNEL_ARGS",
    "kernel_append",
    "MAX_RAM_MIB",
    "MAX_VCPUS",
    "CPU_MODEL",
    "QemuResult",
    "debian_devices",
    "default_plugin_path",
    "find_qemu",
    "parse_ram",
    "plugin_options",
    "qemu_argv",
    "qemu_failed_message",
    "qemu_version",
    "renice_vcpu_threads",
    "run_qemu",
]
