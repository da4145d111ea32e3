"""``manifest.json``: what a traced run ran, on what, and what the guest's kernel counted.

Layout version 3: version 2 (version 1 plus the guest, the workload and its parameters, the
region's bound, the host peer, the image and the kernel symbol files) with

- no absolute path of the capturing machine: files are named (``vmlinuz``, ``System.map``,
  ``libpysched-trace.so``), the trace directory is ``.`` (in ``plugin_options`` and
  ``qemu_argv`` too), and ``inputs`` gives each input file's name and SHA-256;
- ``complete`` and ``incomplete_reason``: whether the plugin closed its tables with the region
  of interest over (see :func:`incomplete_reason`);
- ``outcome``: ``ok``, or ``failed`` with ``failure`` (why ``pysched trace`` exited 1) and, for
  a workload, its ``criterion`` and whether it was met.

Manifests written since ``pysched trace --clock`` also hold ``guest_clock`` (not required: a
manifest without it was recorded on the host's clock): ``source`` (``insns`` or ``host``),
``icount`` (QEMU's ``-icount`` value), ``machine_insn_rate`` and ``insn_rate_per_vcpu``
(instructions a guest second, for the machine and for each vCPU while all run) and ``hz`` (the
guest kernel's CONFIG_HZ, None when unknown); see :mod:`pysched.capture.clock`.
Manifests written since the plugin records ``device_requests`` also hold ``devices`` (not
required; None when the guest printed none): the guest's I/O ranges and PCI devices read just
before the region (:mod:`pysched.capture.devices`).

``pysched trace`` writes the manifest last, under a temporary name renamed over
``manifest.json``: a trace directory without one was not finished (the run was killed or
interrupted). :func:`upgrade_manifest` turns an older manifest into this layout in place.
The keys are listed in :data:`REQUIRED_KEYS`; :func:`missing_keys` checks a manifest against
them.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from pysched.capture import console as con
from pysched.capture.devices import manifest_devices
from pysched.capture import guest as gst
from pysched.capture import qemu as qm

#: Version of the manifest.json layout.
MANIFEST_VERSION = 3

#: The manifest's file name in a trace directory.
MANIFEST = "manifest.json"

#: Keys every manifest has (values may be None where the docstring of build_manifest says so).
REQUIRED_KEYS = (
    "manifest_version", "guest", "workload", "parameters", "command", "date",
    "kernel_version", "kernel_package_version", "kernel_append", "qemu_version", "plugin",
    "plugin_options", "vcpus", "ram", "roi", "roi_bound", "data_accesses", "qemu_argv",
    "qemu_exit_status", "guest_exit_status", "wall_seconds", "interrupts", "stat",
    "kernel_symbols", "image", "peer", "host_stop", "insns_per_vcpu", "compacted",
    "inputs", "complete", "incomplete_reason", "outcome",
)

# An absolute path inside a command-line word or option string: up to a separator of QEMU's
# syntax (",", "=", ":" after the path, white space).
_ABS_PATH_RE = re.compile(r"(?<![\w.~-])/(?:[^\s,:=/]+/)*([^\s,:=/]+)")


def portable_text(text: str, out_dir: str | Path | None) -> str:
    """``text`` with the trace directory written ``.`` and every other absolute path reduced to
    its file name.

    Parameters
    ----------
    text : str
        A QEMU argument or the plugin's option string.
    out_dir : str or Path, optional
        The trace directory as the text spells it.

    Returns
    -------
    str
        E.g. ``out=.,sysmap=System.map,ram=512M`` for
        ``out=/home/u/t,sysmap=/home/u/pysched/build/guest/System.map,ram=512M``.
    """
    if out_dir:
        text = re.sub(re.escape(str(out_dir).rstrip("/")) + r"(?=$|[/,\s])", ".", text)
    return _ABS_PATH_RE.sub(lambda m: m.group(1), text)


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's contents, hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _named(path: Path | None) -> dict[str, str | None] | None:
    """``{"name", "sha256"}`` of an input file (sha256 None when it cannot be read)."""
    if path is None:
        return None
    try:
        digest: str | None = sha256_file(path)
    except OSError:
        digest = None
    return {"name": path.name, "sha256": digest}


def input_files(guest: gst.GuestImage, plugin: Path | None) -> dict[str, Any]:
    """Names and SHA-256 of what a run booted and loaded: the kernel, its ``System.map``, the
    base initrd and the plugin; for the Debian image, its recipe hash (the 3 GB disk itself is
    not hashed: the recipe and ``packages.lock`` identify it)."""
    inputs: dict[str, Any] = {
        "kernel": _named(guest.vmlinuz),
        "system_map": _named(guest.system_map),
        "initrd": _named(guest.initramfs),
        "plugin": _named(plugin),
    }
    if guest.disk is not None:
        inputs["image"] = {"name": guest.disk.name, "recipe_sha": guest.recipe_sha}
    return inputs


def incomplete_reason(info: Mapping[str, Any] | None, roi: str,
                      result: qm.QemuResult | None) -> str | None:
    """Why a trace is incomplete, or None when it is complete.

    Complete means: ``plugin.json`` is the plugin's final one (it closed every table), and
    the region of interest is over (``roi=marker``: at least one region began and none was
    open when QEMU stopped; ``roi=all``: QEMU was not stopped for a timeout or a hung boot).

    Parameters
    ----------
    info : mapping or None
        ``plugin.json`` (None when missing).
    roi : str
        ``marker`` or ``all``.
    result : QemuResult or None
        How QEMU ended.
    """
    if info is None:
        return "the plugin wrote no plugin.json"
    if not info.get("final"):
        return "plugin.json is not final: the plugin did not close its tables"
    if roi == "all":
        if result is not None and (result.timed_out or result.boot_hung):
            return "QEMU was stopped before the guest was done"
        return None
    if info.get("recording"):
        return "the region of interest was still open when QEMU stopped"
    if not info.get("windows"):
        return "no region of interest began"
    return None


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


def host_load(start: tuple[float, ...], end: tuple[float, ...]) -> dict[str, Any]:
    """The host's CPUs and load averages (1, 5, 15 min) when the run began and ended. On the
    host's clock (``--clock host``, and every trace before ``--clock``) a loaded host gives each
    guest second fewer instructions, so timer interrupts are a larger share of the trace."""
    return {"cpus": os.cpu_count(), "loadavg_start": [round(x, 2) for x in start],
            "loadavg_end": [round(x, 2) for x in end]}


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
    host: Mapping[str, Any] | None = None,
    compacted: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    incomplete: str | None = None,
    outcome: Mapping[str, Any] | None = None,
    kernel_append: str = qm.KERNEL_APPEND,
    kernel_args: str | None = None,
    guest_clock: Mapping[str, Any] | None = None,
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
    host : mapping, optional
        :func:`host_load` (``host``; empty when not given).
    inputs : mapping, optional
        :func:`input_files` (default: computed from ``guest`` and ``plugin``).
    incomplete : str, optional
        :func:`incomplete_reason` (None: the trace is complete).
    outcome : mapping, optional
        ``{"status": "ok" | "failed", "failure": message or None, ...}``; default ok.
    kernel_append : str
        The whole kernel command line (``kernel_append``).
    kernel_args : str, optional
        Its optional part (``--kernel-args``, or the default; ``kernel_args``); the harness's
        part is ``kernel_append`` less it.
    guest_clock : mapping, optional
        :meth:`pysched.capture.clock.GuestClock.manifest` (``guest_clock``; left out when not
        given, as in manifests before it).

    Returns
    -------
    dict
        JSON-ready manifest with every key of :data:`REQUIRED_KEYS`. ``interrupts``/``stat``
        hold ``before`` and ``after`` snapshots, each ``{"raw": text, "counts"|"fields":
        parsed}`` or None when the guest did not print it. ``devices`` is the guest's I/O
        ranges and PCI devices read before the region (:mod:`pysched.capture.devices`), None
        when it printed none. ``image`` is None for the busybox
        guest, else the disk image, its recipe hash and its packages.
    """
    sections = con.proc_sections(console_text)

    def interrupts(raw: str | None) -> dict[str, Any] | None:
        return None if raw is None else {"raw": raw, "counts": con.parse_interrupts(raw)}

    def stat(raw: str | None) -> dict[str, Any] | None:
        return None if raw is None else {"raw": raw, "fields": con.parse_stat(raw)}

    image = None
    if guest.disk is not None:
        image = {"disk": guest.disk.name, "recipe_sha": guest.recipe_sha,
                 "packages": guest.packages()}
    out = str(out_dir) if out_dir is not None else None
    mon = dict(monitor or {})
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "guest": guest.kind,
        "workload": workload,
        "workload_summary": workload_summary,
        "parameters": dict(parameters or {}),
        "command": command,
        "date": date,
        "kernel_version": guest.kernel_version,
        "kernel_package_version": guest.kernel_package_version,
        "kernel": guest.vmlinuz.name,
        "system_map": guest.system_map.name,
        "kernel_append": kernel_append,
        "kernel_args": kernel_args,
        "qemu_version": qemu_version,
        "plugin": plugin.name if plugin is not None else None,
        "plugin_options": (portable_text(plugin_options, out)
                           if plugin_options is not None else None),
        "vcpus": vcpus,
        "ram": f"{ram_mib}M",
        "roi": roi,
        "roi_bound": dict(roi_bound or {}),
        "data_accesses": data_accesses,
        "timeout_seconds": timeout,
        "boot_timeout_seconds": boot_timeout,
        "failed_boots": failed_boots or [],
        "qemu_argv": [portable_text(a, out) for a in argv],
        "qemu_exit_status": result.returncode if result else None,
        "timed_out": result.timed_out if result else False,
        "shutdown_hung": result.shutdown_hung if result else False,
        "guest_exit_status": con.guest_exit_status(console_text),
        "wall_seconds": round(result.wall_seconds, 3) if result else None,
        "host": dict(host or {}),
        "insns_per_vcpu": _plugin_icounts(out_dir),
        "interrupts": {
            "before": interrupts(sections["interrupts_before"]),
            "after": interrupts(sections["interrupts_after"]),
        },
        "stat": {
            "before": stat(sections["stat_before"]),
            "after": stat(sections["stat_after"]),
        },
        "devices": manifest_devices(sections),
        "kernel_symbols": dict(kernel_symbols or {}),
        "image": image,
        "peer": mon.get("peer"),
        "host_stop": mon.get("host_stop"),
        "control_errors": mon.get("control_errors", []),
        "compacted": dict(compacted) if compacted is not None else None,
        "inputs": dict(inputs) if inputs is not None else input_files(guest, plugin),
        "complete": incomplete is None,
        "incomplete_reason": incomplete,
        "outcome": dict(outcome) if outcome is not None else {"status": "ok", "failure": None},
    }
    if guest_clock is not None:
        manifest["guest_clock"] = dict(guest_clock)
    return manifest


def missing_keys(manifest: Mapping[str, Any]) -> list[str]:
    """The keys of :data:`REQUIRED_KEYS` that ``manifest`` lacks."""
    return [k for k in REQUIRED_KEYS if k not in manifest]


def write_manifest(out_dir: Path, manifest: Mapping[str, Any]) -> Path:
    """Write ``manifest.json`` atomically: to a temporary name in ``out_dir``, flushed to disk,
    then renamed over the final name, so that a reader sees the whole file or none.

    Returns
    -------
    Path
        The manifest's path.
    """
    path = Path(out_dir) / MANIFEST
    tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(manifest, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def _system_map_sha(trace_dir: Path, name: str | None) -> str | None:
    """SHA-256 of the System.map the trace carries (uncompressed), None without one."""
    try:
        return hashlib.sha256(gzip.decompress((trace_dir / (name or "")).read_bytes())).hexdigest()
    except (OSError, ValueError, EOFError):
        return None


def portable_plugin_info(trace_dir: Path) -> bool:
    """Rewrite ``plugin.json``'s options as the manifest gives paths: the trace directory as
    ``.``, any other absolute path as its file name (the plugin writes the paths it was given).

    Returns
    -------
    bool
        True when it was rewritten, False when it had no absolute path (or no plugin.json).
    """
    path = Path(trace_dir) / "plugin.json"
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    opts = info.get("options")
    if not isinstance(opts, dict):
        return False
    out = opts.get("out")
    changed = False
    for key, val in opts.items():
        if isinstance(val, str) and val.startswith("/"):
            opts[key] = "." if val == out else Path(val).name
            changed = True
    if changed:
        tmp = path.with_name(f".plugin.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(info, indent=1) + "\n")
        os.replace(tmp, path)
    return changed


def upgrade_manifest(trace_dir: Path) -> bool:
    """Rewrite a trace's ``manifest.json`` of layout 1 or 2 into layout 3, without re-tracing.

    Absolute paths become names (``.`` for the trace directory), as :func:`portable_text` does.
    ``inputs`` holds the names; of the hashes, only the System.map's can be known afterwards
    (from the ``System.map.gz`` the trace carries): the others are None, since the files on
    this machine need not be those the trace was made with. A trace that was given a manifest
    was finished, and old versions wrote it only at the end: ``complete`` follows
    :func:`incomplete_reason` on its ``plugin.json`` and the manifest's QEMU end, and
    ``outcome`` from the manifest's exit statuses.

    Parameters
    ----------
    trace_dir : Path
        The trace directory.

    Returns
    -------
    bool
        True when it was rewritten, False when it already had layout 3.

    Raises
    ------
    FileNotFoundError
        When there is no manifest.json.
    ValueError
        When it is not JSON or of an unknown layout.
    """
    trace_dir = Path(trace_dir)
    m = json.loads((trace_dir / MANIFEST).read_text())
    version = m.get("manifest_version")
    if version == MANIFEST_VERSION:
        return False
    if version not in (1, 2):
        raise ValueError(f"{trace_dir / MANIFEST}: unknown manifest_version {version!r}")
    opts = m.get("plugin_options") or ""
    out = next((o[4:] for o in opts.split(",") if o.startswith("out=")), None)
    for key in ("kernel", "system_map", "plugin"):
        if m.get(key):
            m[key] = Path(m[key]).name
    if m.get("plugin_options"):
        m["plugin_options"] = portable_text(m["plugin_options"], out)
    m["qemu_argv"] = [portable_text(a, out) for a in m.get("qemu_argv") or []]
    if isinstance(m.get("image"), dict) and m["image"].get("disk"):
        m["image"]["disk"] = Path(m["image"]["disk"]).name
    sysmap = (m.get("kernel_symbols") or {}).get("system_map")
    m["inputs"] = {
        "kernel": {"name": m.get("kernel"), "sha256": None},
        "system_map": {"name": m.get("system_map"), "sha256": _system_map_sha(trace_dir, sysmap)},
        "initrd": None,
        "plugin": {"name": m["plugin"], "sha256": None} if m.get("plugin") else None,
    }
    if isinstance(m.get("image"), dict):
        m["inputs"]["image"] = {"name": m["image"].get("disk"),
                                "recipe_sha": m["image"].get("recipe_sha")}
    try:
        info = json.loads((trace_dir / "plugin.json").read_text())
    except (OSError, ValueError):
        info = None
    result = qm.QemuResult(m.get("qemu_exit_status") or 0, bool(m.get("timed_out")),
                           m.get("wall_seconds") or 0.0, "")
    reason = incomplete_reason(info, m.get("roi", "marker"), result)
    m["complete"], m["incomplete_reason"] = reason is None, reason
    ok = m.get("guest_exit_status") == 0 and not m.get("timed_out")
    m["outcome"] = {"status": "ok" if ok else "failed",
                    "failure": None if ok else "recorded before manifest layout 3: see "
                    "guest_exit_status, qemu_exit_status and timed_out"}
    m["manifest_version"] = MANIFEST_VERSION
    write_manifest(trace_dir, m)
    return True


__all__ = ["MANIFEST", "MANIFEST_VERSION", "REQUIRED_KEYS", "build_manifest", "input_files",
           "incomplete_reason", "missing_keys", "portable_plugin_info", "portable_text", "sha256_file",
           "upgrade_manifest", "write_manifest"]


def main(argv: list[str] | None = None) -> int:
    """``python -m pysched.capture.manifest TRACE_DIR...``: :func:`upgrade_manifest` and
    :func:`portable_plugin_info` on each.

    Returns
    -------
    int
        0, or 1 when a directory could not be upgraded (each such one is named on stderr).
    """
    import sys

    dirs = sys.argv[1:] if argv is None else argv
    if not dirs:
        print("usage: python -m pysched.capture.manifest TRACE_DIR...", file=sys.stderr)
        return 2
    status = 0
    for d in dirs:
        try:
            done = upgrade_manifest(Path(d))
            portable_plugin_info(Path(d))
        except (OSError, ValueError) as e:
            print(f"{d}: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"{d}: {'upgraded to' if done else 'already'} layout {MANIFEST_VERSION}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
