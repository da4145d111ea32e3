"""``pysched trace``: boot a guest under the tracing plugin and run a workload or a command.

::

    pysched trace find --out traces/find                 # a workload of the suite
    pysched trace --cmd "sysloop 1000" --out traces/s    # any command, on the Debian guest
    pysched trace --cmd "spin 20" --guest busybox --out traces/b   # the quick test guest
    pysched trace --list                                 # the workloads and their parameters

The output directory receives the plugin's tables, ``console.log`` (the guest's serial
console), ``qemu-stderr.log``, ``manifest.json`` (see :mod:`pysched.capture.manifest`),
``System.map.gz`` (the kernel's symbols) and, for the Debian guest, ``modules.map.gz`` (the
loaded modules' symbols, ``/proc/kallsyms`` lines) and ``peer.log`` when the workload has a
host-side peer.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pysched.capture import console as con
from pysched.capture import guest as gst
from pysched.capture import peers as prs
from pysched.capture import manifest as mf
from pysched.capture import qemu as qm
from pysched.capture import runfiles as rf
from pysched.capture import workloads as wl
from pysched.capture.compact import DEFAULT_LEVEL as COMPACT_LEVEL
from pysched.trace.schema import CONSOLE_LOG, QEMU_STDERR_LOG
from pysched.capture.compact import compact_trace
from pysched.capture.manifest import MANIFEST, MANIFEST_VERSION, build_manifest
from pysched.capture.monitor import RunMonitor
from pysched.capture.roiwatch import bound_shortfall, read_plugin_info

PEER_LOG = "peer.log"
SYSTEM_MAP_GZ = "System.map.gz"
MODULES_MAP_GZ = "modules.map.gz"

# Exit statuses of `pysched trace`: 1 the run failed (QEMU, guest or command), 2 it could not
# start (bad arguments, missing guest or plugin).
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2

#: Seconds after which a guest that has not reached /init is restarted. A normal boot takes
#: about 10 s (busybox) or 15 s (Debian); rarely (about 1 boot in 50 seen) the guest stops
#: silently early in boot under multi-threaded TCG, and only a restart helps.
DEFAULT_BOOT_TIMEOUT = 120.0

#: The guest's control serial port (ttyS2), on which the host says "stop".
GUEST_CONTROL_PORT = "/dev/ttyS2"

#: Free space wanted before a run: in the trace's file system, and (Debian guest) in the
#: temporary directory that holds the disk's copy-on-write overlay.
MIN_FREE_OUT_MB = 256
MIN_FREE_TMP_MB = 1024

__all__ = ["add_arguments", "run", "build_manifest", "MANIFEST_VERSION", "TraceUsageError",
           "check_out_dir", "resolve_plugin", "parse_count"]


class TraceUsageError(Exception):
    """A problem found before QEMU starts (reported with exit status 2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``pysched trace`` options to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The sub-command's parser.
    """
    parser.add_argument("workload", nargs="?", metavar="WORKLOAD",
                        help=f"a workload of the suite ({wl.known_names()}); "
                        "see --list")
    parser.add_argument("--cmd", metavar="SHELL_COMMAND",
                        help="instead of a workload: a command the guest runs with sh, inside "
                        "the region of interest")
    parser.add_argument("--list", action="store_true",
                        help="list the workloads, what they run and their parameters")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="trace directory; must be empty or not exist")
    parser.add_argument("--guest", choices=gst.GUEST_KINDS, default=None,
                        help="debian (default): the Debian image on a virtio disk; busybox: "
                        "the quick test guest (--cmd only)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="set a workload parameter (repeatable; see --list)")
    parser.add_argument("--vcpus", type=int, default=2, metavar="N",
                        help="number of guest vCPUs (default 2)")
    parser.add_argument("--ram", default="512M", metavar="SIZE",
                        help=f"guest RAM, e.g. 512M or 1G, at most {qm.MAX_RAM_MIB}M "
                        "(default 512M)")
    parser.add_argument("--roi-seconds", type=float, default=None, metavar="S",
                        help="a workload's region of interest lasts S guest seconds "
                        "(default: the workload's, see --list)")
    parser.add_argument("--roi-insns", type=parse_count, default=None, metavar="N",
                        help="end the region once every vCPU has retired N instructions in it "
                        "(suffixes K, M, G; the plugin stops each vCPU at the first block "
                        "boundary at or after N, see qemu-plugin/README.md); the Debian "
                        "guest then stops its command or workload, the busybox guest lets "
                        "its command run to its end")
    parser.add_argument("--warmup", type=float, default=wl.DEFAULT_WARMUP_SECONDS,
                        metavar="S", help="seconds a workload runs before its region opens "
                        f"(default {wl.DEFAULT_WARMUP_SECONDS:g})")
    parser.add_argument("--data-accesses", action="store_true",
                        help="also record every data load and store (plugin data=on)")
    parser.add_argument("--compact", type=int, nargs="?", const=COMPACT_LEVEL, default=None,
                        metavar="LEVEL", help="after the run, recompress the exec table at "
                        f"zstd LEVEL (default {COMPACT_LEVEL}; the plugin writes level 1): "
                        "about 1.26x smaller at 9, 1.38x at 19; see pysched/capture/compact.py")
    parser.add_argument("--kernel-args", default=None, metavar="ARGS",
                        help="the guest kernel's optional arguments (default: "
                        f"{qm.DEFAULT_KERNEL_ARGS!r}); the harness adds "
                        f"{qm.HARNESS_KERNEL_ARGS!r} after them; recorded in the manifest")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                        help="stop QEMU after this many seconds (default 600)")
    parser.add_argument("--roi", choices=("marker", "all"), default="marker",
                        help="record between the guest's roi begin/end markers (default) "
                        "or everything from boot")
    parser.add_argument("--boot-timeout", type=float, default=None, metavar="SECONDS",
                        help="restart the guest when /init has not started after this long "
                        f"(default {DEFAULT_BOOT_TIMEOUT:g}; with --roi all, no limit); 0: never")
    parser.add_argument("--boot-retries", type=int, default=2, metavar="N",
                        help="how many times to restart a guest that hung while booting "
                        "(default 2)")
    parser.add_argument("--plugin", type=Path, default=None, metavar="PATH",
                        help="plugin shared object (default qemu-plugin/build/"
                        "libpysched-trace.so)")
    # Debugging aid: boot the guest without the tracer (no tables are written).
    parser.add_argument("--no-plugin", action="store_true", help=argparse.SUPPRESS)
    # Testing aid: another guest build directory.
    parser.add_argument("--guest-dir", type=Path, default=None, help=argparse.SUPPRESS)


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
    parent = _existing_parent(out)
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


def _existing_parent(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def free_mb(path: Path) -> int:
    """Free megabytes in the file system holding ``path`` (or its nearest existing parent)."""
    return shutil.disk_usage(_existing_parent(path)).free >> 20


def check_free_space(path: Path, need_mb: int, what: str) -> None:
    """Raise :class:`TraceUsageError` naming ``path`` when its file system has less than
    ``need_mb`` MB free."""
    have = free_mb(path)
    if have < need_mb:
        raise TraceUsageError(
            f"not enough free disk space for {what}: {have} MB free in the file system of "
            f"{_existing_parent(path)}, {need_mb} MB wanted; free some space"
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
                   append=append)


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
                              Path(t) / PEER_LOG, guest.ssh_key, guest.ssh_host_key)
        try:
            prs.make_peer(workload.peer, ctx)
        except prs.PeerError as e:
            raise TraceUsageError(f"{workload.name}'s host peer: {e}") from None


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


def run_env(plan: RunPlan, args: argparse.Namespace) -> dict[str, str]:
    """The Debian guest's ``run.env`` variables for this run."""
    env = {
        "PYSCHED_MODE": "workload" if plan.workload is not None else "cmd",
        "PYSCHED_VCPUS": str(args.vcpus),
        "PYSCHED_WARMUP": f"{args.warmup:g}",
        "PYSCHED_CONTROL": GUEST_CONTROL_PORT,
    }
    if plan.roi_seconds is not None:
        env["PYSCHED_ROI_SECONDS"] = f"{plan.roi_seconds:g}"
    if plan.workload is not None:
        env["PYSCHED_WORKLOAD"] = plan.workload.name
        env["PYSCHED_SCRIPT"] = plan.workload.script_name
        env.update(wl.param_env(plan.params))
    if plan.roi_insns is not None:
        env["PYSCHED_ROI_INSNS"] = str(plan.roi_insns)
    return env


def _clear_dir(out: Path) -> None:
    """Empty the output directory before a restart (it was empty when the run began)."""
    for child in out.iterdir():
        if child.name == rf.OUT_LOCK:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _err(msg: str) -> None:
    print(f"pysched trace: {msg}", file=sys.stderr)


def _gzip_file(src: Path, dest: Path) -> None:
    """gzip ``src`` into ``dest`` reproducibly (no name, mtime 0)."""
    with open(src, "rb") as f:
        data = f.read()
    dest.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def _failure_hints(plan: RunPlan, tmp: Path) -> list[str]:
    """Notes for a failed run: a full disk is the usual hidden cause of odd failures."""
    hints = []
    for path, what in ((plan.out, "the trace"), (tmp, "the guest disk's overlay")):
        if free_mb(path) < 64:
            hints.append(f"the disk holding {what} ({_existing_parent(path)}) is full: "
                         f"{free_mb(path)} MB free")
    return hints


def run(args: argparse.Namespace) -> int:
    """Run ``pysched trace``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options (see :func:`add_arguments`).

    Returns
    -------
    int
        0 when QEMU ran, the guest reached its end and the command or workload succeeded; 1
        when the run failed (QEMU error, timeout, guest crash, non-zero status, a workload's
        success criterion not met); 2 when it could not start; 128 + the signal when stopped
        by SIGINT, SIGTERM or SIGHUP (the trace then has no manifest: it is incomplete).
    """
    if args.list:
        print(wl.describe())
        return 0
    try:
        plan = plan_run(args)
        lock = rf.claim_out_dir(plan.out)
    except (TraceUsageError, rf.OutDirError, gst.GuestNotBuiltError, FileNotFoundError) as e:
        _err(f"error: {e}")
        return EXIT_USAGE
    for d in rf.remove_stale_tmpdirs():
        _err(f"note: removed {d}, left by a run that was killed")
    try:
        with rf.signals_raise():
            return _run_claimed(plan, args)
    except TraceUsageError as e:
        _err(f"error: {e}")
        return EXIT_USAGE
    except (KeyboardInterrupt, rf.RunInterrupted) as e:
        signum = e.signum if isinstance(e, rf.RunInterrupted) else int(signal.SIGINT)
        _err(f"stopped by {signal.Signals(signum).name}: QEMU was stopped and the temporary "
             f"files removed; {plan.out} holds an incomplete trace (no {MANIFEST})")
        return 128 + signum
    finally:
        rf.release_out_dir(lock)


@dataclass
class _Boot:
    """What one run boots: the QEMU command line and the files and ports around it."""

    argv: list[str]
    symbols: Path
    control: Path
    env: dict[str, str] | None
    ports: dict[int, int]


@dataclass
class _Booted:
    """How the boot attempts went: the last one's QEMU result, the hung ones, the monitor's
    summary (peer, host stop)."""

    result: qm.QemuResult
    failed_boots: list[dict[str, Any]]
    summary: dict[str, Any]


def _run_claimed(plan: RunPlan, args: argparse.Namespace) -> int:
    """:func:`run` once the output directory is ours: boot, save, judge, write the manifest."""
    out = plan.out
    date = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    load_start = os.getloadavg()
    version = qm.qemu_version(plan.qemu)
    with rf.RunTmpDir() as tmp:
        boot = _prepare_boot(plan, args, tmp.path)
        booted = _boot(plan, args, boot, tmp)
        kernel_symbols = _save_symbols(plan.guest, boot.symbols, out)
        hints = _failure_hints(plan, tmp.path)
    if not args.data_accesses:
        _drop_empty_table(out, "mem")
    compacted = None
    if args.compact is not None and (out / "exec").is_dir():
        compacted = compact_trace(out, args.compact)
    text = con.console_text((out / CONSOLE_LOG).read_bytes())
    roi_bound, shortfall, region_open = _roi_bound_status(plan, args)
    failure = _run_failure(plan, args, booted, text, shortfall, region_open)
    outcome = _outcome(plan, failure, booted.summary, text)
    incomplete = (mf.incomplete_reason(read_plugin_info(out), args.roi, booted.result)
                  if plan.plugin is not None else "untraced run (--no-plugin): no tables")
    manifest = build_manifest(
        command=args.cmd if plan.workload is None else f"workload {plan.workload.name}",
        date=date, guest=plan.guest, qemu_version=version, plugin=plan.plugin,
        plugin_options=plan.options, vcpus=args.vcpus, ram_mib=plan.ram_mib, roi=args.roi,
        data_accesses=args.data_accesses, timeout=args.timeout, argv=boot.argv,
        result=booted.result, console_text=text, boot_timeout=plan.boot_timeout,
        failed_boots=booted.failed_boots,
        workload=plan.workload.name if plan.workload is not None else None,
        workload_summary=plan.workload.summary if plan.workload is not None else None,
        parameters=plan.params, roi_bound=roi_bound, monitor=booted.summary,
        kernel_symbols=kernel_symbols, out_dir=out, compacted=compacted,
        incomplete=incomplete, outcome=outcome,
        kernel_append=plan.append, kernel_args=plan.kernel_args,
        host=mf.host_load(load_start, os.getloadavg()),
    )
    mf.portable_plugin_info(out)
    # Last, and atomically: a trace directory with a manifest is a finished one.
    mf.write_manifest(out, manifest)
    return _report(plan, args, booted, text, outcome["failure"], shortfall, region_open, hints)


def _prepare_boot(plan: RunPlan, args: argparse.Namespace, tmp: Path) -> _Boot:
    """Write the run's initrd into ``tmp`` and make QEMU's command line."""
    guest = plan.guest
    initrd = tmp / "run.img"
    boot = _Boot(argv=[], symbols=tmp / "modules.txt", control=tmp / "control.sock", env=None,
                 ports={})
    devices: list[str] = []
    if guest.kind == "debian":
        assert guest.disk is not None
        archive = gst.debian_run_archive(run_env(plan, args), args.cmd)
        gst.write_initrd(guest.initramfs, archive, initrd)
        guest_ports = plan.workload.guest_ports if plan.workload is not None else ()
        boot.ports = dict(zip(guest_ports, prs.free_ports(len(guest_ports))))
        try:
            devices = qm.debian_devices(guest.disk, [(h, g) for g, h in boot.ports.items()],
                                        boot.symbols, boot.control)
        except ValueError as e:
            raise TraceUsageError(str(e)) from None
        # snapshot=on puts the disk's overlay in TMPDIR: ours, removed after the run.
        boot.env = {**os.environ, "TMPDIR": str(tmp)}
    else:
        gst.write_initrd(guest.initramfs, gst.cmd_archive(args.cmd), initrd)
    boot.argv = qm.qemu_argv(guest.vmlinuz, initrd, plan.ram_mib, args.vcpus, plan.plugin,
                             plan.options, plan.qemu, devices, append=plan.append)
    return boot


def _boot(plan: RunPlan, args: argparse.Namespace, boot: _Boot, tmp: rf.RunTmpDir) -> _Booted:
    """Run QEMU, restarting a guest that hangs while booting (at most ``--boot-retries``
    times)."""
    out, guest = plan.out, plan.guest
    console_path = out / CONSOLE_LOG
    what = "untraced" if plan.plugin is None else f"roi={args.roi}"
    name = plan.workload.name if plan.workload is not None else "--cmd"
    print(f"pysched trace: booting the {guest.kind} guest for {name} ({args.vcpus} vCPUs, "
          f"{plan.ram_mib}M, {what}); console in {console_path}", file=sys.stderr)
    failed_boots: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for attempt in range(1, args.boot_retries + 2):
        monitor = None
        if guest.kind == "debian":
            peer = None
            if plan.workload is not None and plan.workload.peer is not None:
                ctx = prs.PeerContext(plan.params, boot.ports, tmp.path / "peer",
                                      out / PEER_LOG, guest.ssh_key, guest.ssh_host_key)
                peer = prs.make_peer(plan.workload.peer, ctx)  # checked by plan_run
            monitor = RunMonitor(console_path, boot.control, peer, out, plan.roi_insns)
        try:
            result = qm.run_qemu(boot.argv, console_path, out / QEMU_STDERR_LOG, args.timeout,
                                 con.BEGIN_MARK.encode(), plan.boot_timeout,
                                 poll=monitor.poll if monitor is not None else None,
                                 env=boot.env, vcpus=args.vcpus,
                                 exit_marker=con.EXIT_MARK.encode(), started=tmp.add_process)
        finally:
            if monitor is not None:
                summary = monitor.finish()
        if not result.boot_hung or attempt > args.boot_retries:
            break
        text = con.console_text(console_path.read_bytes())
        failed_boots.append({"wall_seconds": round(result.wall_seconds, 3),
                             "console_tail": con.tail_lines(text, 20)})
        _err(f"warning: the guest did not reach /init within {plan.boot_timeout:g} s "
             f"(attempt {attempt}); restarting it")
        _clear_dir(out)
    return _Booted(result, failed_boots, summary)


#: The kernel image's symbols are at or above this address (``__START_KERNEL_map``); KASLR
#: moves them all by one slide. Below it are the per-CPU offsets and absolute symbols, which
#: it does not move.
_KERNEL_IMAGE = 0xFFFFFFFF80000000


def _plugin_slide(out: Path) -> int | None:
    """The kernel's virtual slide the plugin found (``plugin.json``), or None."""
    try:
        info = json.loads((out / "plugin.json").read_text())
    except (OSError, ValueError):
        return None
    k = info.get("kaslr") or {}
    return int(k["virtual_slide"]) if k.get("found") else None


def _moved_system_map(src: Path, slide: int) -> bytes:
    """``src`` (System.map lines ``ADDRESS TYPE NAME``) with the kernel image's symbols moved
    by ``slide``: the running kernel's addresses, as its ``/proc/kallsyms`` gives them."""
    lines = []
    for line in src.read_text().splitlines():
        f = line.split(maxsplit=1)
        try:
            a = int(f[0], 16)
        except (ValueError, IndexError):
            lines.append(line)
            continue
        if a >= _KERNEL_IMAGE:
            a = (a + slide) % 2**64
        lines.append(f"{a:016x} {f[1] if len(f) > 1 else ''}".rstrip())
    return ("\n".join(lines) + "\n").encode()


def write_running_map(sysmap: str | Path, trace_dir: str | Path) -> Path:
    """Write ``TRACE_DIR/System.map.gz``: ``sysmap`` (a ``System.map`` or a saved
    ``/proc/kallsyms``; module lines are left out) moved by the slide the plugin found
    (``plugin.json``), for a trace recorded by running QEMU with the plugin directly.

    Raises
    ------
    ValueError
        When ``plugin.json`` says the slide was not found (the message names the file).
    """
    sysmap, trace_dir = Path(sysmap), Path(trace_dir)
    info = json.loads((trace_dir / "plugin.json").read_text())
    k = info.get("kaslr") or {}
    if not k.get("found"):
        raise ValueError(f"{trace_dir / 'plugin.json'}: the plugin did not find the kernel's "
                         f"slide ({k.get('reason') or 'no kaslr record'})")
    kept = [ln for ln in sysmap.read_text().splitlines() if not ln.rstrip().endswith("]")]
    tmp = trace_dir / ".System.map.tmp"
    tmp.write_text("\n".join(kept) + "\n")
    try:
        data = _moved_system_map(tmp, int(k["virtual_slide"]))
    finally:
        tmp.unlink()
    out = trace_dir / SYSTEM_MAP_GZ
    out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return out


def _map_address(src: Path, name: str) -> int | None:
    for line in src.read_text().splitlines():
        f = line.split()
        if len(f) >= 3 and f[2] == name:
            return int(f[0], 16)
    return None


def _save_symbols(guest: gst.GuestImage, symbols: Path, out: Path) -> dict[str, Any]:
    """Write the kernel's and the modules' symbols into the trace (gzip); their file names.

    ``System.map.gz`` holds the running kernel's addresses: the guest's ``System.map`` moved
    by the slide the plugin found (KASLR; 0 with ``nokaslr``). The Debian guest sends its
    ``/proc/kallsyms`` lines of the modules and of ``_stext``; the latter checks the slide
    (``slide_kallsyms``: the slide that ``_stext`` gives, to compare with ``slide``).
    """
    kernel_symbols: dict[str, Any] = {"system_map": None, "modules": None, "slide": None,
                                      "slide_kallsyms": None}
    slide = _plugin_slide(out)
    if guest.system_map.is_file():
        data = (_moved_system_map(guest.system_map, slide) if slide
                else guest.system_map.read_bytes())
        (out / SYSTEM_MAP_GZ).write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
        kernel_symbols["system_map"] = SYSTEM_MAP_GZ
        kernel_symbols["slide"] = slide
    if symbols.is_file() and symbols.stat().st_size > 0:
        modules, kernel = [], []
        for line in symbols.read_text(errors="replace").splitlines():
            (modules if line.rstrip().endswith("]") else kernel).append(line)
        stext = _map_address(guest.system_map, "_stext") if guest.system_map.is_file() else None
        for line in kernel:
            f = line.split()
            if len(f) == 3 and f[2] == "_stext" and stext is not None:
                kernel_symbols["slide_kallsyms"] = (int(f[0], 16) - stext) % 2**64
        if modules:
            tmp = out / ".modules.txt"
            tmp.write_text("\n".join(modules) + "\n")
            _gzip_file(tmp, out / MODULES_MAP_GZ)
            tmp.unlink()
            kernel_symbols["modules"] = MODULES_MAP_GZ
    return kernel_symbols


def _drop_empty_table(out: Path, table: str) -> None:
    """Remove a table folder that the plugin created but left empty (``mem/`` without
    ``--data-accesses``: the plugin makes every table's folder when it starts)."""
    d = out / table
    if d.is_dir() and not d.is_symlink() and not any(d.iterdir()):
        d.rmdir()


def _roi_bound_status(plan: RunPlan, args: argparse.Namespace
                      ) -> tuple[dict[str, Any], dict[str, int] | None, bool]:
    """The manifest's ``roi_bound``; with ``--roi-insns``, the vCPUs short of it and whether
    the region was still open."""
    shortfall = None
    region_open = False
    if plan.roi_insns is not None:
        info = read_plugin_info(plan.out)
        shortfall = bound_shortfall(info, plan.roi_insns)
        region_open = bool(info and info.get("recording"))
    roi_bound = {"seconds": plan.roi_seconds, "insns_per_vcpu": plan.roi_insns,
                 "warmup_seconds": args.warmup if plan.workload is not None else None,
                 "insns_bound_reached": (None if shortfall is None else not shortfall)}
    return roi_bound, shortfall, region_open


_WORKLOAD_MESSAGE_RE = re.compile(r"^workload: (.*)$", re.M)


def _run_failure(plan: RunPlan, args: argparse.Namespace, booted: _Booted, text: str,
                 shortfall: dict[str, int] | None, region_open: bool) -> str | None:
    """Why the run failed, from QEMU's end and the console; None when it did not."""
    result = booted.result
    status = con.guest_exit_status(text)
    if result.boot_hung:
        return (f"the guest did not reach /init within {plan.boot_timeout:g} s, "
                f"{len(booted.failed_boots) + 1} times; QEMU was stopped")
    if result.timed_out:
        failure = f"timed out after {args.timeout:g} s; QEMU was stopped"
        if con.BEGIN_MARK not in text:
            failure += " (the guest never reached /init: it hung while booting)"
        elif shortfall:
            failure += "; " + _shortfall_text(plan.roi_insns or 0, shortfall, region_open)
        return failure
    if result.returncode != 0 and not result.shutdown_hung:
        return qm.qemu_failed_message(result)
    if status is None:
        stage1 = re.search(r"=== PYSCHED STAGE1 FAILED: (.*) ===", text)
        if stage1:
            return f"the guest's stage 1 failed: {stage1.group(1)}"
        return ("the guest did not reach its end (no '=== PYSCHED EXIT' line on the "
                "console): it crashed or powered off early")
    if status != 0:
        if plan.workload is None:
            return f"the command exited with status {status} in the guest"
        said = _WORKLOAD_MESSAGE_RE.findall(con.guest_messages(text))
        return (f"the workload exited with status {status} in the guest"
                + (f": {said[-1].strip()}" if said else ""))
    return None


def _outcome(plan: RunPlan, failure: str | None, summary: dict[str, Any],
             text: str) -> dict[str, Any]:
    """The manifest's ``outcome``: the run's failure, or the workload's success criterion
    judged (the guest's part by its exit status, the host peer's by
    :func:`pysched.capture.peers.peer_failure`)."""
    criterion = met = None
    if plan.workload is not None:
        criterion = plan.workload.criterion
        peer = summary.get("peer") if summary else None
        log = ""
        if peer is not None and (plan.out / PEER_LOG).is_file():
            log = (plan.out / PEER_LOG).read_text(errors="replace")
        peer_failed = prs.peer_failure(peer, log, plan.params) if failure is None else None
        if peer_failed is not None:
            failure = f"{plan.workload.name}: {peer_failed} (success: {criterion})"
        met = failure is None if con.guest_exit_status(text) is not None else None
    return {"status": "ok" if failure is None else "failed", "failure": failure,
            "criterion": criterion, "criterion_met": met}


def _report(plan: RunPlan, args: argparse.Namespace, booted: _Booted, text: str,
            failure: str | None, shortfall: dict[str, int] | None, region_open: bool,
            hints: list[str]) -> int:
    """Tell the user how the run went; the exit status."""
    result = booted.result
    if shortfall and not result.timed_out:
        _err("warning: " + _shortfall_text(plan.roi_insns or 0, shortfall, region_open))
    if result.shutdown_hung:
        _err("warning: the guest did not power off after it was done; QEMU was stopped "
             "(the trace is complete: the region had ended)")
    if failure is not None:
        _report_failure(text, plan.out / CONSOLE_LOG, result, plan.out, booted.summary)
        for h in hints:
            _err(f"note: {h}")
        _err(f"error: {failure}")
        return EXIT_RUN_FAILED
    print(f"pysched trace: done in {result.wall_seconds:.1f} s; trace in {plan.out}",
          file=sys.stderr)
    return 0


def _shortfall_text(bound: int, shortfall: dict[str, int], open_region: bool) -> str:
    """Which vCPUs fell short of ``--roi-insns``, and what to do about it."""
    short = ", ".join(f"vCPU {v} {n:,}" for v, n in shortfall.items())
    if open_region:
        head = (f"the region was still open: --roi-insns waits for every vCPU to retire "
                f"{bound:,} instructions in it, and some had fewer ({short})")
    else:
        head = (f"the region ended before every vCPU retired --roi-insns {bound:,} "
                "instructions in it (the command, the workload, its host peer or the guest's "
                f"time limit ended it first): {short}")
    return head + ("; a vCPU that stays idle retires few: lower --roi-insns, use fewer "
                   "--vcpus, or give more --timeout")


def _report_failure(text: str, console_path: Path, result: qm.QemuResult, out: Path,
                    summary: dict[str, Any]) -> None:
    """Show what the guest (and the peer) printed, for a failed run."""
    # A workload prints before and after its region, so show the guest's messages without
    # the /proc snapshots rather than only the region's output.
    messages = con.guest_messages(text) if con.BEGIN_MARK in text else text
    if messages.strip():
        _err(f"last lines the guest printed ({console_path}):\n{con.tail_lines(messages, 40)}")
    peer = summary.get("peer") if summary else None
    if peer is not None and (out / PEER_LOG).is_file():
        log = (out / PEER_LOG).read_text(errors="replace")
        if log.strip():
            _err(f"the host peer's log ({out / PEER_LOG}):\n{con.tail_lines(log, 15)}")
    if result.stderr.strip() and result.returncode == 0:
        _err(f"QEMU stderr:\n{result.stderr.strip()}")
