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
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pysched.capture import console as con
from pysched.capture import guest as gst
from pysched.capture import peers as prs
from pysched.capture import qemu as qm
from pysched.capture import workloads as wl
from pysched.capture.compact import DEFAULT_LEVEL as COMPACT_LEVEL
from pysched.capture.compact import compact_trace
from pysched.capture.manifest import MANIFEST_VERSION, build_manifest
from pysched.capture.monitor import RunMonitor
from pysched.capture.roiwatch import bound_shortfall, read_plugin_info

CONSOLE_LOG = "console.log"
QEMU_STDERR_LOG = "qemu-stderr.log"
MANIFEST = "manifest.json"
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
        When it is a file or a non-empty directory; the message names it.
    """
    out = out.expanduser().absolute()
    if out.exists():
        if not out.is_dir():
            raise TraceUsageError(f"output path {out} exists and is not a directory")
        if any(out.iterdir()):
            raise TraceUsageError(
                f"output directory {out} is not empty; choose a new directory or empty it"
            )
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
    kind = args.guest or "debian"
    if kind == "busybox":
        if workload is not None:
            raise TraceUsageError("the workloads run on the Debian guest; --guest busybox "
                                  "takes --cmd only")
    if args.param and workload is None:
        raise TraceUsageError("--param sets a workload's parameters; --cmd runs take none")
    if args.roi_seconds is not None and workload is None:
        raise TraceUsageError("--roi-seconds bounds a workload's region; a --cmd region is "
                              "the command (bound it with --roi-insns)")
    if args.roi_seconds is not None and args.roi_seconds <= 0:
        raise TraceUsageError(f"--roi-seconds must be positive (got {args.roi_seconds:g})")
    if args.warmup < 0:
        raise TraceUsageError(f"--warmup must be at least 0 (got {args.warmup:g})")
    if args.compact is not None and not 1 <= args.compact <= 22:
        raise TraceUsageError(f"--compact: the zstd level must be 1-22 (got {args.compact})")
    if args.roi_insns is not None and (args.roi == "all" or args.no_plugin):
        raise TraceUsageError("--roi-insns counts the recorded region: it needs the plugin "
                              "and --roi marker")
    params: dict[str, str] = {}
    if workload is not None:
        try:
            params = wl.parse_params(workload, args.param)
        except ValueError as e:
            raise TraceUsageError(str(e)) from None
    out = check_out_dir(args.out)
    if args.vcpus < 1:
        raise TraceUsageError(f"--vcpus must be at least 1 (got {args.vcpus})")
    if args.timeout <= 0:
        raise TraceUsageError(f"--timeout must be positive (got {args.timeout})")
    if args.boot_retries < 0:
        raise TraceUsageError(f"--boot-retries must be at least 0 (got {args.boot_retries})")
    boot_timeout = args.boot_timeout
    if boot_timeout is None:
        # Under roi=all the boot itself is traced and far slower: no default limit.
        boot_timeout = None if args.roi == "all" else DEFAULT_BOOT_TIMEOUT
    elif boot_timeout <= 0:
        boot_timeout = None
    try:
        ram_mib = qm.parse_ram(args.ram)
    except ValueError as e:
        raise TraceUsageError(f"--ram: {e}") from None
    guest = gst.locate(kind, args.guest_dir)
    qemu = qm.find_qemu()
    plugin = None if args.no_plugin else resolve_plugin(args.plugin)
    options = None
    if plugin is not None:
        try:
            options = qm.plugin_options(out, guest.system_map.absolute(), ram_mib,
                                        args.data_accesses, args.roi, args.roi_insns)
        except ValueError as e:
            raise TraceUsageError(str(e)) from None
    if workload is not None and workload.peer is not None:
        # Build the peer once in a scratch directory: a missing host program or a bad
        # parameter is reported now, before anything is written.
        with tempfile.TemporaryDirectory(prefix="pysched-peer-") as t:
            ctx = prs.PeerContext(params, {p: 1 for p in workload.guest_ports}, Path(t),
                                  Path(t) / PEER_LOG, guest.ssh_key, guest.ssh_host_key)
            try:
                prs.make_peer(workload.peer, ctx)
            except prs.PeerError as e:
                raise TraceUsageError(f"{workload.name}'s host peer: {e}") from None
    check_free_space(out, MIN_FREE_OUT_MB, f"the trace in {out}")
    if guest.kind == "debian":
        check_free_space(Path(tempfile.gettempdir()), MIN_FREE_TMP_MB,
                         "the guest disk's copy-on-write overlay (set TMPDIR to move it)")
    roi_seconds = None
    if workload is not None:
        roi_seconds = args.roi_seconds if args.roi_seconds is not None else workload.roi_seconds
    if args.roi_insns is not None and args.roi_seconds is None and guest.kind == "debian":
        # The instruction bound decides; the guest's clock is only a backstop, so that a vCPU
        # that stays idle cannot hold the region open until the timeout kills the run.
        roi_seconds = args.timeout / 2
    return RunPlan(out=out, guest=guest, qemu=qemu, plugin=plugin, options=options,
                   ram_mib=ram_mib, boot_timeout=boot_timeout, workload=workload,
                   params=params, roi_seconds=roi_seconds, roi_insns=args.roi_insns)


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
        0 when QEMU ran, the guest reached its end and the command or workload exited 0; 1
        when the run failed (QEMU error, timeout, guest crash, non-zero status); 2 when it
        could not start.
    """
    if args.list:
        print(wl.describe())
        return 0
    try:
        plan = plan_run(args)
    except (TraceUsageError, gst.GuestNotBuiltError, FileNotFoundError) as e:
        _err(f"error: {e}")
        return EXIT_USAGE

    out = plan.out
    guest = plan.guest
    out.mkdir(parents=True, exist_ok=True)
    date = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    version = qm.qemu_version(plan.qemu)
    console_path = out / CONSOLE_LOG
    failed_boots: list[dict[str, Any]] = []
    command = args.cmd if plan.workload is None else f"workload {plan.workload.name}"
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pysched-trace-") as tmp_name:
        tmp = Path(tmp_name)
        initrd = tmp / "run.img"
        symbols = tmp / "modules.txt"
        control = tmp / "control.sock"
        qemu_env = None
        ports: dict[int, int] = {}
        if guest.kind == "debian":
            assert guest.disk is not None
            archive = gst.debian_run_archive(run_env(plan, args), args.cmd)
            gst.write_initrd(guest.initramfs, archive, initrd)
            guest_ports = plan.workload.guest_ports if plan.workload is not None else ()
            ports = dict(zip(guest_ports, prs.free_ports(len(guest_ports))))
            try:
                devices = qm.debian_devices(guest.disk, [(h, g) for g, h in ports.items()],
                                            symbols, control)
            except ValueError as e:
                _err(f"error: {e}")
                return EXIT_USAGE
            # snapshot=on puts the disk's overlay in TMPDIR: ours, removed after the run.
            qemu_env = {**os.environ, "TMPDIR": str(tmp)}
        else:
            gst.write_initrd(guest.initramfs, gst.cmd_archive(args.cmd), initrd)
            devices = []
        argv = qm.qemu_argv(guest.vmlinuz, initrd, plan.ram_mib, args.vcpus, plan.plugin,
                            plan.options, plan.qemu, devices)
        what = "untraced" if plan.plugin is None else f"roi={args.roi}"
        name = plan.workload.name if plan.workload is not None else "--cmd"
        print(f"pysched trace: booting the {guest.kind} guest for {name} ({args.vcpus} vCPUs, "
              f"{plan.ram_mib}M, {what}); console in {console_path}", file=sys.stderr)
        for attempt in range(1, args.boot_retries + 2):
            monitor = None
            if guest.kind == "debian":
                peer = None
                if plan.workload is not None and plan.workload.peer is not None:
                    ctx = prs.PeerContext(plan.params, ports, tmp / "peer", out / PEER_LOG,
                                          guest.ssh_key, guest.ssh_host_key)
                    peer = prs.make_peer(plan.workload.peer, ctx)  # checked by plan_run
                monitor = RunMonitor(console_path, control, peer, out, plan.roi_insns)
            try:
                result = qm.run_qemu(argv, console_path, out / QEMU_STDERR_LOG, args.timeout,
                                     con.BEGIN_MARK.encode(), plan.boot_timeout,
                                     poll=monitor.poll if monitor is not None else None,
                                     env=qemu_env, vcpus=args.vcpus,
                                     exit_marker=con.EXIT_MARK.encode())
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

        kernel_symbols: dict[str, str | None] = {"system_map": None, "modules": None}
        if guest.system_map.is_file():
            _gzip_file(guest.system_map, out / SYSTEM_MAP_GZ)
            kernel_symbols["system_map"] = SYSTEM_MAP_GZ
        if symbols.is_file() and symbols.stat().st_size > 0:
            _gzip_file(symbols, out / MODULES_MAP_GZ)
            kernel_symbols["modules"] = MODULES_MAP_GZ
        hints = _failure_hints(plan, tmp)

    compacted = None
    if args.compact is not None and (out / "exec").is_dir():
        compacted = compact_trace(out, args.compact)
    text = con.console_text(console_path.read_bytes())
    shortfall = None
    region_open = False
    if plan.roi_insns is not None:
        info = read_plugin_info(out)
        shortfall = bound_shortfall(info, plan.roi_insns)
        region_open = bool(info and info.get("recording"))
    roi_bound = {"seconds": plan.roi_seconds, "insns_per_vcpu": plan.roi_insns,
                 "warmup_seconds": args.warmup if plan.workload is not None else None,
                 "insns_bound_reached": (None if shortfall is None else not shortfall)}
    manifest = build_manifest(
        command=command, date=date, guest=guest, qemu_version=version, plugin=plan.plugin,
        plugin_options=plan.options, vcpus=args.vcpus, ram_mib=plan.ram_mib, roi=args.roi,
        data_accesses=args.data_accesses, timeout=args.timeout, argv=argv, result=result,
        console_text=text, boot_timeout=plan.boot_timeout, failed_boots=failed_boots,
        workload=plan.workload.name if plan.workload is not None else None,
        workload_summary=plan.workload.summary if plan.workload is not None else None,
        parameters=plan.params, roi_bound=roi_bound, monitor=summary,
        kernel_symbols=kernel_symbols, out_dir=out, compacted=compacted,
    )
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")

    status = manifest["guest_exit_status"]
    failure = None
    if result.boot_hung:
        failure = (f"the guest did not reach /init within {plan.boot_timeout:g} s, "
                   f"{len(failed_boots) + 1} times; QEMU was stopped")
    elif result.timed_out:
        failure = f"timed out after {args.timeout:g} s; QEMU was stopped"
        if con.BEGIN_MARK not in text:
            failure += " (the guest never reached /init: it hung while booting)"
        elif shortfall:
            failure += "; " + _shortfall_text(plan.roi_insns or 0, shortfall, region_open)
    elif result.returncode != 0 and not result.shutdown_hung:
        failure = qm.qemu_failed_message(result)
    elif status is None:
        failure = ("the guest did not reach its end (no '=== PYSCHED EXIT' line on the "
                   "console): it crashed or powered off early")
        stage1 = re.search(r"=== PYSCHED STAGE1 FAILED: (.*) ===", text)
        if stage1:
            failure = f"the guest's stage 1 failed: {stage1.group(1)}"
    elif status != 0:
        what = "workload" if plan.workload is not None else "command"
        failure = f"the {what} exited with status {status} in the guest"
    if shortfall and not result.timed_out:
        _err("warning: " + _shortfall_text(plan.roi_insns or 0, shortfall, region_open))
    if result.shutdown_hung:
        _err("warning: the guest did not power off after it was done; QEMU was stopped "
             "(the trace is complete: the region had ended)")
    if failure is not None:
        _report_failure(text, console_path, result, out, summary)
        for h in hints:
            _err(f"note: {h}")
        _err(f"error: {failure}")
        return EXIT_RUN_FAILED
    print(f"pysched trace: done in {result.wall_seconds:.1f} s; trace in {out}", file=sys.stderr)
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
