"""Benchmark `make run` after set-up: the wall time of each of its three steps.

The steps are the Makefile's own (``make -n run`` lists them): ``pysched analyse``, the 2X
study (``pysched study schedtask-paper``) and ``pysched seeds``, each run as it is there, one
after the other, into a scratch directory. Three states of the caches are measured:

* ``first``: the first run after set-up: numba's kernel cache at its default (set-up compiles
  the kernels: scripts/compile-kernels.sh), the cache of prepared traces (``PYSCHED_CACHE_DIR``)
  in a new directory that set-up's last step fills (scripts/prepare-traces.sh, run here
  untimed in the run and timed apart as ``setup_prepare``);
* ``warm``: both at their defaults, after one untimed run has filled them (skipped when
  ``--no-fill``);
* ``cold``: both in new, empty directories (``NUMBA_CACHE_DIR`` too): what set-up's kernel
  and preparation steps save the first run.

Target (issue 33): at most 300 s after set-up. The set-up itself (apt, the guest, the venv)
is not timed.

Usage: ``python benchmarks/make_run.py --out benchmarks/results/make-run.json [--modes
warm,cold]``; the modes ``--out`` holds from earlier runs and not measured now are kept.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYSCHED = REPO / ".venv" / "bin" / "pysched"
TARGET_S = 300.0
#: make run's steps with its arguments (Makefile: run, RUN_EVAL_ARGS); OUT is the results root.
STEPS = (
    ("analyse", ["analyse", "--data", "data", "--out", "{out}"]),
    ("study", ["study", "schedtask-paper", "--data", "data", "--cores", "8", "--load", "2",
               "--variants", "none", "--epochs", "5", "--out", "{out}/sandbox"]),
    ("seeds", ["seeds", "--data", "data", "--out", "{out}/seeds"]),
)
MODES = ("first", "warm", "cold")


def run_steps(env: dict, scratch: Path) -> dict[str, float]:
    """Each step's wall seconds, into a fresh results root under ``scratch``."""
    out = scratch / "results"
    shutil.rmtree(out, ignore_errors=True)
    times = {}
    for name, args in STEPS:
        cmd = [str(PYSCHED)] + [a.format(out=out) for a in args]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        times[name] = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"make_run benchmark: step {name} failed ({r.returncode}):\n"
                             f"{r.stderr[-2000:]}")
    times["total"] = sum(times[n] for n, _ in STEPS)
    return times


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _earlier_modes(out: Path) -> dict:
    """The modes ``out`` holds from earlier runs ({} when there is no such file); a file that
    is not such a result is refused, not overwritten."""
    if not out.exists():
        return {}
    try:
        modes = json.loads(out.read_text())["modes"]
        if not isinstance(modes, dict):
            raise TypeError("'modes' is not an object")
    except (ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{out}: not a make-run benchmark result ({e}); move it away or give "
                         "another --out") from None
    return modes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--modes", default="first,warm",
                    help=f"comma-separated, of {', '.join(MODES)} (default: first,warm)")
    ap.add_argument("--no-fill", action="store_true",
                    help="time 'warm' without an untimed run before it")
    args = ap.parse_args(argv)
    modes = list(dict.fromkeys(m for m in args.modes.split(",") if m))
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        ap.error(f"--modes: unknown {', '.join(bad) or '(none)'}; choose from {', '.join(MODES)}")
    if not PYSCHED.exists():
        ap.error(f"{PYSCHED} is missing: run `make setup` first")
    # the modes measured before and not now are kept: a run of one mode replaces that one
    result = {"target_s": TARGET_S, "modes": _earlier_modes(args.out),
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "date": _now()},
              "load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="pysched-bench-run-") as tmp:
        scratch = Path(tmp)
        for mode in modes:
            env = dict(os.environ)
            if mode in ("first", "cold"):
                empty = {"first": ("PYSCHED_CACHE_DIR",),
                         "cold": ("NUMBA_CACHE_DIR", "PYSCHED_CACHE_DIR")}[mode]
                for var in empty:
                    env[var] = tempfile.mkdtemp(prefix=f"{mode}-{var.lower()}-", dir=scratch)
            setup_s = None
            if mode == "first":
                # set-up's last step, as set-up runs it (not under CI)
                env_setup = {k: v for k, v in env.items() if k != "CI"}
                t0 = time.perf_counter()
                subprocess.run(["bash", str(REPO / "scripts" / "prepare-traces.sh")],
                               cwd=REPO, env=env_setup, stdout=subprocess.DEVNULL, check=True)
                setup_s = time.perf_counter() - t0
            elif mode == "warm" and not args.no_fill:
                run_steps(env, scratch)  # fill the default caches; not timed
            load0 = os.getloadavg()[0]
            t = run_steps(env, scratch)
            t.update(date=_now(), load_before=load0, load_after=os.getloadavg()[0])
            if setup_s is not None:
                t["setup_prepare"] = setup_s
            t["met"] = t["total"] <= TARGET_S  # the run's steps (set-up's not counted)
            result["modes"][mode] = t
            print(f"make run, {mode} caches: " + ", ".join(
                f"{k} {t[k]:.0f} s" for k in ("analyse", "study", "seeds", "total",
                                             "setup_prepare") if k in t), flush=True)
    result["load_after"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = args.out.with_suffix(args.out.suffix + ".tmp")
    tmp_out.write_text(json.dumps(result, indent=1) + "\n")
    tmp_out.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
