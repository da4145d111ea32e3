"""``manifest.json``: what a traced run ran, on what, and what the guest's kernel counted.

Layout version 2 (version 1 plus the guest, the workload and its parameters, the region's
bound, the host peer, the image and the kernel symbol files). The keys are listed in
:data:`REQUIRED_KEYS`; :func:`missing_keys` checks a manifest against them.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from pysched.capture import console as con
from pysched.capture import guest as gst
from pysched.capture import qemu as qm

#: Version of the manifest.json layout.
MANIFEST_VERSION = 2

#: Keys every manifest has (values may be None where the docstring of build_manifest says so).
REQUIRED_KEYS = (
    "manifest_version", "guest", "workload", "parameters", "command", "date",
    "kernel_version", "kernel_package_version", "kernel_append", "qemu_version", "plugin",
    "plugin_options", "vcpus", "ram", "roi", "roi_bound", "data_accesses", "qemu_argv",
    "qemu_exit_status", "guest_exit_status", "wall_seconds", "interrupts", "stat",
    "kernel_symbols", "image", "peer", "host_stop", "insns_per_vcpu", "compacted",
)


def _plugin_icounts(out_dir: Path | None) -> dict[str, int] | None:
    """Per-vCPU recorded instructions from a final ``plugin.json`` (None when absent)."""
    if out_dir is None:
        return None
    try:
        info = json.loads((out_dir / "plugin.json").read_text())
    except (OSError, ValueError):
        return None
    counts = info.get("icount")
    if not info.get("final") or not isinstance(counts, list):
        return None
    return {str(v): int(n) for v, n in enumerate(counts)}


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
    workload: str | None = None,
    workload_summary: str | None = None,
    parameters: Mapping[str, str] | None = None,
    roi_bound: Mapping[str, Any] | None = None,
    monitor: Mapping[str, Any] | None = None,
    kernel_symbols: Mapping[str, str | None] | None = None,
    out_dir: Path | None = None,
    compacted: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The contents of ``manifest.json``.

    Parameters
    ----------
    command : str
        The shell command run in the guest (for a workload: ``workload <name>``).
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
    workload, workload_summary : str, optional
        The workload's name and one-line description (None for ``--cmd`` runs).
    parameters : mapping, optional
        The workload's parameters, defaults included.
    roi_bound : mapping, optional
        The region's bound: ``seconds``, ``insns_per_vcpu`` (``--roi-insns``, passed to the
        plugin as ``roi_insns=``, which ``plugin_options`` and ``plugin.json``'s ``options``
        also show), ``warmup_seconds``, and ``insns_bound_reached`` (with ``--roi-insns``:
        whether every vCPU's last region holds the bound, from ``plugin.json``; None when
        unknown).
    monitor : mapping, optional
        :meth:`pysched.capture.monitor.RunMonitor.finish`'s summary (``peer``, ``host_stop``).
    kernel_symbols : mapping, optional
        Symbol files written beside the trace: ``system_map`` and ``modules`` (file names or
        None).
    out_dir : Path, optional
        The trace directory, for the per-vCPU instruction counts of a final ``plugin.json``.
    compacted : mapping, optional
        :func:`pysched.capture.compact.compact_trace`'s summary when the exec parts were
        re-encoded.

    Returns
    -------
    dict
        JSON-ready manifest with every key of :data:`REQUIRED_KEYS`. ``interrupts``/``stat``
        hold ``before`` and ``after`` snapshots, each ``{"raw": text, "counts"|"fields":
        parsed}`` or None when the guest did not print it. ``image`` is None for the busybox
        guest, else the disk image, its recipe hash and its packages.
    """
    sections = con.proc_sections(console_text)

    def interrupts(raw: str | None) -> dict[str, Any] | None:
        return None if raw is None else {"raw": raw, "counts": con.parse_interrupts(raw)}

    def stat(raw: str | None) -> dict[str, Any] | None:
        return None if raw is None else {"raw": raw, "fields": con.parse_stat(raw)}

    image = None
    if guest.disk is not None:
        image = {"disk": str(guest.disk), "recipe_sha": guest.recipe_sha,
                 "packages": guest.packages()}
    mon = dict(monitor or {})
    return {
        "manifest_version": MANIFEST_VERSION,
        "guest": guest.kind,
        "workload": workload,
        "workload_summary": workload_summary,
        "parameters": dict(parameters or {}),
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
        "roi_bound": dict(roi_bound or {}),
        "data_accesses": data_accesses,
        "timeout_seconds": timeout,
        "boot_timeout_seconds": boot_timeout,
        "failed_boots": failed_boots or [],
        "qemu_argv": argv,
        "qemu_exit_status": result.returncode if result else None,
        "timed_out": result.timed_out if result else False,
        "shutdown_hung": result.shutdown_hung if result else False,
        "guest_exit_status": con.guest_exit_status(console_text),
        "wall_seconds": round(result.wall_seconds, 3) if result else None,
        "insns_per_vcpu": _plugin_icounts(out_dir),
        "interrupts": {
            "before": interrupts(sections["interrupts_before"]),
            "after": interrupts(sections["interrupts_after"]),
        },
        "stat": {
            "before": stat(sections["stat_before"]),
            "after": stat(sections["stat_after"]),
        },
        "kernel_symbols": dict(kernel_symbols or {}),
        "image": image,
        "peer": mon.get("peer"),
        "host_stop": mon.get("host_stop"),
        "control_errors": mon.get("control_errors", []),
        "compacted": dict(compacted) if compacted is not None else None,
    }


def missing_keys(manifest: Mapping[str, Any]) -> list[str]:
    """The keys of :data:`REQUIRED_KEYS` that ``manifest`` lacks."""
    return [k for k in REQUIRED_KEYS if k not in manifest]


__all__ = ["MANIFEST_VERSION", "REQUIRED_KEYS", "build_manifest", "missing_keys"]
