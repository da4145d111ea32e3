"""The table a sweep ends with: each point's totals and its performance against ``linux``."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pysched.evaluation.report import policy_note_lines
from pysched.evaluation.runner import performance
from pysched.labels import load_label
from pysched.sandbox.switch_cost import FLAT

#: A run and its baseline are compared at equal values of these columns.
SAME = ("trace_path", "cores", "load_unit", "load", "l1i_kb", "levels", "epoch_ms",
        "switch_cost")
PARAMS = ["trace", "policy", "cores", "load_unit", "load", "l1i_kb", "levels", "switch_cost"]


def summarise(runs: pd.DataFrame, baseline: str = "linux") -> pd.DataFrame:
    """One row per point: its parameters, simulated time, throughput, idleness, i-cache hit
    rates and performance (:func:`pysched.evaluation.runner.performance`), with
    ``vs_<baseline>`` where the sweep has the baseline at the same trace, cores, load and cache
    geometry (NaN otherwise), and the policy's note on its run (``policy_note``)."""
    if runs.empty:
        return runs
    # points stored before switch costs were a dimension were all flat
    runs = runs.assign(switch_cost=runs.get("switch_cost", pd.Series(FLAT, index=runs.index)
                                            ).fillna(FLAT))
    r = performance(runs, baseline, keys=SAME)  # NaN where the baseline is missing
    if "policy_note" not in r:
        r = r.assign(policy_note="")
    cols = PARAMS + ["copies", "heatmap_bits", "elapsed_s", "throughput", "idle_fraction",
                     "icache_app", "icache_os", "performance", f"vs_{baseline}", "wall_s",
                     "policy_note"]
    return r[cols].sort_values(PARAMS, kind="stable").reset_index(drop=True)


def summary_text(table: pd.DataFrame, baseline: str = "linux", limit: int = 40) -> str:
    """``table`` (from :func:`summarise`) as Markdown, at most ``limit`` rows."""
    if table.empty:
        return "(no finished point)"
    head = ["trace", "policy", "cores", "load", "copies", "i$ KB", "levels", "switch cost",
            "sim. ms", "Ginsn/s", "idle", "i$ app", "i$ OS", f"vs {baseline}", "wall s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    pct = (lambda x: "-" if not np.isfinite(x) else f"{100 * x:+.2f} %")
    rate = (lambda x: "-" if not np.isfinite(x) else f"{x:.3f}")
    for x in table.head(limit).itertuples():
        lines.append("| " + " | ".join([
            x.trace, x.policy, str(x.cores), load_label(x.load, x.load_unit), str(x.copies),
            str(x.l1i_kb), str(x.levels), str(x.switch_cost),
            f"{1e3 * x.elapsed_s:.2f}", f"{x.throughput / 1e9:.2f}",
            f"{100 * x.idle_fraction:.1f} %", rate(x.icache_app), rate(x.icache_os),
            pct(getattr(x, f"vs_{baseline}")), f"{x.wall_s:.1f}"]) + " |")
    if len(table) > limit:
        lines.append(f"\n({len(table) - limit} more rows in summary.csv)")
    if "policy_note" in table and (notes := policy_note_lines(table)):
        lines += ["", *notes[:-1]]
    return "\n".join(lines)


__all__ = ["summarise", "summary_text"]
