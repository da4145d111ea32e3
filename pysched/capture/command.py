"""``pysched trace``: boot the test guest under the tracing plugin and run one command.

::

    pysched trace --cmd "/bin/sysloop 1000" --out traces/sysloop

The output directory receives the plugin's tables, ``console.log`` (the guest's serial
console), ``qemu-stderr.log`` and ``manifest.json`` (what was run, on what, and the guest's
``/proc/interrupts`` and ``/proc/stat`` before and after the command).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pysched.capture import console as con
from pysched.capture import guest as gst
from pysched.capture import qemu as qm

#: Version of the manifest.json layout.
MANIFEST_VERSION = 1

CONSOLE_LOG = "console.log"
QEMU_STDERR_LOG = "qemu-stderr.log"
MANIFEST = "manifest.json"

# Exit statuses of `pysched trace`: 1 the run failed (QEMU, guest or command), 2 it could not
# start (bad arguments, missing guest or plugin).
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2


#: Seconds after which a guest that has not reached /init is restarted. A normal boot takes
#: about 10 s; rarely (about 1 boot in 50 seen) the guest stops silently early in boot under
#: multi-threaded TCG, and only a restart helps.
DEFAULT_BOOT_TIMEOUT = 120.0


class TraceUsageError(Exception):
    """A problem found before QEMU starts (reported with exit status 2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``pysched trace`` options to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The sub-command's parser.
    """
    parser.add_argument("--cmd", required=True, metavar="SHELL_COMMAND",
                        help="command the guest runs with busybox sh (as /cmd.sh)")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="trace directory; must be empty or not exist")
    parser.add_argument("--vcpus", type=int, default=2, metavar="N",
                        help="number of guest vCPUs (default 2)")
    parser.add_argument("--ram", default="512M", metavar="SIZE",
                        help=f"guest RAM, e.g. 512M or 1G, at most {qm.MAX_RAM_MIB}M "
                        "(default 512M)")
    parser.add_argument("--data-accesses", action="store_true",
                        help="also record every data load and store (plugin data=on)")
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


def build_manifest(
    *,
    command: str,
    date: str,
    guest: gst.GuestImage,
    qemu_version: str,
    plugin: Path | None,
    plugin_options: str | None,
    vcpus: int,
    ram_mib: int,
    roi: str,
    data_accesses: bool,
    timeout: float,
    argv: list[str],
    result: qm.QemuResult | None,
    console_text: str,
    boot_timeout: float | None = None,
    failed_boots: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The contents of ``manifest.json``.

    Parameters
    ----------
    command : str
        The shell command run in the guest.
    date : str
        Start of the run, ISO 8601 UTC.
    guest : GuestImage
        The guest that was booted.
    qemu_version : str
        First line of ``qemu-system-x86_64 --version``.
    plugin : Path or None
        The plugin loaded (None: untraced run).
    plugin_options : str or None
        The plugin's full option string.
    vcpus, ram_mib : int
        Machine size.
    roi : str
        ``marker`` or ``all``.
    data_accesses : bool
        Whether data accesses were recorded.
    timeout : float
        The run's timeout in seconds.
    argv : list of str
        QEMU's command line.
    result : QemuResult or None
        How QEMU ended (None if it never ran).
    console_text : str
        The console log (normalised by :func:`pysched.capture.console.console_text`).
    boot_timeout : float or None
        The boot watchdog's limit in seconds (None: off).
    failed_boots : list of dict, optional
        Earlier attempts that hung while booting and were restarted.

    Returns
    -------
    dict
        JSON-ready manifest. ``interrupts``/``stat`` hold ``before`` and ``after`` snapshots,
        each ``{"raw": text, "counts"|"fields": parsed}`` or None when the guest did not
        print it.
    """
    sections = con.proc_sections(console_text)

    def interrupts(raw: str | None) -> dict[str, Any] | None:
        return None if raw is None else {"raw": raw, "counts": con.parse_interrupts(raw)}

    def stat(raw: str | None) -> dict[str, Any] | None:
        return None if raw is None else {"raw": raw, "fields": con.parse_stat(raw)}

    return {
        "manifest_version": MANIFEST_VERSION,
        "command": command,
        "date": date,
        "kernel_version": guest.kernel_version,
        "kernel_package_version": guest.kernel_package_version,
        "kernel": str(guest.vmlinuz),
        "system_map": str(guest.system_map),
        "kernel_append": qm.KERNEL_APPEND,
        "qemu_version": qemu_version,
        "plugin": str(plugin) if plugin is not None else None,
        "plugin_options": plugin_options,
        "vcpus": vcpus,
        "ram": f"{ram_mib}M",
        "roi": roi,
        "data_accesses": data_accesses,
        "timeout_seconds": timeout,
        "boot_timeout_seconds": boot_timeout,
        "failed_boots": failed_boots or [],
        "qemu_argv": argv,
        "qemu_exit_status": result.returncode if result else None,
        "timed_out": result.timed_out if result else False,
        "guest_exit_status": con.guest_exit_status(console_text),
        "wall_seconds": round(result.wall_seconds, 3) if result else None,
        "interrupts": {
            "before": interrupts(sections["interrupts_before"]),
            "after": interrupts(sections["interrupts_after"]),
        },
        "stat": {
            "before": stat(sections["stat_before"]),
            "after": stat(sections["stat_after"]),
        },
    }


def _clear_dir(out: Path) -> None:
    """Empty the output directory before a restart (it was empty when the run began)."""
    for child in out.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _err(msg: str) -> None:
    print(f"pysched trace: {msg}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run ``pysched trace``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options (see :func:`add_arguments`).

    Returns
    -------
    int
        0 when QEMU ran, the guest reached its end and the command exited 0; 1 when the run
        failed (QEMU error, timeout, guest crash, non-zero command status); 2 when it could
        not start.
    """
    try:
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
        guest = gst.locate_guest(args.guest_dir)
        qemu = qm.find_qemu()
        plugin = None if args.no_plugin else resolve_plugin(args.plugin)
        options = None
        if plugin is not None:
            try:
                options = qm.plugin_options(
                    out, guest.system_map.absolute(), ram_mib, args.data_accesses, args.roi
                )
            except ValueError as e:
                raise TraceUsageError(str(e)) from None
    except (TraceUsageError, gst.GuestNotBuiltError, FileNotFoundError) as e:
        _err(f"error: {e}")
        return EXIT_USAGE

    out.mkdir(parents=True, exist_ok=True)
    date = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    version = qm.qemu_version(qemu)
    console_path = out / CONSOLE_LOG
    failed_boots: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pysched-trace-") as tmp:
        initrd = gst.write_run_initrd(guest.initramfs, args.cmd, Path(tmp) / "run.img")
        argv = qm.qemu_argv(guest.vmlinuz, initrd, ram_mib, args.vcpus, plugin, options, qemu)
        what = "untraced" if plugin is None else f"roi={args.roi}"
        print(f"pysched trace: booting the guest ({args.vcpus} vCPUs, {ram_mib}M, {what}); "
              f"console in {console_path}", file=sys.stderr)
        for attempt in range(1, args.boot_retries + 2):
            result = qm.run_qemu(argv, console_path, out / QEMU_STDERR_LOG, args.timeout,
                                 con.BEGIN_MARK.encode(), boot_timeout)
            if not result.boot_hung or attempt > args.boot_retries:
                break
            text = con.console_text(console_path.read_bytes())
            failed_boots.append({"wall_seconds": round(result.wall_seconds, 3),
                                 "console_tail": con.tail_lines(text, 20)})
            _err(f"warning: the guest did not reach /init within {boot_timeout:g} s "
                 f"(attempt {attempt}); restarting it")
            _clear_dir(out)

    text = con.console_text(console_path.read_bytes())
    manifest = build_manifest(
        command=args.cmd, date=date, guest=guest, qemu_version=version, plugin=plugin,
        plugin_options=options, vcpus=args.vcpus, ram_mib=ram_mib, roi=args.roi,
        data_accesses=args.data_accesses, timeout=args.timeout, argv=argv, result=result,
        console_text=text, boot_timeout=boot_timeout, failed_boots=failed_boots,
    )
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")

    status = manifest["guest_exit_status"]
    failure = None
    if result.boot_hung:
        failure = (f"the guest did not reach /init within {boot_timeout:g} s, "
                   f"{len(failed_boots) + 1} times; QEMU was stopped")
    elif result.timed_out:
        failure = f"timed out after {args.timeout:g} s; QEMU was stopped"
        if con.BEGIN_MARK not in text:
            failure += " (the guest never reached /init: it hung while booting)"
    elif result.returncode != 0:
        failure = qm.qemu_failed_message(result)
    elif status is None:
        failure = ("the guest did not reach its end (no '=== PYSCHED EXIT' line on the "
                   "console): it crashed or powered off early")
    elif status != 0:
        failure = f"the command exited with status {status} in the guest"
    if failure is not None:
        # When the guest got to its end, the console's tail is the /proc snapshots: show the
        # command's own output instead.
        output = con.command_output(text) if status is not None else None
        if output is not None:
            _err(f"last lines of the command's output ({console_path}):\n"
                 f"{con.tail_lines(output, 40)}")
        elif text.strip():
            _err(f"last console lines ({console_path}):\n{con.tail_lines(text, 40)}")
        if result.stderr.strip() and result.returncode == 0:
            _err(f"QEMU stderr:\n{result.stderr.strip()}")
        _err(f"error: {failure}")
        return EXIT_RUN_FAILED
    print(f"pysched trace: done in {result.wall_seconds:.1f} s; trace in {out}", file=sys.stderr)
    return 0
