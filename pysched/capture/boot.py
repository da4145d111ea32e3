"""Booting the guest for a ``pysched trace`` run: its initrd and QEMU command line
(:func:`prepare_boot`), then QEMU run under the run's monitor and host peer, a guest that hangs
while booting restarted (:func:`boot_guest`).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysched.capture import clock as gclock
from pysched.capture import console as con
from pysched.capture import guest as gst
from pysched.capture import peers as prs
from pysched.capture import qemu as qm
from pysched.capture import runfiles as rf
from pysched.capture import workloads as wl
from pysched.capture.monitor import RunMonitor
from pysched.capture.outcome import err
from pysched.capture.plan import RunPlan, TraceUsageError
from pysched.trace.schema import CONSOLE_LOG, QEMU_STDERR_LOG

#: The guest's control serial port (ttyS2), on which the host says "stop".
GUEST_CONTROL_PORT = "/dev/ttyS2"


@dataclass
class Boot:
    """What one run boots: the QEMU command line and the files and ports around it."""

    argv: list[str]
    symbols: Path
    control: Path
    env: dict[str, str] | None
    ports: dict[int, int]


@dataclass
class Booted:
    """How the boot attempts went: the last one's QEMU result, the hung ones, the monitor's
    summary (peer, host stop)."""

    result: qm.QemuResult
    failed_boots: list[dict[str, Any]]
    summary: dict[str, Any]


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


def prepare_boot(plan: RunPlan, args: argparse.Namespace, tmp: Path) -> Boot:
    """Write the run's initrd into ``tmp`` and make QEMU's command line."""
    guest = plan.guest
    initrd = tmp / "run.img"
    boot = Boot(argv=[], symbols=tmp / "modules.txt", control=tmp / "control.sock", env=None,
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
                             plan.options, plan.qemu, devices, append=plan.append,
                             clock=plan.clock.qemu_args())
    return boot


def boot_guest(plan: RunPlan, args: argparse.Namespace, boot: Boot, tmp: rf.RunTmpDir) -> Booted:
    """Run QEMU, restarting a guest that hangs while booting (at most ``--boot-retries``
    times)."""
    out, guest = plan.out, plan.guest
    console_path = out / CONSOLE_LOG
    what = "untraced" if plan.plugin is None else f"roi={args.roi}"
    name = plan.workload.name if plan.workload is not None else "--cmd"
    clock = ("host clock" if plan.clock.insn_rate is None else
             f"clock {gclock.format_rate(plan.clock.insn_rate)} instructions/s per vCPU")
    print(f"pysched trace: booting the {guest.kind} guest for {name} ({args.vcpus} vCPUs, "
          f"{plan.ram_mib}M, {what}, {clock}); console in {console_path}", file=sys.stderr)
    failed_boots: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for attempt in range(1, args.boot_retries + 2):
        monitor = None
        if guest.kind == "debian":
            peer = None
            if plan.workload is not None and plan.workload.peer is not None:
                ctx = prs.PeerContext(plan.params, boot.ports, tmp.path / "peer",
                                      out / prs.PEER_LOG, guest.ssh_key, guest.ssh_host_key)
                peer = prs.make_peer(plan.workload.peer, ctx)  # checked by plan_run
            monitor = RunMonitor(console_path, boot.control, peer, out, plan.roi_insns,
                                 region_deadline=plan.region_deadline)
        try:
            result = qm.run_qemu(boot.argv, console_path, out / QEMU_STDERR_LOG, args.timeout,
                                 con.BEGIN_MARK.encode(), plan.boot_timeout,
                                 poll=monitor.poll if monitor is not None else None,
                                 env=boot.env,
                                 # single-threaded TCG: one thread runs every vCPU
                                 vcpus=args.vcpus if plan.clock.shift is None else 1,
                                 exit_marker=con.EXIT_MARK.encode(), started=tmp.add_process)
        finally:
            if monitor is not None:
                summary = monitor.finish()
        if not result.boot_hung or attempt > args.boot_retries:
            break
        text = con.console_text(console_path.read_bytes())
        failed_boots.append({"wall_seconds": round(result.wall_seconds, 3),
                             "console_tail": con.tail_lines(text, 20)})
        err(f"warning: the guest did not reach /init within {plan.boot_timeout:g} s "
            f"(attempt {attempt}); restarting it")
        _clear_dir(out)
    return Booted(result, failed_boots, summary)


def _clear_dir(out: Path) -> None:
    """Empty the output directory before a restart (it was empty when the run began)."""
    for child in out.iterdir():
        if child.name == rf.OUT_LOCK:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


__all__ = ["Boot", "Booted", "GUEST_CONTROL_PORT", "boot_guest", "prepare_boot", "run_env"]
