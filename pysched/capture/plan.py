"""``pysched trace``'s run planning: the options checked (every bad one named, before anything
is created or booted), the output directory, the plugin, the guest and QEMU found, and the plan
the run follows (:class:`RunPlan`).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pysched.capture import clock as gclock
from pysched.capture import guest as gst
from pysched.capture import peers as prs
from pysched.capture import qemu as qm
from pysched.capture import workloads as wl

#: Seconds after which a guest that has not reached /init is restarted. A normal boot takes
#: about 10 s (busybox) or 15 s (Debian); rarely (about 1 boot in 50 seen) the guest stops
#: silently early in boot under multi-threaded TCG, and only a restart helps.
DEFAULT_BOOT_TIMEOUT = 120.0

#: Free space wanted before a run: in the trace's file system, and (Debian guest) in the
#: temporary directory that holds the disk's copy-on-write overlay.
MIN_FREE_OUT_MB = 256

MIN_FREE_TMP_MB = 1024


class TraceUsageError(Exception):
    """A problem found before QEMU starts (reported with exit status 2)."""


#: Largest instruction count: the plugin keeps counts in signed 64-bit integers.
MAX_COUNT = 2**63 - 1

_COUNT_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*")


def parse_count(text: str) -> int:
    """Parse an instruction count such as ``120M``, ``1.5G`` or ``6000000``.

    Raises
    ------
    argparse.ArgumentTypeError
        When malformed or not positive.
    """
    m = _COUNT_RE.fullmatch(text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad count {text!r}: use e.g. 120M or 6000000")
    n = int(float(m.group(1)) * {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}[m.group(2).lower()])
    if n <= 0:
        raise argparse.ArgumentTypeError(f"bad count {text!r}: must be positive")
    if n > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"bad count {text!r}: at most {MAX_COUNT:,}")
    return n


def check_out_dir(out: Path) -> Path:
    """Check that the output directory is usable: it must be empty or not exist.

    Parameters
    ----------
    out : Path
        The requested directory.

    Returns
    -------
    Path
        Its absolute path.

    Raises
    ------
    TraceUsageError
        When it is a file, a non-empty directory, or cannot be created or written; the message
        names it.
    """
    out = out.expanduser().absolute()
    try:
        if out.exists():
            if not out.is_dir():
                raise TraceUsageError(f"output path {out} exists and is not a directory")
            if any(out.iterdir()):
                raise TraceUsageError(
                    f"output directory {out} is not empty; choose a new directory or empty it"
                )
    except PermissionError as e:
        raise TraceUsageError(f"cannot read the output directory {out}: {e.strerror}") from None
    parent = existing_parent(out)
    if not parent.is_dir():
        raise TraceUsageError(f"cannot create the output directory {out}: {parent} is not a "
                              "directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise TraceUsageError(f"cannot create the output directory {out}: {parent} is not "
                              "writable")
    return out


def resolve_plugin(path: Path | None) -> Path:
    """The plugin to load: ``path`` or the default build, which must exist.

    Raises
    ------
    TraceUsageError
        When the file is missing.
    """
    plugin = (path if path is not None else qm.default_plugin_path()).expanduser().absolute()
    if not plugin.is_file():
        if path is None:
            raise TraceUsageError(f"plugin not built: run make -C qemu-plugin ({plugin} missing)")
        raise TraceUsageError(f"plugin {plugin} not found")
    return plugin


def existing_parent(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def free_mb(path: Path) -> int:
    """Free megabytes in the file system holding ``path`` (or its nearest existing parent)."""
    return shutil.disk_usage(existing_parent(path)).free >> 20


def check_free_space(path: Path, need_mb: int, what: str) -> None:
    """Raise :class:`TraceUsageError` naming ``path`` when its file system has less than
    ``need_mb`` MB free."""
    have = free_mb(path)
    if have < need_mb:
        raise TraceUsageError(
            f"not enough free disk space for {what}: {have} MB free in the file system of "
            f"{existing_parent(path)}, {need_mb} MB wanted; free some space"
        )


@dataclass
class RunPlan:
    """A checked ``pysched trace`` request."""

    out: Path
    guest: gst.GuestImage
    qemu: str
    plugin: Path | None
    options: str | None
    ram_mib: int
    boot_timeout: float | None
    workload: wl.Workload | None = None
    params: dict[str, str] = field(default_factory=dict)
    roi_seconds: float | None = None
    roi_insns: int | None = None
    kernel_args: str = qm.DEFAULT_KERNEL_ARGS
    append: str = qm.KERNEL_APPEND
    clock: gclock.GuestClock = gclock.GuestClock("host", 1)
    kernel_hz: int | None = None
    region_deadline: float | None = None


def plan_run(args: argparse.Namespace) -> RunPlan:
    """Check the arguments and find the guest, QEMU and the plugin.

    Raises
    ------
    TraceUsageError
        For any bad argument (the message says which), an unknown workload (it lists the known
        ones), too little disk space.
    pysched.capture.guest.GuestNotBuiltError
        When the guest is not built.
    FileNotFoundError
        When QEMU is missing.
    """
    workload = _check_request(args)
    check_numbers(args, workload)
    clock = _guest_clock(args)
    kernel_args = getattr(args, "kernel_args", None)
    try:
        append = qm.kernel_append(kernel_args)
    except ValueError as e:
        raise TraceUsageError(str(e)) from None
    params = _workload_params(workload, args.param)
    out = check_out_dir(args.out)
    try:
        ram_mib = qm.parse_ram(args.ram)
    except ValueError as e:
        raise TraceUsageError(f"--ram: {e}") from None
    guest = gst.locate(args.guest or "debian", args.guest_dir)
    qemu = qm.find_qemu()
    try:
        gclock.check_qemu_accepts(qemu, clock)
    except ValueError as e:
        raise TraceUsageError(str(e)) from None
    plugin = None if args.no_plugin else resolve_plugin(args.plugin)
    options = _plugin_options(args, plugin, out, guest, ram_mib)
    if workload is not None and workload.peer is not None:
        _check_peer(workload, params, guest)
    check_free_space(out, MIN_FREE_OUT_MB, f"the trace in {out}")
    if guest.kind == "debian":
        check_free_space(Path(tempfile.gettempdir()), MIN_FREE_TMP_MB,
                         "the guest disk's copy-on-write overlay (set TMPDIR to move it)")
    return RunPlan(out=out, guest=guest, qemu=qemu, plugin=plugin, options=options,
                   ram_mib=ram_mib, boot_timeout=_boot_timeout(args), workload=workload,
                   params=params, roi_seconds=_roi_seconds(args, workload, guest.kind),
                   roi_insns=args.roi_insns,
                   kernel_args=qm.DEFAULT_KERNEL_ARGS if kernel_args is None else kernel_args,
                   append=append, clock=clock,
                   kernel_hz=gclock.kernel_hz(guest.vmlinuz.parent / "kernel-config"),
                   region_deadline=_region_deadline(args, clock, guest.kind))


def _check_request(args: argparse.Namespace) -> wl.Workload | None:
    """What to run: the workload (None for ``--cmd``), after checking that the options that go
    with one or the other fit."""
    if args.workload is None and args.cmd is None:
        raise TraceUsageError("name a workload or give --cmd; workloads: " + wl.known_names())
    if args.workload is not None and args.cmd is not None:
        raise TraceUsageError("give either a workload or --cmd, not both")
    if args.out is None:
        raise TraceUsageError("--out DIR is required")
    workload = None
    if args.workload is not None:
        try:
            workload = wl.get(args.workload)
        except wl.UnknownWorkloadError as e:
            raise TraceUsageError(str(e)) from None
    if args.guest == "busybox" and workload is not None:
        raise TraceUsageError("the workloads run on the Debian guest; --guest busybox "
                              "takes --cmd only")
    if args.param and workload is None:
        raise TraceUsageError("--param sets a workload's parameters; --cmd runs take none")
    if args.roi_seconds is not None and workload is None:
        raise TraceUsageError("--roi-seconds bounds a workload's region; a --cmd region is "
                              "the command (bound it with --roi-insns)")
    if args.roi_insns is not None and (args.roi == "all" or args.no_plugin):
        raise TraceUsageError("--roi-insns counts the recorded region: it needs the plugin "
                              "and --roi marker")
    return workload


#: Most boot restarts ``--boot-retries`` allows.
MAX_BOOT_RETRIES = 20


def _finite(name: str, value: float | None, low: float, *, low_ok: bool) -> None:
    """Raise :class:`TraceUsageError` naming ``name`` unless ``value`` is None or a finite
    number above ``low`` (or equal to it, with ``low_ok``)."""
    if value is None:
        return
    if not math.isfinite(value):
        raise TraceUsageError(f"{name} must be a finite number of seconds (got {value})")
    if value < low or (value == low and not low_ok):
        bound = f"at least {low:g}" if low_ok else ("positive" if low == 0 else f"above {low:g}")
        raise TraceUsageError(f"{name} must be {bound} (got {value:g})")


def check_numbers(args: argparse.Namespace, workload: wl.Workload | None = None) -> None:
    """Check every numeric option: finite, and within what the machine and the run support.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options.
    workload : Workload, optional
        The workload, whose default region length counts against ``--timeout``.

    Raises
    ------
    TraceUsageError
        Naming the first bad option and the range it must be in.
    """
    if not 1 <= args.vcpus <= qm.MAX_VCPUS:
        raise TraceUsageError(f"--vcpus must be 1-{qm.MAX_VCPUS} (got {args.vcpus}): QEMU's "
                              "q35 machine gives this CPU model at most that many")
    _finite("--timeout", args.timeout, 0, low_ok=False)
    _finite("--boot-timeout", args.boot_timeout, 0, low_ok=True)
    _finite("--roi-seconds", args.roi_seconds, 0, low_ok=False)
    _finite("--warmup", args.warmup, 0, low_ok=True)
    if not 0 <= args.boot_retries <= MAX_BOOT_RETRIES:
        raise TraceUsageError(f"--boot-retries must be 0-{MAX_BOOT_RETRIES} "
                              f"(got {args.boot_retries})")
    if args.compact is not None and not 1 <= args.compact <= 22:
        raise TraceUsageError(f"--compact: the zstd level must be 1-22 (got {args.compact})")
    if workload is not None:
        region = args.roi_seconds if args.roi_seconds is not None else workload.roi_seconds
        if args.roi_insns is None and args.warmup + region >= args.timeout:
            raise TraceUsageError(
                f"--warmup {args.warmup:g} s and the region's {region:g} s do not fit in "
                f"--timeout {args.timeout:g} s (the guest also needs time to boot and set up)")
        if args.roi_insns is not None and args.warmup >= args.timeout / 2:
            raise TraceUsageError(f"--warmup {args.warmup:g} s leaves no time for the region "
                                  f"within --timeout {args.timeout:g} s")


def _workload_params(workload: wl.Workload | None, assignments: list[str]) -> dict[str, str]:
    """The workload's parameters with ``--param`` applied (empty for ``--cmd``)."""
    if workload is None:
        return {}
    try:
        return wl.parse_params(workload, assignments)
    except ValueError as e:
        raise TraceUsageError(str(e)) from None


def _boot_timeout(args: argparse.Namespace) -> float | None:
    """The boot watchdog's limit (None: off)."""
    if args.boot_timeout is None:
        # Under roi=all the boot itself is traced and far slower: no default limit.
        return None if args.roi == "all" else DEFAULT_BOOT_TIMEOUT
    return args.boot_timeout if args.boot_timeout > 0 else None


def _plugin_options(args: argparse.Namespace, plugin: Path | None, out: Path,
                    guest: gst.GuestImage, ram_mib: int) -> str | None:
    """The plugin's option string (None for an untraced run)."""
    if plugin is None:
        return None
    try:
        return qm.plugin_options(out, guest.system_map.absolute(), ram_mib, args.data_accesses,
                                 args.roi, args.roi_insns)
    except ValueError as e:
        raise TraceUsageError(str(e)) from None


def _check_peer(workload: wl.Workload, params: dict[str, str], guest: gst.GuestImage) -> None:
    """Build the workload's peer once in a scratch directory, so that a missing host program
    or a bad parameter is reported before anything is written."""
    assert workload.peer is not None
    with tempfile.TemporaryDirectory(prefix="pysched-peer-") as t:
        ctx = prs.PeerContext(params, {p: 1 for p in workload.guest_ports}, Path(t),
                              Path(t) / prs.PEER_LOG, guest.ssh_key, guest.ssh_host_key)
        try:
            prs.make_peer(workload.peer, ctx)
        except prs.PeerError as e:
            raise TraceUsageError(f"{workload.name}'s host peer: {e}") from None


def _guest_clock(args: argparse.Namespace) -> gclock.GuestClock:
    """``--clock`` and ``--insn-rate`` checked against ``--vcpus``."""
    try:
        return gclock.guest_clock(getattr(args, "clock", gclock.DEFAULT_CLOCK),
                                  getattr(args, "insn_rate", None), args.vcpus)
    except ValueError as e:
        raise TraceUsageError(str(e)) from None


def _region_deadline(args: argparse.Namespace, clock: gclock.GuestClock,
                     guest_kind: str) -> float | None:
    """Seconds of the run after which the host ends a region the ``--roi-insns`` bound has not
    ended (None: no such deadline). On the instruction clock the guest's own backstop
    (:func:`_roi_seconds`) counts guest seconds, which pass several times slower than the host's
    while the guest is busy: a vCPU that stays idle would hold the region open until the
    timeout killed the run, so the host says ``stop`` at half the timeout instead."""
    if args.roi_insns is None or clock.source != "insns" or guest_kind != "debian":
        return None
    return args.timeout / 2


def _roi_seconds(args: argparse.Namespace, workload: wl.Workload | None,
                 guest_kind: str) -> float | None:
    """The guest's time bound on the region (None for a ``--cmd`` run without one)."""
    roi_seconds = None
    if workload is not None:
        roi_seconds = args.roi_seconds if args.roi_seconds is not None else workload.roi_seconds
    if args.roi_insns is not None and args.roi_seconds is None and guest_kind == "debian":
        # The instruction bound decides; the guest's clock is only a backstop, so that a vCPU
        # that stays idle cannot hold the region open until the timeout kills the run.
        roi_seconds = args.timeout / 2
    return roi_seconds


__all__ = ["DEFAULT_BOOT_TIMEOUT", "MAX_BOOT_RETRIES", "MAX_COUNT", "RunPlan", "TraceUsageError",
           "check_free_space", "check_numbers", "check_out_dir", "existing_parent", "free_mb",
           "parse_count", "plan_run", "resolve_plugin"]
