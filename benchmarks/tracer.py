"""Benchmark the tracer against plain TCG and QEMU's own contrib plugins, in one run.

The same guest workload (boot, the command inside the ROI, power-off) runs, with the clock
options ``pysched trace`` uses (``--clock insns`` by default: single-threaded TCG and
``-icount``; ``--clock host``: multi-threaded TCG on the host's clock), under:

a. plain TCG (no plugin),
b. pysched's plugin, default mode,
c. pysched's plugin with data accesses (``data=on``),
d. QEMU's contrib ``execlog`` (one text line per instruction, sent to a pipe and counted),
e. QEMU's contrib ``hotblocks`` and ``bbv`` (counters only),

with d and e built now from the same Debian QEMU source tarball that set-up extracted (skipped
with ``--no-peers``). a, b and c run ``--rounds`` times, interleaved so that each sees the same
host load, and each slowdown is the fastest run's wall time over (a)'s fastest, from this run
(every round's time is kept). The traced window must hold at least 1 G instructions (checked
from ``plugin.json``). The targets (issue 32): at most 1.3x by default, 2x with data
accesses, 0.006 bytes of Parquet per instruction by default.

Usage: ``python benchmarks/tracer.py --out benchmarks/results/tracer.json``

``--ab OTHER.so`` instead compares two builds of the plugin on the default stream (with
``--ab-data``: with data accesses): ROUNDS rounds of plain TCG, OTHER (before) and
``--plugin`` (after), interleaved so that both see the same host load, and the ratios of the
fastest run of each (the runs of a shared host vary far more than the plugins do).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pysched.capture.clock import guest_clock
from pysched.capture.guest import locate_guest, write_run_initrd
from pysched.capture.qemu import (default_plugin_path, kernel_append, plugin_options, qemu_argv,
                                  qemu_version)

REPO = Path(__file__).resolve().parents[1]
CONTRIB = REPO / "build" / "qemu-src" / "contrib" / "plugins"
QEMU_INCLUDE = REPO / "build" / "qemu-src" / "include" / "qemu"

# An OS-heavy mix no study trace has: a syscall loop, two copies of one compute binary on both
# vCPUs, a long listing of the file tree and compression of the busybox binary through a pipe.
WORKLOAD = ("sysloop 300000; spin 450 & spin 450 & ls -lR / > /dev/null 2>&1; "
            "for i in 1 2 3; do gzip -c /bin/busybox | md5sum > /dev/null; done; wait")
VCPUS = 2
RAM_MIB = 512
#: The issue's targets: slowdowns over plain TCG with the same clock, bytes per instruction.
TARGETS = {"slowdown_default": 1.3, "slowdown_data": 2.0, "bytes_per_insn": 0.006}


def build_peer(name: str, dest: Path) -> Path:
    """Compile QEMU's contrib plugin NAME.c into DEST/libNAME.so."""
    src = CONTRIB / f"{name}.c"
    if not src.is_file():
        sys.exit(f"benchmark: {src} missing; run `make setup`")
    so = dest / f"lib{name}.so"
    glib = subprocess.run(["pkg-config", "--cflags", "--libs", "glib-2.0"], check=True,
                          capture_output=True, text=True).stdout.split()
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(so), str(src),
                    f"-I{QEMU_INCLUDE}", *glib], check=True)
    return so


class PeerFailed(Exception):
    """A run of one of QEMU's contrib plugins failed (its message says how)."""


def run(argv: list[str], log: Path | None = None, timeout: float | None = None,
        peer: bool = False) -> tuple[float, int, int, bool, float]:
    """Run QEMU to completion, or stop it after TIMEOUT seconds.

    Returns wall seconds, the bytes and lines QEMU logged to LOG (a FIFO read here), whether
    the run was stopped, and QEMU's CPU seconds (user and system, all its threads): on a
    shared host the CPU time varies far less than the wall time. A failed run ends the
    benchmark, but for a ``peer`` (a contrib plugin, whose failure is recorded instead):
    PeerFailed.
    """
    counted = [0, 0]

    def drain(path: Path) -> None:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                counted[0] += len(chunk)
                counted[1] += chunk.count(b"\n")

    reader = None
    if log is not None:
        os.mkfifo(log)
        reader = threading.Thread(target=drain, args=(log,))
        reader.start()
    t0 = time.monotonic()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    stopped = False
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=null,
                                stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stopped = True
            proc.kill()
            _, err = proc.communicate()
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    if reader is not None:
        reader.join()
    if proc.returncode != 0 and not stopped:
        msg = f"QEMU failed ({proc.returncode}): {' '.join(argv)}\n{err}"
        if peer:
            raise PeerFailed(msg)
        sys.exit(f"benchmark: {msg}")
    return wall, counted[0], counted[1], stopped, cpu


def trace_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*.parquet"))


def table_bytes(out: Path) -> dict[str, int]:
    """Parquet bytes per table (directory) of a trace: what its bytes per instruction are."""
    sizes: dict[str, int] = {}
    for p in out.rglob("*.parquet"):
        sizes[p.parent.name] = sizes.get(p.parent.name, 0) + p.stat().st_size
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1]))


def run_context(workload: str, append: str, kernel_version: str,
                clock: list[str] | None = None) -> dict:
    """What a result is a measurement of: the guest command line, clock options, versions,
    host and date."""
    return {
        "workload": workload,
        "vcpus": VCPUS,
        "ram_mib": RAM_MIB,
        "kernel_append": append,
        "clock_args": clock,
        "qemu": qemu_version(),
        "kernel": kernel_version,
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(),
                 "loadavg": os.getloadavg()},
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def plain_argv(args: argparse.Namespace, guest, tmp: Path) -> tuple[list[str], str, list[str]]:
    """QEMU's command line for the benchmark's workload without a plugin (its initrd in
    ``tmp``), with the kernel command line and the clock options in it."""
    initrd = write_run_initrd(guest.initramfs, args.workload, tmp / "run.img")
    append = kernel_append(args.kernel_args)
    clock = guest_clock(args.clock, None, VCPUS).qemu_args()
    argv = qemu_argv(guest.vmlinuz, initrd, RAM_MIB, VCPUS, append=append, clock=clock)
    return argv, append, clock


def ab_main(args: argparse.Namespace, plugin: Path) -> int:
    """``--ab``: rounds of plain / before / after, default stream only (see the docstring)."""
    guest = locate_guest()
    runs: dict[str, list] = {"plain": [], "before": [], "after": []}
    cpu: dict[str, list] = {"plain": [], "before": [], "after": []}
    counters: dict[str, list] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="pysched-bench-") as tmp:
        tmp = Path(tmp)
        base, append, clock = plain_argv(args, guest, tmp)
        for _ in range(args.rounds):
            wall, *_, cpu_s = run(base)
            runs["plain"].append(wall)
            cpu["plain"].append(cpu_s)
            for name, so in (("before", args.ab), ("after", plugin)):
                opts = plugin_options(tmp / name, guest.system_map, RAM_MIB,
                                      data_accesses=args.ab_data)
                wall, *_, cpu_s = run(base + ["-plugin", f"{so},{opts}"])
                runs[name].append(wall)
                cpu[name].append(cpu_s)
                info = json.loads((tmp / name / "plugin.json").read_text())
                counters[name].append({k: info[k] for k in ("icount", "blocks", "user_variants",
                                                            "user_rip_reads") if k in info})
                counters[name][-1]["parquet_bytes"] = trace_bytes(tmp / name)
                counters[name][-1]["table_bytes"] = table_bytes(tmp / name)
                shutil.rmtree(tmp / name)
    best = {k: min(v) for k, v in runs.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    summary = {
        **run_context(args.workload, append, guest.kernel_version, clock),
        "stream": "data" if args.ab_data else "default",
        "plugin_before": str(args.ab),
        "plugin_after": str(plugin),
        "rounds": args.rounds,
        "runs_s": runs,
        "cpu_s": cpu,
        "counters": counters,
        "min_ratios": {"before_over_plain": best["before"] / best["plain"],
                       "after_over_plain": best["after"] / best["plain"],
                       "after_over_before": best["after"] / best["before"]},
        "min_cpu_ratios": {"before_over_plain": best_cpu["before"] / best_cpu["plain"],
                           "after_over_plain": best_cpu["after"] / best_cpu["plain"],
                           "after_over_before": best_cpu["after"] / best_cpu["before"]},
        "note": "wall and CPU time of QEMU's whole run (boot, workload, power-off), "
                f"{'data' if args.ab_data else 'default'} stream; ratios of the fastest run "
                "of each",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "counters"}, indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/tracer.json")
    ap.add_argument("--workload", default=WORKLOAD)
    ap.add_argument("--plugin", type=Path, default=None,
                    help="the plugin to measure (default: qemu-plugin/build's)")
    ap.add_argument("--kernel-args", default=None,
                    help="the guest kernel's optional arguments (default: pysched trace's)")
    ap.add_argument("--execlog-cap", type=float, default=20.0,
                    help="stop execlog after this many times plain TCG's wall time")
    ap.add_argument("--ab", type=Path, default=None, metavar="OTHER.so",
                    help="compare with this other build of the plugin (default stream, or "
                         "--ab-data's)")
    ap.add_argument("--ab-data", action="store_true",
                    help="with --ab: compare the two builds with data accesses")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of plain / default / data (with --ab: plain / OTHER / "
                         "--plugin), interleaved (default 3)")
    ap.add_argument("--clock", choices=("insns", "host"), default="insns",
                    help="QEMU's clock options, as pysched trace's --clock (default insns)")
    ap.add_argument("--no-peers", action="store_true",
                    help="skip QEMU's contrib plugins (execlog, hotblocks, bbv)")
    args = ap.parse_args()

    guest = locate_guest()
    plugin = args.plugin or default_plugin_path()
    if not plugin.is_file():
        sys.exit("benchmark: plugin not built; run `make plugin`")
    if args.rounds < 1:
        sys.exit(f"benchmark: --rounds {args.rounds}: must be 1 or more")
    if args.ab_data and args.ab is None:
        sys.exit("benchmark: --ab-data needs --ab OTHER.so")
    if args.ab is not None:
        if not args.ab.is_file():
            sys.exit(f"benchmark: --ab {args.ab}: no such file")
        return ab_main(args, plugin)
    with tempfile.TemporaryDirectory(prefix="pysched-bench-") as tmp:
        tmp = Path(tmp)
        base, append, clock = plain_argv(args, guest, tmp)

        def ours(name: str, data: bool) -> list[str]:
            opts = plugin_options(tmp / name, guest.system_map, RAM_MIB, data_accesses=data)
            return base + ["-plugin", f"{plugin},{opts}"]

        rounds: dict[str, list[dict]] = {"plain": [], "default": [], "data": []}
        for _ in range(args.rounds):
            wall, *_, cpu = run(base)
            rounds["plain"].append({"wall_s": wall, "cpu_s": cpu})
            for name, data in (("default", False), ("data", True)):
                wall, *_, cpu = run(ours(name, data))
                info = json.loads((tmp / name / "plugin.json").read_text())
                rounds[name].append({"wall_s": wall, "cpu_s": cpu,
                                     "insns": int(sum(info["icount"])),
                                     "parquet_bytes": trace_bytes(tmp / name),
                                     "table_bytes": table_bytes(tmp / name)})
                shutil.rmtree(tmp / name)
        results: dict[str, dict] = {k: min(v, key=lambda r: r["wall_s"])
                                    for k, v in rounds.items()}
        if not args.no_peers:
            peers = {name: build_peer(name, tmp) for name in ("execlog", "hotblocks", "bbv")}
            # execlog writes a text line per instruction of the whole run (boot included),
            # which takes far longer than the rest: it is stopped after a cap, and its
            # slowdown is then a lower bound, its bytes per instruction measured over the
            # lines it wrote.
            cap = args.execlog_cap * results["plain"]["wall_s"]
            try:
                wall, logged, lines, stopped, _ = run(
                    base + ["-plugin", str(peers["execlog"]), "-d", "plugin",
                            "-D", str(tmp / "execlog.fifo")], log=tmp / "execlog.fifo",
                    timeout=cap, peer=True)
                results["execlog"] = {"wall_s": wall, "log_bytes": logged, "log_lines": lines,
                                      "stopped_at_cap": stopped}
            except PeerFailed as exc:
                results["execlog"] = {"failed": str(exc)}
            for name, opts in (("hotblocks", ""), ("bbv", ",outfile=" + str(tmp / "bbv"))):
                try:
                    wall, *_ = run(base + ["-plugin", f"{peers[name]}{opts}", "-d", "plugin",
                                           "-D", str(tmp / f"{name}.log")], peer=True)
                    results[name] = {"wall_s": wall}
                except PeerFailed as exc:
                    results[name] = {"failed": str(exc)}

    plain = results["plain"]["wall_s"]
    insns = results["default"]["insns"]
    figures = {
        "slowdown_default": results["default"]["wall_s"] / plain,
        "slowdown_data": results["data"]["wall_s"] / plain,
        "bytes_per_insn": results["default"]["parquet_bytes"] / insns,
    }
    summary = {
        **run_context(args.workload, append, guest.kernel_version, clock),
        "rounds": args.rounds,
        "insns_traced": insns,
        **figures,
        "bytes_per_insn_data": results["data"]["parquet_bytes"] / results["data"]["insns"],
        "bytes_per_insn_by_table": {k: b / insns for k, b in
                                    results["default"]["table_bytes"].items()},
        "targets": TARGETS,
        "meets": {k: figures[k] <= v for k, v in TARGETS.items()},
        "runs": results,
        "rounds_runs": rounds,
        "note": "wall time of the whole run (boot, workload, power-off), fastest of the rounds; "
                "execlog and the counting peers instrument the whole run, pysched only the "
                "ROI; execlog's bytes per instruction are per line it wrote (one line per "
                "instruction)",
    }
    if not args.no_peers:
        ex = results["execlog"]
        if "failed" not in ex:
            summary.update({
                "slowdown_execlog": ex["wall_s"] / plain,
                "slowdown_execlog_is_lower_bound": ex["stopped_at_cap"],
                "execlog_bytes_per_insn": ex["log_bytes"] / max(1, ex["log_lines"])})
        for name in ("hotblocks", "bbv"):
            if "failed" not in results[name]:
                summary[f"slowdown_{name}"] = results[name]["wall_s"] / plain
        failed = {k: results[k]["failed"] for k in ("execlog", "hotblocks", "bbv")
                  if "failed" in results[k]}
        if failed:
            summary["peers_failed"] = failed
    if insns < 1_000_000_000:
        print(f"warning: only {insns} instructions traced (< 1 G)", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("runs", "rounds_runs")},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
