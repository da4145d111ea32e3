"""Put together an evaluation run in parts (``make evaluate-paper``) into one summary.

The study beside the SchedTask paper is long on a small host, so the Makefile runs it as
independent ``pysched evaluate`` parts (one directory each: per workload, the 2X point with
every policy and SchedTask's variants, then the other loads), which a killed study resumes
part by part. This module reads the finished parts and writes the combined evaluation
(:func:`pysched.evaluation.report.write`: ``epochs.parquet``, ``runs.csv``, ``summary.md``
with the paper beside it, figures)::

    python -m pysched.evaluation.study results/paper/parts/* --out results/paper
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from pysched.sandbox.switch_cost import FLAT
from pysched.trace.clock import last_interrupt_s


def read_parts(dirs: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame, dict[Path, str]]:
    """The epochs and runs of every finished part (a directory with ``runs.csv`` and
    ``epochs.parquet``); returns them concatenated and the directories skipped, each with why.

    A part without the ``load_unit`` and ``copies`` columns was written when ``--load K``
    meant K copies of a trace whatever the cores; its loads are not the paper's, so it is
    skipped (to be run again) rather than set beside the paper as if they were.
    """
    epochs, runs, skipped = [], [], {}
    for d in dirs:
        if not ((d / "runs.csv").is_file() and (d / "epochs.parquet").is_file()):
            skipped[d] = "not a finished evaluation"
            continue
        r = pd.read_csv(d / "runs.csv")
        if not {"load_unit", "copies"} <= set(r.columns):
            skipped[d] = ("written before loads were relative to the machine (no load_unit "
                          "column): run it again")
            continue
        runs.append(r)
        epochs.append(pd.read_parquet(d / "epochs.parquet"))
    if not runs:
        return pd.DataFrame(), pd.DataFrame(), skipped
    return pd.concat(epochs, ignore_index=True), pd.concat(runs, ignore_index=True), skipped


def main(argv: list[str] | None = None) -> int:
    """Command line: ``PART... --out DIR``; exit status 2 when no part is finished."""
    ap = argparse.ArgumentParser(prog="python -m pysched.evaluation.study",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="+", type=Path, help="finished `pysched evaluate` outputs")
    ap.add_argument("--out", type=Path, required=True, help="where to write the combination")
    ap.add_argument("--data", type=Path, default=Path("data"),
                    help="where the parts' traces are, by name (default data)")
    args = ap.parse_args(argv)
    epochs, runs, skipped = read_parts(args.parts)
    for d, why in skipped.items():
        print(f"study: {d}: {why}, left out", file=sys.stderr)
    if runs.empty:
        print("study: no finished part", file=sys.stderr)
        return 2
    # parts from before --switch-cost all charged the flat cost; runs of two cost models are
    # not one study (their performance against linux is set beside the same baseline)
    runs["switch_cost"] = runs.get("switch_cost", pd.Series(FLAT, index=runs.index)).fillna(FLAT)
    if runs["switch_cost"].nunique() > 1:
        print(f"study: the parts used different switch costs "
              f"({', '.join(sorted(runs['switch_cost'].unique()))}): combine parts of one "
              f"--switch-cost", file=sys.stderr)
        return 2
    if "last_irq_s" not in runs:  # parts from before runs had it: read it from the traces
        runs["last_irq_s"] = float("nan")
    for name in runs.loc[runs["last_irq_s"].isna(), "trace"].unique():
        if (args.data / name / "manifest.json").is_file():
            runs.loc[runs["trace"] == name, "last_irq_s"] = last_interrupt_s(args.data / name)
    from .report import write
    write(args.out, epochs, runs)
    print(f"study: {len(runs)} runs of {runs['trace'].nunique()} traces -> {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
