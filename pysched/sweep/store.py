"""A sweep's results directory: one Parquet file per finished point, written atomically.

Layout of ``OUT``::

    runs/<key>.parquet     the run's totals (one row), written first
    epochs/<key>.parquet   one row per epoch; its presence marks the point finished
    sweep.toml             the sweep file last run into OUT
    summary.csv, summary.md

``<key>`` is :attr:`pysched.sweep.spec.Point.key`. Each file is written under a hidden
temporary name (``.<key>.parquet.tmp-<pid>``, which Parquet readers skip) and renamed, so a
file with a final name is complete; a crash leaves at most hidden temporaries, removed by the
next run.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from .spec import RESULT_VERSION, Point

EPOCHS, RUNS = "epochs", "runs"


class ResultStore:
    """Read and write the per-point files of a results directory.

    Parameters
    ----------
    out : Path
        The directory (created when missing).
    """

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        for sub in (EPOCHS, RUNS):
            (self.out / sub).mkdir(parents=True, exist_ok=True)

    def path(self, key: str, kind: str = EPOCHS) -> Path:
        return self.out / kind / f"{key}.parquet"

    def finished(self, point: Point) -> bool:
        """Whether ``point`` has both files (the epochs file is renamed into place last)."""
        return self.path(point.key).is_file() and self.path(point.key, RUNS).is_file()

    def remove_temporaries(self) -> int:
        """Delete what an interrupted write left; returns how many files."""
        n = 0
        for sub in (EPOCHS, RUNS):
            for f in (self.out / sub).glob(".*.tmp-*"):
                f.unlink(missing_ok=True)
                n += 1
        return n

    def _write(self, frame: pd.DataFrame, final: Path) -> None:
        tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
        try:
            frame.to_parquet(tmp, index=False)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)

    def write(self, point: Point, epochs: pd.DataFrame, runs: pd.DataFrame) -> None:
        """Store a finished point's frames (runs first: the epochs file marks it finished)."""
        self._write(runs, self.path(point.key, RUNS))
        self._write(epochs, self.path(point.key))

    def read(self, points: list[Point] | None = None, kind: str = EPOCHS) -> pd.DataFrame:
        """The rows of ``points`` (default every finished point in the directory of this
        :data:`~.spec.RESULT_VERSION`: files an older version wrote, whose columns may mean
        something else, e.g. version 1's load in copies, are left out)."""
        if points is None:
            files = sorted((self.out / kind).glob("[!.]*.parquet"))
        else:
            files = [self.path(p.key, kind) for p in points if self.finished(p)]
        frames = [pd.read_parquet(f) for f in files]
        frames = [f for f in frames if "result_version" in f
                  and (f["result_version"] == RESULT_VERSION).all()]
        if not frames:
            return pd.DataFrame()
        return pd.concat(frames, ignore_index=True)


def read_results(out: str | Path, kind: str = EPOCHS) -> pd.DataFrame:
    """Every finished point's rows in a sweep directory: ``kind`` ``"epochs"`` (one row per run
    and epoch) or ``"runs"`` (one row per run)."""
    if kind not in (EPOCHS, RUNS):
        raise ValueError(f"kind must be {EPOCHS!r} or {RUNS!r}, got {kind!r}")
    if not (Path(out) / kind).is_dir():
        raise FileNotFoundError(f"{out}: no {kind}/ directory (not a sweep output)")
    return ResultStore(out).read(kind=kind)


__all__ = ["ResultStore", "read_results"]
